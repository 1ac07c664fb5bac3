"""What the ACME tests (tests/integration/test_acme*.py) share: their skip marker (pebble, and
redis-server for a cluster, installed), the gateway config of an ACME listener (tls-alpn-01, or
http-01 beside a cleartext listener, alone or in a cluster), a config's refusal at load, the
orders pebble accepted, and the served chain read with openssl s_client and checked with openssl
x509 and verify. The pebble
fixture is in tests/integration/conftest.py (procs.Pebble); test modules import from here, never
from one another."""
import re
import shutil
import subprocess

import pytest

from gwtest import check_config
from procs import free_port


def installed(*commands):
    """Whether every one of commands is on PATH."""
    return all(shutil.which(c) for c in commands)


# pytestmark of every module that runs pebble (and pebble-challtestsrv, which procs.Pebble starts
# beside it); needs_pebble_and_redis for those that also start redis-server.
needs_pebble = pytest.mark.skipif(not installed("pebble", "pebble-challtestsrv"),
                                  reason="pebble is not installed (scripts/setup installs it)")
needs_pebble_and_redis = pytest.mark.skipif(
    not installed("pebble", "pebble-challtestsrv", "redis-server"),
    reason="pebble or redis-server is not installed (scripts/setup installs them)")


def acme_config(port, directory, ca, state, names=("a.test", "b.test"), workers=2,
                challenge="tls-alpn-01", key_type="ec-p256", shared_key=None, acme_extra="",
                tls_extra="", http_port=None, cleartext_extra="", admin=None,
                upstream="127.0.0.1:9", redis=None, check_interval="1s"):
    """A gateway whose TLS listener on port takes its certificate for names from the ACME
    server at directory (trusting the CA file ca; None: the system's), its state in the folder
    state. What the tests vary:
    - the acme section: challenge, key_type, shared_key (a file), acme_extra (YAML lines
      indented two spaces, e.g. "  renew_before: 50%\n");
    - tls_extra: more keys of the listener's tls mapping (", client_auth: {...}");
    - http_port: a cleartext listener there (for http-01), its YAML followed by cleartext_extra,
      and the route denying loopback clients (a challenge answered was answered before routing);
    - admin: an admin listener on that port; upstream: the one server of the route's upstream;
    - redis: a `cluster:` on Redis at that port (timeout 1s), and acme.cluster_check_interval
      check_interval (None: the default, 10s): 1s makes the orderer's first validation wait
      3.5s past its lock, not 12.5s, and the others learn of its order within a second. Every
      instance of a test must have the same (the orderer waits by its own)."""
    acme = [f"  directory: {directory}"]
    if ca is not None:
        acme.append(f"  directory_ca: {ca}")
    acme += ["  email: ops@a.test", f"  challenge: {challenge}", f"  key_type: {key_type}",
             f"  state: {state}"]
    if shared_key is not None:
        acme.append(f"  shared_key: {shared_key}")
    if redis is not None and check_interval is not None:
        acme.append(f"  cluster_check_interval: {check_interval}")
    text = f"workers: {workers}\nlog_level: info\nacme:\n" + "".join(l + "\n" for l in acme)
    text += acme_extra
    if admin is not None:
        text += f"admin:\n  address: 127.0.0.1:{admin}\n"
    text += f"""listen:
  - address: 127.0.0.1:{port}
    tls: {{acme: [{", ".join(names)}]{tls_extra}}}
"""
    if http_port is not None:
        text += f"  - address: 127.0.0.1:{http_port}{cleartext_extra}\n"
    text += f"""upstreams:
  app:
    servers: [{upstream}]
    health: {{fail_threshold: 1000}}
routes:
  - {{ host: '*', path: /, upstream: app{", deny: [127.0.0.0/8]" if http_port else ""} }}
"""
    if redis is not None:
        text += f"cluster:\n  redis: 127.0.0.1:{redis}\n  timeout: 1s\n"
    return text


def refused(r, tmp_path, want):
    """r, `h2gate --check-config` of tmp_path/c.yaml (gwtest.check_config), refused it: exit 1,
    want in its message, which starts at a position of the file (FILE:LINE:COL)."""
    assert r.returncode == 1 and want in r.stderr, r.stderr
    assert re.search(re.escape(str(tmp_path / "c.yaml")) + r":\d+:\d+: ", r.stderr), r.stderr


def listener_refused(h2gate_bin, tmp_path, tls, want, acme=""):
    """A config of one listener whose tls is the YAML tls, after the text acme (an acme
    section, or none), is refused at load with the message want (refused)."""
    text = (acme + f"listen:\n  - address: 127.0.0.1:{free_port()}\n    tls: {tls}\n"
            "upstreams:\n  app:\n    servers: [127.0.0.1:9]\n"
            "routes:\n  - { host: '*', path: /, upstream: app }\n")
    refused(check_config(h2gate_bin, tmp_path, text), tmp_path, want)


def orders(pb, *gateways):
    """The new orders pebble accepted: its POSTs to newOrder less those it refused with
    badNonce (pebble's default rejection is on; each refusal is logged by the gateway that got
    it, event=acme_bad_nonce state=order)."""
    retried = sum(g.log().count("state=order action=retry") for g in gateways)
    return pb.log().count("POST /order-plz") - retried


def served_chain(port, name):
    """The certificates the listener sends for SNI name (None: a ClientHello without SNI)
    (openssl s_client), PEM, leaf first."""
    sni = ["-servername", name] if name is not None else ["-noservername"]
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", *sni,
                        "-showcerts"], input="", capture_output=True, text=True, timeout=20)
    return re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", p.stdout,
                      re.S)


def x509(pem, *args):
    return subprocess.run(["openssl", "x509", "-noout", *args], input=pem, capture_output=True,
                          text=True, timeout=10).stdout


def verify(tmp_path, chain, root, name):
    """openssl verify of the served chain against pebble's root, for the host name."""
    (tmp_path / "leaf.pem").write_text(chain[0])
    (tmp_path / "untrusted.pem").write_text("".join(chain[1:]))
    (tmp_path / "root.pem").write_text(root)
    return subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "root.pem"),
                           "-untrusted", str(tmp_path / "untrusted.pem"), "-verify_hostname",
                           name, str(tmp_path / "leaf.pem")], capture_output=True, text=True,
                          timeout=10)

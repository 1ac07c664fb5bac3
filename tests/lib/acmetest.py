"""What the ACME tests (tests/integration/test_acme*.py) share: the gateway configs of an ACME
listener (tls-alpn-01, and http-01 beside a cleartext listener), the orders pebble accepted, and
the served chain read with openssl s_client and checked with openssl x509 and verify. The pebble
fixture is in tests/integration/conftest.py (procs.Pebble); test modules import from here, never
from one another."""
import re
import subprocess


def acme_config(port, directory, ca, state, names=("a.test", "b.test"), workers=2):
    """A gateway whose TLS listener on port takes its certificate for names from the ACME
    server at directory (tls-alpn-01), its state in the folder state."""
    return f"""workers: {workers}
log_level: info
acme:
  directory: {directory}
  directory_ca: {ca}
  email: ops@a.test
  challenge: tls-alpn-01
  key_type: ec-p256
  state: {state}
listen:
  - address: 127.0.0.1:{port}
    tls: {{acme: [{", ".join(names)}]}}
upstreams:
  app:
    servers: [127.0.0.1:9]
    health: {{fail_threshold: 1000}}
routes:
  - {{ host: '*', path: /, upstream: app }}
"""


def http01_config(tls_port, http_port, directory, ca, state, names=("a.test", "b.test"),
                  workers=2, challenge="http-01", key_type="ec-p256", cleartext_extra=""):
    """acme_config's gateway validated by http-01 (or challenge) on a cleartext listener on
    http_port (its YAML followed by cleartext_extra), the route denying loopback clients."""
    return f"""workers: {workers}
log_level: info
acme:
  directory: {directory}
  directory_ca: {ca}
  email: ops@a.test
  challenge: {challenge}
  key_type: {key_type}
  state: {state}
listen:
  - address: 127.0.0.1:{tls_port}
    tls: {{acme: [{", ".join(names)}]}}
  - address: 127.0.0.1:{http_port}{cleartext_extra}
upstreams:
  app:
    servers: [127.0.0.1:9]
    health: {{fail_threshold: 1000}}
routes:
  - {{ host: '*', path: /, upstream: app, deny: [127.0.0.0/8] }}
"""


def orders(pb, *gateways):
    """The new orders pebble accepted: its POSTs to newOrder less those it refused with
    badNonce (pebble's default rejection is on; each refusal is logged by the gateway that got
    it, event=acme_bad_nonce state=order)."""
    refused = sum(g.log().count("state=order action=retry") for g in gateways)
    return pb.log().count("POST /order-plz") - refused


def served_chain(port, name):
    """The certificates the listener sends for SNI name (openssl s_client), PEM, leaf first."""
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername",
                        name, "-showcerts"], input="", capture_output=True, text=True,
                       timeout=20)
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

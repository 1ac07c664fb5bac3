"""The ACME client of several instances sharing one Redis (`cluster:` with `acme.shared_key`):
one instance orders under a lock, the others answer its tls-alpn-01 validations from the
challenge records in Redis and pick up the certificate, whose key Redis holds sealed
(AES-256-GCM under the shared key). Against Debian's pebble and redis-server; the served
certificates read with openssl s_client and verified against pebble's root."""
import base64
import os
import re
import subprocess
import time

import pytest

from procs import free_port, slow
from acmetest import (acme_config, needs_pebble_and_redis, orders, refused, served_chain, verify,
                      x509)

pytestmark = needs_pebble_and_redis


def shared_key(tmp_path, name="shared.key", raw=None):
    """A shared key file (32 random bytes in base64, mode 0600) and its path."""
    path = tmp_path / name
    path.write_text(base64.b64encode(raw or os.urandom(32)).decode() + "\n")
    os.chmod(path, 0o600)
    return str(path)


def cluster_config(port, pb, state, key, redis_port, names=("a.test", "b.test"),
                   check_interval="1s"):
    return acme_config(port, pb.directory, pb.ca, state, names=names, workers=1, shared_key=key,
                       redis=redis_port, check_interval=check_interval)


def seal(key_text, cid, chain, key_pem):
    """The value acme/shared.c stores: "h2ga", version 1, the chain's and the key's lengths
    (32 bits big-endian), the chain, a 96-bit nonce, the key PEM encrypted with AES-256-GCM
    and its 16-byte tag; the head, the id, a zero byte and the chain authenticated."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    import struct
    head = b"h2ga\x01" + struct.pack(">II", len(chain), len(key_pem))
    nonce = os.urandom(12)
    ct = AESGCM(base64.b64decode(key_text)).encrypt(nonce, key_pem,
                                                    head + cid.encode() + b"\0" + chain)
    return head + chain + nonce + ct


def unseal(key_text, cid, value):
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    import struct
    assert value[:5] == b"h2ga\x01"
    cl, kl = struct.unpack(">II", value[5:13])
    assert len(value) == 13 + cl + 12 + kl + 16
    chain = value[13:13 + cl]
    nonce = value[13 + cl:25 + cl]
    pem = AESGCM(base64.b64decode(key_text)).decrypt(nonce, value[25 + cl:],
                                                     value[:13] + cid.encode() + b"\0" + chain)
    return chain, pem


def fingerprint(pem):
    return x509(pem, "-fingerprint", "-sha256").strip()


def log_time(log, text, nth=0):
    """The time (seconds, UTC) of the log line holding text (the first, or the nth after it),
    from its ts= field."""
    import datetime
    line = [l for l in log.splitlines() if text in l][nth]
    ts = re.search(r"ts=(\S+)Z", line).group(1)
    return datetime.datetime.fromisoformat(ts).replace(
        tzinfo=datetime.timezone.utc).timestamp()


def redis_keys(r, pattern):
    return sorted(k.decode() for k in r.cmd("KEYS", pattern))


def test_two_instances_obtain_one_certificate_through_redis(gateway, pebble, redis_server,
                                                            tmp_path):
    """B orders (it starts first and takes the lock); pebble validates at A's port only, so
    the order succeeds only if A answers from the challenge records B published in Redis. A
    orders nothing and picks up B's certificate; both serve the same leaf."""
    r = redis_server()
    port_a, port_b = free_port(), free_port()
    pb = pebble(port_a)
    key = shared_key(tmp_path)
    gb = gateway(cluster_config(port_b, pb, tmp_path / "state-b", key, r.port),
                 wait=[("127.0.0.1", port_b)])
    log_b = gb.wait_log("event=acme_order_start", timeout=10)
    assert "event=acme_cluster_lock " in log_b, log_b[-3000:]
    ga = gateway(cluster_config(port_a, pb, tmp_path / "state-a", key, r.port),
                 wait=[("127.0.0.1", port_a)])
    log_b = gb.wait_log("event=acme_certificate_installed", timeout=40)
    assert "event=acme_certificate_installed names=a.test,b.test" in log_b, log_b[-4000:]
    # B stores the certificate in Redis after it installed it (a line or two later)
    log_b = gb.wait_log("event=acme_cluster_stored", timeout=10)
    assert "event=acme_cluster_stored" in log_b, log_b[-3000:]
    log_a = ga.wait_log("event=acme_certificate_installed", timeout=20)
    assert re.search(r"event=acme_certificate_installed names=a\.test,b\.test .*source=cluster",
                     log_a), log_a[-4000:]
    # A waited for B's order and answered its validations, but ordered nothing itself
    assert log_a.count("event=acme_cluster_wait") == 1, log_a[-3000:]
    assert "event=acme_cluster_challenges" in log_a, log_a[-3000:]
    assert "acme_order_start" not in log_a, log_a[-3000:]
    assert log_b.count("event=acme_order_start") == 1
    assert orders(pb, ga, gb) == 1
    # acme.cluster_check_interval 1s: B's first validation waited 1s + 2.5s past its lock (A
    # read the records twice by then), not the default's 10s + 2.5s. B's second challenge is
    # published once the first name is valid: 3.5s after the lock at the earliest, and well
    # before 12.5s (the default's wait alone)
    took = log_time(log_b, "event=acme_challenge ", 1) - log_time(log_b, "event=acme_cluster_lock ")
    assert 3.5 <= took < 12.5, took
    # both serve the same leaf, which verifies against pebble's root for both names
    root = pb.roots()
    for name in ("a.test", "b.test"):
        ca, cb = served_chain(port_a, name), served_chain(port_b, name)
        assert fingerprint(ca[0]) == fingerprint(cb[0])
        for chain in (ca, cb):
            v = verify(tmp_path, chain, root, name)
            assert v.returncode == 0 and ": OK" in v.stdout, v.stdout + v.stderr
    # A wrote it to its own state folder too
    (dir_a,) = [d for d in (tmp_path / "state-a").iterdir() if d.is_dir()]
    assert fingerprint((dir_a / "cert.pem").read_text()) == fingerprint(ca[0])
    # Redis: the sealed value, its chain in clear but no private key; no lock, no challenges
    (cert_key,) = redis_keys(r, "h2gate:acme:cert:*")
    assert cert_key == "h2gate:acme:cert:" + dir_a.name
    value = r.cmd("GET", cert_key)
    assert value.startswith(b"h2ga\x01")
    assert b"-----BEGIN CERTIFICATE-----" in value
    assert b"PRIVATE KEY" not in value
    key_pem = (dir_a / "key.pem").read_bytes()
    der = subprocess.run(["openssl", "pkey", "-outform", "DER"], input=key_pem,
                         capture_output=True, timeout=10).stdout
    assert der and der not in value and base64.b64encode(der)[:40] not in value
    assert redis_keys(r, "h2gate:acme:lock:*") == []
    assert redis_keys(r, "h2gate:acme:challenges:*") == []
    # opened here with the shared key, by the documented layout: the key PEM A wrote
    chain, pem = unseal(open(key).read(), dir_a.name, value)
    assert pem == key_pem
    assert fingerprint(chain.decode()) == fingerprint(ca[0])


def test_http01_answered_by_the_instance_that_did_not_order(gateway, pebble, redis_server,
                                                             tmp_path):
    """challenge: http-01 in a cluster: B orders; pebble asks A's cleartext listener only, so
    the order succeeds only if A answers the tokens B published in Redis."""
    r = redis_server()
    tls_a, tls_b, http_a, http_b = free_port(), free_port(), free_port(), free_port()
    pb = pebble(tls_a, http_port=http_a)
    key = shared_key(tmp_path)

    def cfg(tls_port, http_port, state):
        return acme_config(tls_port, pb.directory, pb.ca, state, workers=1, http_port=http_port,
                           challenge="http-01", shared_key=key, redis=r.port)
    gb = gateway(cfg(tls_b, http_b, tmp_path / "state-b"), wait=[("127.0.0.1", tls_b)])
    gb.wait_log("event=acme_order_start", timeout=10)
    ga = gateway(cfg(tls_a, http_a, tmp_path / "state-a"), wait=[("127.0.0.1", tls_a)])
    log_b = gb.wait_log("event=acme_certificate_installed", timeout=40)
    assert "event=acme_certificate_installed names=a.test,b.test" in log_b, log_b[-4000:]
    log_a = ga.wait_log("event=acme_certificate_installed", timeout=20)
    assert "source=cluster" in log_a and "acme_order_start" not in log_a, log_a[-4000:]
    # A's cleartext listener answered the validator (B's listener was never asked)
    assert "event=acme_http01" in log_a and "status=200" in log_a, log_a[-4000:]
    assert "status=200" not in "".join(l for l in log_b.splitlines()
                                       if "event=acme_http01" in l)
    for name in ("a.test", "b.test"):
        chain = served_chain(tls_a, name)
        v = verify(tmp_path, chain, pb.roots(), name)
        assert v.returncode == 0 and ": OK" in v.stdout, v.stdout + v.stderr
    assert orders(pb, ga, gb) == 1


def test_a_wrong_shared_key_is_logged_and_that_instance_orders_for_itself(
        gateway, pebble, redis_server, tmp_path):
    """B (the right key) has stored its certificate; A, given another key, cannot open it: it
    says so, orders for itself under the lock (pebble validates at B's port: B answers A's
    challenges from Redis) and leaves B's value in Redis as it was."""
    r = redis_server()
    port_a, port_b = free_port(), free_port()
    pb = pebble(port_b)
    gb = gateway(cluster_config(port_b, pb, tmp_path / "state-b", shared_key(tmp_path), r.port,
                                names=("w.test",)), wait=[("127.0.0.1", port_b)])
    gb.wait_log("event=acme_cluster_stored", timeout=40)
    (cert_key,) = redis_keys(r, "h2gate:acme:cert:*")
    stored = r.cmd("GET", cert_key)
    ga = gateway(cluster_config(port_a, pb, tmp_path / "state-a",
                                shared_key(tmp_path, "other.key"), r.port, names=("w.test",)),
                 wait=[("127.0.0.1", port_a)])
    log_a = ga.wait_log("event=acme_certificate_installed", timeout=40)
    assert re.search(r"event=acme_shared_unreadable id=w\.test-[0-9a-f]{12} bytes=\d+ "
                     r"reason=\"it does not open with our shared_key", log_a), log_a[-3000:]
    assert "event=acme_order_start names=w.test" in log_a, log_a[-3000:]
    assert not re.search("acme_certificate_installed.*source=cluster", log_a)
    # logged after the certificate was installed, once it found Redis's value not its own
    assert "event=acme_cluster_not_stored" in ga.wait_log("event=acme_cluster_not_stored",
                                                          timeout=10)
    assert "event=acme_cluster_challenges" in gb.log()  # B answered A's validation
    assert orders(pb, ga, gb) == 2
    assert r.cmd("GET", cert_key) == stored
    a, b = served_chain(port_a, "w.test")[0], served_chain(port_b, "w.test")[0]
    assert fingerprint(a) != fingerprint(b)
    assert verify(tmp_path, served_chain(port_a, "w.test"), pb.roots(), "w.test").returncode == 0


def test_redis_down_each_instance_orders_alone_logged_once(gateway, pebble, tmp_path):
    port = free_port()
    pb = pebble(port)
    g = gateway(cluster_config(port, pb, tmp_path / "state", shared_key(tmp_path), free_port(),
                               names=("d.test",)), wait=[("127.0.0.1", port)])
    log = g.wait_log("event=acme_certificate_installed", timeout=40)
    assert "event=acme_certificate_installed names=d.test" in log, log[-3000:]
    assert log.count("event=acme_cluster_unavailable") == 1, log[-3000:]
    assert "event=acme_order_start names=d.test" in log
    assert orders(pb, g) == 1


def check(h2gate_bin, tmp_path, key, cluster=True):
    """h2gate -t of a config with an acme listener, acme.shared_key the file key (None: none),
    a cluster."""
    from gwtest import check_config
    text = acme_config(free_port(), "https://127.0.0.1:14000/dir", None, tmp_path / "st",
                       shared_key=key, redis=6379 if cluster else None)
    return check_config(h2gate_bin, tmp_path, text)


def test_shared_key_required_with_a_cluster(h2gate_bin, tmp_path):
    refused(check(h2gate_bin, tmp_path, None), tmp_path, "acme needs 'shared_key' with 'cluster'")
    assert check(h2gate_bin, tmp_path, None, cluster=False).returncode == 0


def test_shared_key_world_readable_refused(h2gate_bin, tmp_path):
    k = shared_key(tmp_path)
    os.chmod(k, 0o644)
    refused(check(h2gate_bin, tmp_path, k), tmp_path, "must not be world-readable")


@pytest.mark.parametrize("content", [b"x" * 31, b"x" * 33,
                                     base64.b64encode(b"x" * 31) + b"\n",
                                     base64.b64encode(b"x" * 33), b"", b"%" * 43 + b"="])
def test_shared_key_of_the_wrong_size_refused(h2gate_bin, tmp_path, content):
    k = tmp_path / "k"
    k.write_bytes(content)
    os.chmod(k, 0o600)
    refused(check(h2gate_bin, tmp_path, k), tmp_path, "must hold 32 bytes, raw or in base64")


def test_shared_key_missing_file_refused(h2gate_bin, tmp_path):
    refused(check(h2gate_bin, tmp_path, f"{tmp_path}/none"), tmp_path,
            f"acme 'shared_key' file '{tmp_path}/none' cannot be read")


def test_shared_key_raw_and_base64_accepted(h2gate_bin, tmp_path):
    raw = tmp_path / "raw.key"
    raw.write_bytes(os.urandom(32))
    os.chmod(raw, 0o600)
    for k in (str(raw), shared_key(tmp_path)):
        r = check(h2gate_bin, tmp_path, k)
        assert r.returncode == 0, r.stderr


def name_set_id(*names):
    """The name set's folder name (acme/client.c names_dir): the first name and 12 hex digits
    of the SHA-256 of the sorted, lower-case names, one per line."""
    import hashlib
    text = "".join(n.lower() + "\n" for n in sorted(names, key=str.lower))
    return names[0].lower() + "-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def acme_tls_leaf(port, name):
    """The certificate the listener answers ALPN acme-tls/1 with for name (DER)."""
    import ssl
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername",
                        name, "-alpn", "acme-tls/1"], input="", capture_output=True, text=True,
                       timeout=20)
    m = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", p.stdout, re.S)
    return ssl.PEM_cert_to_DER_cert(m.group(0)) if m else b""


def test_lock_held_elsewhere_waits_answers_shared_challenges_and_bounds_a_read(
        gateway, redis_server, tmp_path):
    """Another instance's lock in Redis: this one orders nothing and waits; a challenge record
    put in Redis is answered on its listener (the acme-tls/1 certificate carries the SHA-256 of
    the key authorization, RFC 8737 §3); one read installs at most 100 records; once the lock
    is let go, it takes it."""
    import hashlib
    r = redis_server()
    port = free_port()
    cid = name_set_id("a.test")
    assert r.cmd("SET", f"h2gate:acme:lock:{cid}", "another", "PX", "60000") == b"OK"

    class Down:  # an ACME server nobody listens on: nothing may be asked of it while waiting
        directory = f"https://127.0.0.1:{free_port()}/dir"
        ca = None
    text = cluster_config(port, Down, tmp_path / "st", shared_key(tmp_path), r.port,
                          names=("a.test",))
    g = gateway(text, wait=[("127.0.0.1", port)])
    g.wait_log("event=acme_cluster_wait", timeout=10)
    ka = "tok_1.thumbprint_of_the_other_account"
    r.cmd("HSET", f"h2gate:acme:challenges:{cid}", "tls-alpn-01:a.test",
          f"tls-alpn-01\na.test\ntok_1\n{ka}")
    log = g.wait_log("records=1 installed=1", timeout=5)
    assert f"event=acme_cluster_challenges id={cid} records=1 installed=1" in log, log[-3000:]
    assert hashlib.sha256(ka.encode()).digest() in acme_tls_leaf(port, "a.test")
    # 150 more records for this name (and one for a name not in the set): 100 installed
    args = []
    for i in range(150):
        args += [f"tls-alpn-01:x{i}", f"tls-alpn-01\na.test\ntok\nka{i}"]
    r.cmd("HSET", f"h2gate:acme:challenges:{cid}", *args)
    log = g.wait_log("records=151", timeout=5)
    assert f"event=acme_cluster_challenges id={cid} records=151 installed=100" in log, log[-3000:]
    assert "acme_order_start" not in log
    # the lock let go: this instance takes it (and orders, in vain here)
    r.cmd("DEL", f"h2gate:acme:lock:{cid}")
    log = g.wait_log("event=acme_order_start", timeout=6)
    assert f"event=acme_cluster_lock id={cid} held=us" in log, log[-3000:]
    assert log.count("event=acme_cluster_wait") == 1
    # the order fails (no ACME server): the lock is kept for most of the backoff, not 60s
    log = g.wait_log("event=acme_order_failed", timeout=15)
    m = re.search(r"event=acme_order_failed .*retry_in_ms=(\d+)", log)
    assert m, log[-3000:]
    # the shorter lifetime goes to Redis after that line (a PEXPIRE on the cluster connection):
    # read back at once, the lock had the 60 s it was taken with (an ASan run under load)
    deadline = time.monotonic() + slow(5)
    while True:
        ttl = r.cmd("PTTL", f"h2gate:acme:lock:{cid}")
        if 0 < ttl <= int(m.group(1)) - 500 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert 0 < ttl <= int(m.group(1)) - 500, (ttl, m.group(1))


def test_a_chain_past_max_reply_is_not_stored_and_served_locally(gateway, pebble, redis_server,
                                                                  tmp_path):
    r = redis_server()
    port = free_port()
    pb = pebble(port)
    g = gateway(cluster_config(port, pb, tmp_path / "st", shared_key(tmp_path), r.port,
                               names=("m.test",)) + "  max_reply: 1KiB\n",
                wait=[("127.0.0.1", port)])
    log = g.wait_log("event=acme_cluster_not_stored", timeout=40)
    assert "reason=\"larger than cluster.max_reply allows\"" in log, log[-3000:]
    assert "event=acme_certificate_installed names=m.test" in log
    assert redis_keys(r, "h2gate:acme:cert:*") == []
    assert verify(tmp_path, served_chain(port, "m.test"), pb.roots(), "m.test").returncode == 0


def self_signed(name, days=30):
    """A certificate for name and its key, PEM (python3-cryptography, EC P-256)."""
    import datetime
    from cryptography import x509 as cx
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    k = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = cx.Name([cx.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (cx.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(k.public_key()).serial_number(cx.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(cx.SubjectAlternativeName([cx.DNSName(name)]), critical=False)
            .sign(k, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()))


def test_a_reload_with_the_right_key_picks_the_stored_certificate_up(gateway, redis_server,
                                                                     tmp_path):
    """A value sealed here (the documented layout) under key 1; the instance has key 2 and
    says it cannot open it; with key 1 in the same file and a reload, its next read installs
    it (source=cluster) without an order. Sealed for another name set, it would not open."""
    import signal
    r = redis_server()
    port = free_port()
    cid = name_set_id("k.test")
    k1 = base64.b64encode(os.urandom(32)).decode()
    chain, key_pem = self_signed("k.test")
    r.cmd("SET", f"h2gate:acme:cert:{cid}", seal(k1, cid, chain, key_pem))
    r.cmd("SET", f"h2gate:acme:lock:{cid}", "another", "PX", "60000")  # nobody orders

    class Down:
        directory = f"https://127.0.0.1:{free_port()}/dir"
        ca = None
    keyfile = shared_key(tmp_path)
    text = cluster_config(port, Down, tmp_path / "st", keyfile, r.port, names=("k.test",))
    g = gateway(text, wait=[("127.0.0.1", port)])
    log = g.wait_log("event=acme_shared_unreadable", timeout=10)
    assert f"event=acme_shared_unreadable id={cid}" in log, log[-3000:]
    with open(keyfile, "w") as f:
        f.write(k1 + "\n")
    g.signal(signal.SIGHUP)
    log = g.wait_log("event=acme_certificate_installed", timeout=10)
    assert re.search(r"event=acme_certificate_installed names=k\.test .*source=cluster", log), \
        log[-3000:]
    assert fingerprint(served_chain(port, "k.test")[0]) == fingerprint(chain.decode())
    assert "acme_order_start" not in log
    assert log.count("event=acme_shared_unreadable") == 1


def instance_a_installed(gateway, pebble, r, tmp_path, port_a, name, check_interval, timeout):
    """Instance A (on port_a, reading acme:orders every check_interval) alone with Redis r
    orders name's certificate, pebble validating at port_a only, as it will for another
    instance's order later: (pebble, the shared key's path, A) once A installed it."""
    pb = pebble(port_a)
    key = shared_key(tmp_path)
    ga = gateway(cluster_config(port_a, pb, tmp_path / "state-a", key, r.port, names=(name,),
                                check_interval=check_interval), wait=[("127.0.0.1", port_a)])
    ga.wait_log("event=acme_certificate_installed", timeout=timeout)
    return pb, key, ga


def wait_orders_read(mon, seconds):
    """Wait (seconds, scaled by slow()) until the RedisMonitor mon sees a GET of acme:orders:
    an instance asks for it each cluster_check_interval (a fixed sleep would bet that its timer
    fired in time on a loaded machine)."""
    deadline = time.monotonic() + slow(seconds)
    while not [c for c in mon.commands()
               if c[0].upper() == b"GET" and c[1:2] == [b"h2gate:acme:orders"]]:
        assert time.monotonic() < deadline, "A did not ask for acme:orders again"
        time.sleep(0.1)


def test_idle_instance_reads_no_challenges_yet_answers_an_order_it_learns_of(
        gateway, pebble, redis_server, tmp_path):
    """A orders (pebble validates at A's port only), then idles with its certificate: once
    acme:orders is gone (A's order let it expire; deleted here to save the wait) and A has read
    it gone, Redis runs no HGETALL of the challenge records over 3 s, and at most one GET of
    acme:orders (one each cluster_check_interval: 5 s here, longer than the watch). Then B
    starts with the certificate gone from Redis and orders: A, idle, learns of it from
    acme:orders and answers B's validation, which pebble still asks of A only; B's first
    publish waited for that."""
    from procs import RedisMonitor
    r = redis_server()
    port_a, port_b = free_port(), free_port()
    cid = name_set_id("i.test")
    pb, key, ga = instance_a_installed(gateway, pebble, r, tmp_path, port_a, "i.test", "5s", 40)
    assert 0 < r.cmd("PTTL", "h2gate:acme:orders") <= 15000
    mon = RedisMonitor(r)
    r.cmd("DEL", "h2gate:acme:orders")
    # A has read it gone once it asked for it after the DEL; the 3 s watched start then
    wait_orders_read(mon, 15)
    mon.commands()  # and the records read in that GET's own round (still active then)
    time.sleep(3)
    idle = mon.commands()
    assert not [c for c in idle if c[0].upper() == b"HGETALL"], idle
    assert len([c for c in idle if c[0].upper() == b"GET" and c[1] == b"h2gate:acme:orders"]) <= 1
    # B orders the same names (the stored certificate gone, and the shared account, so that
    # pebble does not reuse A's valid authorization): A answers the validation
    r.cmd("DEL", f"h2gate:acme:cert:{cid}", "h2gate:acme:account")
    gb = gateway(cluster_config(port_b, pb, tmp_path / "state-b", key, r.port, names=("i.test",),
                                check_interval="5s"), wait=[("127.0.0.1", port_b)])
    log_b = gb.wait_log("event=acme_certificate_installed", timeout=60)
    assert "event=acme_order_start names=i.test" in log_b and "acme_order_failed" not in log_b, \
        log_b[-3000:]
    log_a = ga.log()
    assert f"event=acme_cluster_challenges id={cid} records=1 installed=1" in log_a, log_a[-3000:]
    assert log_a.count("event=acme_order_start") == 1
    during = mon.commands()
    assert [c for c in during if c[0].upper() == b"HGETALL"], during


def test_instances_order_with_one_account_stored_sealed(gateway, pebble, redis_server,
                                                        tmp_path):
    """B orders first and stores its account key sealed in Redis (acme:account); A, later and
    for other names (on the port pebble validates, once B is gone), orders with that account:
    the same account URL, and A's state folder takes the key."""
    r = redis_server()
    port = free_port()
    pb = pebble(port)
    key = shared_key(tmp_path)
    gb = gateway(cluster_config(port, pb, tmp_path / "state-b", key, r.port, names=("x.test",)),
                 wait=[("127.0.0.1", port)])
    log_b = gb.wait_log("event=acme_certificate_installed", timeout=40)
    assert "event=acme_cluster_account id=" in log_b and "source=us" in log_b, log_b[-3000:]
    gb.stop()
    value = r.cmd("GET", "h2gate:acme:account")
    assert value.startswith(b"h2ga\x01") and b"PRIVATE KEY" not in value
    _, pem = unseal(open(key).read(), "account", value)
    assert pem == (tmp_path / "state-b" / "account.key").read_bytes()
    ga = gateway(cluster_config(port, pb, tmp_path / "state-a", key, r.port, names=("y.test",)),
                 wait=[("127.0.0.1", port)])
    log_a = ga.wait_log("event=acme_certificate_installed", timeout=40)
    assert "event=acme_cluster_account names=y.test source=cluster" in log_a, log_a[-3000:]

    def account(log):
        return re.search(r"event=acme_certificate_installed .* account=(\S+)", log).group(1)
    assert account(log_a) == account(log_b)
    assert (tmp_path / "state-a" / "account.key").read_bytes() == pem


def test_orderer_waits_for_the_longest_check_interval_declared(gateway, pebble, redis_server,
                                                               tmp_path):
    """Instances with different acme.cluster_check_interval: A reads acme:orders every 5 s, B
    every 1 s. Each declares its interval in acme:checks; B, ordering, reads it as it takes the
    lock and waits 5 s + 2.5 s, not its own 1 s + 2.5 s, before the first validation, which
    pebble asks of A only. B starts just after one of A's reads, so A's next read is about 5 s
    away: waiting by its own interval, B had pebble validate at A before A knew of the order,
    and the order failed. (A read every 8 s, 27 s of the serial pass: 5 s keeps 2.5 s between
    A's read and the validation; B waiting its own 1 s + 2.5 s would also come under the 7.5 s
    bound, with the 2 s of round trips from the lock to the certificate measured here.)"""
    from procs import RedisMonitor
    r = redis_server()
    port_a, port_b = free_port(), free_port()
    cid = name_set_id("s.test")
    pb, key, ga = instance_a_installed(gateway, pebble, r, tmp_path, port_a, "s.test", "5s", 60)
    checks = r.cmd("HGETALL", "h2gate:acme:checks")
    fields = dict(zip(checks[::2], checks[1::2]))
    assert list(fields) == [b"5000"], fields
    assert int(fields[b"5000"]) > time.time() * 1000 + 3000 * 1000  # for an hour
    assert 0 < r.cmd("PTTL", "h2gate:acme:checks") <= 3600 * 1000
    # B orders the same names (the shared certificate and account gone), right after A read
    # acme:orders gone
    r.cmd("DEL", "h2gate:acme:orders", f"h2gate:acme:cert:{cid}", "h2gate:acme:account")
    mon = RedisMonitor(r)
    wait_orders_read(mon, 20)
    gb = gateway(cluster_config(port_b, pb, tmp_path / "state-b", key, r.port, names=("s.test",),
                                check_interval="1s"), wait=[("127.0.0.1", port_b)])
    log_b = gb.wait_log("event=acme_certificate_installed", timeout=60)
    assert "event=acme_order_start names=s.test" in log_b and "acme_order_failed" not in log_b, \
        log_b[-3000:]
    assert f"event=acme_cluster_check_longer id={cid} check_ms=5000 ours_ms=1000" in log_b, \
        log_b[-3000:]
    # the validation, and so the certificate, came 5 s + 2.5 s after the lock at the earliest
    took = (log_time(log_b, "event=acme_certificate_installed")
            - log_time(log_b, "event=acme_cluster_lock "))
    assert 7.5 <= took < 30, took
    log_a = ga.log()
    assert f"event=acme_cluster_challenges id={cid} records=1 installed=1" in log_a, log_a[-3000:]
    assert log_a.count("event=acme_order_start") == 1
    checks = r.cmd("HGETALL", "h2gate:acme:checks")
    assert sorted(checks[::2]) == [b"1000", b"5000"], checks

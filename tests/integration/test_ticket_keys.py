"""TLS session ticket keys from a file: `tls.ticket_keys: PATH` in nghttpx's
format (48-byte aes-128-cbc or 80-byte aes-256-cbc keys; the first encrypts, all decrypt),
read at load and again on reload. Instances given the same file resume each other's sessions,
nghttpx's included."""
import os
import re
import signal
import ssl
import subprocess

import pytest

from procs import free_port, wait_port
from gwtest import config, tls_client_ctx as client_ctx, tls_exchange as connect


def write_keys(path, *keys):
    with open(path, "wb") as f:
        f.write(b"".join(keys))


def gw_with_keys(gateway, keyfile, extra=""):
    port = free_port()
    g = gateway(config(tls_port=port, tls_extra=f"ticket_keys: {keyfile}\n{extra}"),
                wait=[("127.0.0.1", port)])
    g.port = port
    return g


VERSIONS = [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]


@pytest.mark.parametrize("version", VERSIONS, ids=["tls1.2", "tls1.3"])
@pytest.mark.parametrize("cipher,klen", [("aes-128-cbc", 48), ("aes-256-cbc", 80)])
def test_instances_sharing_the_file_resume_each_others_sessions(gateway, tmp_path, version,
                                                                 cipher, klen):
    keys = tmp_path / "ticket.keys"
    write_keys(keys, os.urandom(klen), os.urandom(klen))
    a = gw_with_keys(gateway, keys, f"ticket_key_cipher: {cipher}")
    b = gw_with_keys(gateway, keys, f"ticket_key_cipher: {cipher}")
    ctx = client_ctx(version)
    sess, reused = connect(ctx, a.port)
    assert not reused and sess.has_ticket
    _, reused = connect(ctx, b.port, sess)
    assert reused  # another instance, the same keys
    # an instance with keys of its own does a full handshake
    other = tmp_path / "other.keys"
    write_keys(other, os.urandom(klen))
    c = gw_with_keys(gateway, other, f"ticket_key_cipher: {cipher}")
    _, reused = connect(ctx, c.port, sess)
    assert not reused


def test_nghttpx_and_h2gate_resume_each_others_sessions(gateway, tmp_path):
    """The same file given to nghttpx (--tls-ticket-key-file) and to h2gate with nghttpx's
    session context: nghttpx's tickets resume on h2gate and h2gate's on nghttpx (a fleet can
    move from one to the other without full handshakes): the format is really nghttpx's."""
    keys = tmp_path / "ticket.keys"
    write_keys(keys, os.urandom(48))  # nghttpx takes one key per file
    # the session context nghttpx gives its sessions (OpenSSL resumes only under the same), and
    # its TLS 1.3 suite order (a TLS 1.3 session resumes only with a suite of the same hash)
    g = gw_with_keys(gateway, keys, "session_id_context: shrpx\nciphersuites: "
                     "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256")
    cert = os.path.join(g.workdir, "state", "cert.pem")
    key = os.path.join(g.workdir, "state", "key.pem")
    nport = free_port()
    nx = subprocess.Popen(["nghttpx", "--conf=/dev/null", "--workers=1", "-f",
                           f"127.0.0.1,{nport}", "-b", "127.0.0.1,9", "--no-ocsp",
                           f"--tls-ticket-key-file={keys}", "--tls-ticket-key-cipher=aes-128-cbc",
                           f"--errorlog-file={tmp_path}/nghttpx.log", key, cert],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port("127.0.0.1", nport, proc=nx)
        for version in VERSIONS:
            ctx = client_ctx(version)
            sess, reused = connect(ctx, nport)
            assert not reused and sess.has_ticket
            _, reused = connect(ctx, g.port, sess)
            assert reused, f"nghttpx's ticket on h2gate, {version}"
            sess, reused = connect(ctx, g.port)
            _, reused = connect(ctx, nport, sess)
            assert reused, f"h2gate's ticket on nghttpx, {version}"
    finally:
        nx.terminate()
        nx.wait(timeout=10)


def test_reload_reads_the_file_again(gateway, tmp_path):
    """Rotation by the operator: the new key first and the old one behind it keeps old tickets
    valid; once the old key is gone from the file, its tickets are refused."""
    k1, k2, k3 = os.urandom(48), os.urandom(48), os.urandom(48)
    keys = tmp_path / "ticket.keys"
    write_keys(keys, k1)
    g = gw_with_keys(gateway, keys)
    ctx = client_ctx(ssl.TLSVersion.TLSv1_2)
    s1, _ = connect(ctx, g.port)
    n = 0

    def reload():
        nonlocal n
        n += 1
        g.signal(signal.SIGHUP)
        # the worker serves the new keys once it took the generation (its own line, after the
        # main thread's "reloaded"; a 0.2 s sleep stood for it, which a loaded ASan build
        # could exceed: the connection then met the old keys)
        want = f"event=generation worker=0 generation={n + 1} "
        assert want in g.wait_log(want), g.log()[-3000:]

    write_keys(keys, k2, k1)
    reload()
    s2, reused = connect(ctx, g.port, s1)
    assert reused  # k1 still decrypts
    write_keys(keys, k3)
    reload()
    _, reused = connect(ctx, g.port, s1)
    assert not reused  # k1 is gone
    # a bad file refuses the reload and keeps the keys in force
    write_keys(keys, b"short")
    g.signal(signal.SIGHUP)
    g.wait_log("event=reload_failed")
    s3, _ = connect(ctx, g.port)
    _, reused = connect(ctx, g.port, s3)
    assert reused


def test_bad_key_files_are_refused_with_file_line_col(h2gate_bin, tmp_path):
    keys = tmp_path / "ticket.keys"
    cfg = tmp_path / "gw.yaml"
    base = ("listen:\n  - address: 127.0.0.1:1\n    tls:\n      certificate: c.pem\n"
            "      key: k.pem\n      self_signed: true\n      ticket_keys: {k}\n{extra}"
            "upstreams:\n  app:\n    servers: [127.0.0.1:2]\nroutes:\n  - upstream: app\n")
    cases = [(b"x" * 50, "", "has 50 bytes: it must hold 1 to 64 keys of 48 bytes"),
             (b"x" * 96, "      ticket_key_cipher: aes-256-cbc\n", "has 96 bytes: it must hold 1 "
              "to 64 keys of 80 bytes"),
             (b"", "", "has 0 bytes"),
             (b"x" * 48 * 65, "", "has 3120 bytes")]
    for data, extra, msg in cases:
        keys.write_bytes(data)
        cfg.write_text(base.format(k=keys, extra=extra))
        r = subprocess.run([h2gate_bin, "--check-config", str(cfg)], capture_output=True,
                           text=True)
        assert r.returncode == 1, r.stderr
        assert re.search(re.escape(str(cfg)) + r":7:20: ticket_keys file '.*' " + re.escape(msg),
                         r.stderr), r.stderr
    cfg.write_text(base.format(k=tmp_path / "missing", extra=""))
    r = subprocess.run([h2gate_bin, "--check-config", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 1 and "cannot be read" in r.stderr
    cfg.write_text(base.format(k=keys, extra="      ticket_key_cipher: des\n"))
    r = subprocess.run([h2gate_bin, "--check-config", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 1 and "aes-128-cbc or aes-256-cbc" in r.stderr


@pytest.mark.parametrize("keys", ["rotating", "file"])
def test_tls13_resumption_gets_a_fresh_ticket_each_time(gateway, tmp_path, keys):
    """A TLS 1.3 client uses each ticket once (RFC 8446 Appendix C.4), as browsers and the
    bench's handshake client do: every resumed connection must carry a new ticket, or every
    other reconnect is a full handshake. Five reconnects, each on the ticket of the one
    before, all resumed."""
    if keys == "file":
        path = tmp_path / "ticket.keys"
        write_keys(path, os.urandom(48))
        g = gw_with_keys(gateway, path)
    else:
        port = free_port()
        g = gateway(config(tls_port=port), wait=[("127.0.0.1", port)])
        g.port = port
    ctx = client_ctx(ssl.TLSVersion.TLSv1_3)
    sess, reused = connect(ctx, g.port)
    assert not reused and sess.has_ticket
    for i in range(5):
        nxt, reused = connect(ctx, g.port, sess)
        assert reused, f"reconnect {i + 1} was a full handshake"
        assert nxt.has_ticket and nxt.id != sess.id, f"reconnect {i + 1} got no new ticket"
        sess = nxt

"""The ACME client's http-01 challenge (RFC 8555 §8.3) and RSA certificate keys against Debian's
pebble: pebble resolves every name to 127.0.0.1 and fetches
http://NAME:PORT/.well-known/acme-challenge/TOKEN from the gateway's cleartext listener (or from
a relay here that first asks the gateway itself, then answers pebble with what it got), or
validates tls-alpn-01 on the TLS listener."""
import base64
import hashlib
import http.server
import json
import re
import socket
import subprocess
import threading

import pytest

from gwtest import check_config, config_refused
from procs import free_port
from acmetest import acme_config, needs_pebble, served_chain, verify, x509

pytestmark = needs_pebble

PREFIX = "/.well-known/acme-challenge/"


def get(port, path, method="GET", host="a.test"):
    """One HTTP/1.1 request on a new connection: (status, headers lower-cased, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                  .encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    return int(lines[0].split()[1]), fields, body


def h2c_get(port, path):
    """One request over h2c (HTTP/2 with prior knowledge): (status, body)."""
    r = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-o", "-", "-w",
                        "\n%{http_code} %{http_version}", f"http://127.0.0.1:{port}{path}"],
                       capture_output=True, timeout=10)
    body, _, tail = r.stdout.rpartition(b"\n")
    code, version = tail.decode().split()
    assert version == "2", tail
    return int(code), body


def thumbprint(account_key):
    """RFC 7638 thumbprint of the P-256 account key (PEM file), base64url."""
    out = subprocess.run(["openssl", "ec", "-in", str(account_key), "-pubout", "-outform", "DER"],
                         capture_output=True, timeout=10).stdout
    point = out[-65:]  # the uncompressed point, 04 || x || y
    assert point[0] == 4

    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    jwk = json.dumps({"crv": "P-256", "kty": "EC", "x": b64(point[1:33]), "y": b64(point[33:])},
                     separators=(",", ":"), sort_keys=True)
    return b64(hashlib.sha256(jwk.encode()).digest())


def test_http01_two_names_issued_before_redirect_and_acl_then_withdrawn(gateway, pebble,
                                                                         tmp_path):
    """pebble validates both names over the cleartext listener, which redirects everything else
    to https and whose route denies 127.0.0.0/8: the challenge is answered before both. The
    chain verifies against pebble's root for both names; once the order is over the tokens are
    withdrawn (404 from the gateway, not the route's 403)."""
    tls_port, http_port = free_port(), free_port()
    pb = pebble(tls_port, http_port=http_port)
    state = tmp_path / "acme"
    g = gateway(acme_config(tls_port, pb.directory, pb.ca, state, http_port=http_port,
                            challenge="http-01", cleartext_extra="\n    redirect_https: true"),
                wait=[("127.0.0.1", tls_port), ("127.0.0.1", http_port)])
    log = g.wait_log("event=acme_certificate_installed", timeout=30)
    assert "event=acme_certificate_installed names=a.test,b.test" in log, log[-4000:]
    assert log.count("event=acme_challenge ") == 2, log[-4000:]
    assert log.count("type=http-01") == 2
    answered = re.findall(r"event=acme_http01 peer=\S+ proto=http/1.1 method=GET path=(\S+) "
                          r"status=200", log)
    assert len(answered) >= 2, log[-4000:]
    root = pb.roots()
    for name in ("a.test", "b.test"):
        chain = served_chain(tls_port, name)
        r = verify(tmp_path, chain, root, name)
        assert r.returncode == 0 and ": OK" in r.stdout, r.stdout + r.stderr
        assert "id-ecPublicKey" in x509(chain[0], "-text")
    # withdrawn: the gateway's 404, for every token it answered
    for path in set(answered):
        status, fields, body = get(http_port, path)
        assert status == 404 and body == b"h2gate: no such ACME challenge\n", (status, body)
    # everything else on the listener: redirected, as before
    status, fields, _ = get(http_port, "/x")
    assert status == 308 and fields["location"] == "https://a.test/x"


class Relay(http.server.ThreadingHTTPServer):
    """pebble's http-01 port: for each validation, the token is asked of the gateway first (over
    HTTP/1.1, many connections, and over h2c; and wrong tokens), then pebble gets the gateway's
    own answer back."""
    daemon_threads = True

    def __init__(self, gw_port):
        self.gw_port = gw_port
        self.seen = []  # (token, [h1 answers], h2c answer, wrong answers)
        self.prev = []  # (token, [answers to the tokens validated before it])
        super().__init__(("127.0.0.1", free_port()), RelayHandler)


class RelayHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        gw = self.server.gw_port
        token = self.path[len(PREFIX):] if self.path.startswith(PREFIX) else None
        if not token:
            self.send_error(404)
            return
        h1 = [get(gw, self.path) for _ in range(30)]
        # RFC 9112 §3.2.2: the absolute-form, its authority taking the place of Host (which
        # names another host here), the scheme in any case
        authority = self.headers["Host"]
        h1 += [get(gw, f"http://{authority}{self.path}", host="elsewhere.test"),
               get(gw, f"HTTP://{authority}{self.path}", host="elsewhere.test")]
        h2 = h2c_get(gw, self.path)
        head = get(gw, self.path, "HEAD")
        wrong = [get(gw, PREFIX + token[:-1]), get(gw, PREFIX + token + "x"),
                 get(gw, PREFIX + "not-a-token"), get(gw, PREFIX), get(gw, self.path, "POST"),
                 h2c_get(gw, PREFIX + token[::-1]),
                 get(gw, f"http://{authority}{PREFIX}{token[:-1]}", host="elsewhere.test")]
        # the name validated before: its token withdrawn once this one was published
        before = {t for t, *_ in self.server.seen if t != token}
        self.server.prev.append((token, [get(gw, PREFIX + t) for t in before]))
        self.server.seen.append((token, h1 + [head], h2, wrong))
        status, fields, body = h1[0]
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_http01_answered_by_both_workers_over_http1_and_h2c_wrong_tokens_not(gateway, pebble,
                                                                             tmp_path):
    """While pebble's validation is held by the relay, the pending token is asked of the
    gateway's cleartext listener 30 times on new connections (two workers share them), twice
    in absolute-form (http://NAME:PORT/…, another Host) and once over h2c: every answer is 200, application/octet-stream, exactly TOKEN.THUMBPRINT of the
    account key; a token cut short, lengthened, unknown or empty, a POST, are 404 without the
    key authorization, and so is the token of the name validated before. pebble, given the
    gateway's answer, validates it."""
    tls_port, gw_http = free_port(), free_port()
    relay = Relay(gw_http)
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    try:
        pb = pebble(tls_port, http_port=relay.server_address[1])
        state = tmp_path / "acme"
        g = gateway(acme_config(tls_port, pb.directory, pb.ca, state, http_port=gw_http,
                                challenge="http-01"),
                    wait=[("127.0.0.1", tls_port), ("127.0.0.1", gw_http)])
        log = g.wait_log("event=acme_certificate_installed", timeout=60)
        assert "event=acme_certificate_installed names=a.test,b.test" in log, log[-4000:]
    finally:
        relay.shutdown()
        relay.server_close()
    thumb = thumbprint(state / "account.key")
    tokens = {t for t, *_ in relay.seen}
    assert len(tokens) == 2, relay.seen
    # pebble validates each token from several perspectives: some of the second's requests
    # came after the first name was done, and its token was no longer answered
    assert any(prev for _, prev in relay.prev), relay.prev
    for _, prev in relay.prev:
        assert all(status == 404 and thumb.encode() not in body for status, _, body in prev)
    for token, h1, h2, wrong in relay.seen:
        want = f"{token}.{thumb}".encode()
        for i, (status, fields, body) in enumerate(h1):
            assert (status, body) == (200, want if i < len(h1) - 1 else b"")  # the last: HEAD
            assert fields["content-type"] == "application/octet-stream"
            assert fields["content-length"] == str(len(want))
        assert h2 == (200, want)
        for answer in wrong:
            status, body = answer[0], answer[-1]
            assert status == 404 and thumb.encode() not in body, answer
    g.stop()
    counts = {int(w): int(n) for w, n in
              re.findall(r"event=worker_stats worker=(\d+) accepted=(\d+)", g.log())}
    assert set(counts) == {0, 1} and min(counts.values()) > 0, counts
    lines = [ln for ln in g.log().splitlines() if "event=acme_http01" in ln]
    assert any("proto=h2 method=GET" in ln and "status=200" in ln for ln in lines), lines
    # the absolute-form's authority is the host the answer was for, not the Host field
    absolute = [ln for ln in lines if "status=200 host=" in ln and "elsewhere" not in ln
                and re.search(r"host=[ab]\.test:\d+(\s|$)", ln)]
    assert len(absolute) >= 4, lines


def test_rsa_2048_certificate_key_then_back_to_ec_on_restart(gateway, pebble, tmp_path):
    """key_type: rsa-2048: the served leaf has an RSA 2048-bit key and verifies against pebble's
    root. Restarted with ec-p256 over the same state, the stored RSA certificate is served
    while a new order gets a P-256 one."""
    tls_port, http_port = free_port(), free_port()
    pb = pebble(tls_port, http_port=http_port)
    state = tmp_path / "acme"
    g = gateway(acme_config(tls_port, pb.directory, pb.ca, state, names=("r.test",),
                            http_port=http_port, key_type="rsa-2048"),
                wait=[("127.0.0.1", tls_port)])
    log = g.wait_log("event=acme_certificate_installed", timeout=30)
    assert "event=acme_certificate_installed names=r.test" in log, log[-4000:]
    chain = served_chain(tls_port, "r.test")
    text = x509(chain[0], "-text")
    assert "rsaEncryption" in text and "Public-Key: (2048 bit)" in text, text
    r = verify(tmp_path, chain, pb.roots(), "r.test")
    assert r.returncode == 0 and ": OK" in r.stdout, r.stdout + r.stderr
    (cert_dir,) = [d for d in state.iterdir() if d.is_dir()]
    key = subprocess.run(["openssl", "pkey", "-in", str(cert_dir / "key.pem"), "-noout",
                          "-text"], capture_output=True, text=True, timeout=10).stdout
    assert "Private-Key: (2048 bit" in key, key[:200]
    g.stop()
    g2 = gateway(acme_config(tls_port, pb.directory, pb.ca, state, names=("r.test",),
                             http_port=http_port),
                 wait=[("127.0.0.1", tls_port)])
    log2 = g2.wait_log("event=acme_certificate_installed", timeout=30)
    assert "event=acme_key_type_changed names=r.test key_type=ec-p256" in log2, log2[-4000:]
    assert "event=acme_certificate_stored names=r.test" in log2  # served meanwhile
    chain = served_chain(tls_port, "r.test")
    assert "id-ecPublicKey" in x509(chain[0], "-text")
    assert verify(tmp_path, chain, pb.roots(), "r.test").returncode == 0


def test_http01_needs_a_cleartext_listener(h2gate_bin, tmp_path):
    text = ("acme:\n  directory: https://ca.test/dir\n  challenge: http-01\n"
            f"listen:\n  - address: 127.0.0.1:{free_port()}\n    tls: {{acme: [a.test]}}\n"
            "upstreams:\n  app:\n    servers: [127.0.0.1:9]\n"
            "routes:\n  - { host: '*', path: /, upstream: app }\n")
    r = check_config(h2gate_bin, tmp_path, text)
    assert r.returncode == 1, r.stderr
    assert f"{tmp_path / 'c.yaml'}:3:14: acme 'challenge: http-01' needs a listener without tls" in r.stderr, \
        r.stderr
    # with one, the same file is good
    text = text.replace("upstreams:", f"  - address: 127.0.0.1:{free_port()}\nupstreams:")
    r = check_config(h2gate_bin, tmp_path, text)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("text,want", [
    ("acme: {directory: https://ca.test/dir, challenge: dns-01}\n",
     "acme 'challenge' must be tls-alpn-01 or http-01"),
    ("acme: {directory: https://ca.test/dir, challenge: [http-01]}\n",
     "acme 'challenge' must be tls-alpn-01 or http-01"),
    ("acme: {directory: https://ca.test/dir, key_type: rsa-4096}\n",
     "acme 'key_type' must be ec-p256 or rsa-2048"),
])
def test_challenge_and_key_type_checked_at_load(h2gate_bin, tmp_path, text, want):
    config_refused(h2gate_bin, tmp_path, text, want)

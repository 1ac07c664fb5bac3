"""Client certificates (mTLS): listen tls.client_auth, routes[].client_cert and
client_cert_chain, the RFC 9440 Client-Cert / Client-Cert-Chain fields the origin receives, the
access log fields and the metric, with real clients (curl --cert/--key, openssl s_client,
python3-h2 over ssl with a client certificate).

The PKI is made once per module with python3-cryptography (EC P-256): root -> intermediate ->
alice (valid), old (expired), mallory (revoked in the intermediate's CRL), and eve from another
root. The gateway trusts the root only: clients send the intermediate with their leaf."""
import base64
import datetime
import json
import os
import re
import signal
import socket
import ssl
import subprocess

import h2.config
import h2.connection
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from gwtest import Client, check_config, ended, response, sample, scrape
from origin import ScriptedOrigin
from procs import free_port, run

NOW = datetime.datetime.now(datetime.timezone.utc)


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "h2gate test")])


def _cert(cn, key, issuer_cert, issuer_key, ca=False, days=(-1, 30), serial=None, san=None,
          pad=0):
    b = (x509.CertificateBuilder()
         .subject_name(_name(cn))
         .issuer_name(issuer_cert.subject if issuer_cert else _name(cn))
         .public_key(key.public_key())
         .serial_number(serial or x509.random_serial_number())
         .not_valid_before(NOW + datetime.timedelta(days=days[0]))
         .not_valid_after(NOW + datetime.timedelta(days=days[1]))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                          False), critical=True)
    else:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH,
                                                   ExtendedKeyUsageOID.SERVER_AUTH]), False)
    if san:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in san]), False)
    if pad:  # a private, non-critical extension of pad bytes: a large certificate
        b = b.add_extension(x509.UnrecognizedExtension(ObjectIdentifier("1.3.6.1.4.1.32473.1"),
                                                       b"\x04\x82" + pad.to_bytes(2, "big") +
                                                       b"x" * pad), False)
    return b.sign(issuer_key or key, hashes.SHA256())


def _pem(*certs):
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def _key_pem(k):
    return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                           serialization.NoEncryption())


class Pki:
    """Files of the module's PKI in d: root.pem, root2.pem, crl.pem, server.pem/-key.pem, and
    per client NAME.pem (leaf + intermediate) and NAME-key.pem; der[NAME] the leaf's DER. bob's
    intermediate (big-inter.pem, big_inter_der) is over 8 KiB."""

    def __init__(self, d):
        self.d = d
        k = lambda: ec.generate_private_key(ec.SECP256R1())  # noqa: E731
        root_k, inter_k, root2_k = k(), k(), k()
        self.inter_k = inter_k
        self.serial = {}
        self.root = _cert("Test Root", root_k, None, None, ca=True)
        self.inter = _cert("Test Intermediate", inter_k, self.root, root_k, ca=True)
        root2 = _cert("Other Root", root2_k, None, None, ca=True)
        self.der = {}
        self.inter_der = self.inter.public_bytes(serialization.Encoding.DER)
        self.write("root.pem", _pem(self.root))
        self.write("inter.pem", _pem(self.inter))
        self.write("root2.pem", _pem(root2))
        sk = k()
        self.write("server.pem", _pem(_cert("localhost", sk, self.root, root_k,
                                            san=["localhost", "a.test", "b.test"])))
        self.write("server-key.pem", _key_pem(sk))
        revoked_serial = x509.random_serial_number()
        clients = {"alice": (self.inter, inter_k, (-1, 30), None),
                   "old": (self.inter, inter_k, (-30, -1), None),
                   "mallory": (self.inter, inter_k, (-1, 30), revoked_serial),
                   "eve": (root2, root2_k, (-1, 30), None)}
        for name, (issuer, ik, days, serial) in clients.items():
            ck = k()
            leaf = _cert(name, ck, issuer, ik, days=days, serial=serial)
            self.serial[name] = leaf.serial_number
            self.der[name] = leaf.public_bytes(serialization.Encoding.DER)
            chain = _pem(leaf, self.inter) if issuer is self.inter else _pem(leaf)
            self.write(f"{name}.pem", chain)
            self.write(f"{name}-key.pem", _key_pem(ck))
        self.crl("crl.pem", [revoked_serial])
        big_k, bob_k = k(), k()
        big = _cert("Big Intermediate", big_k, self.root, root_k, ca=True, pad=9000)
        self.big_inter_der = big.public_bytes(serialization.Encoding.DER)
        self.write("big-inter.pem", _pem(big))
        bob = _cert("bob", bob_k, big, big_k)
        self.der["bob"] = bob.public_bytes(serialization.Encoding.DER)
        self.write("bob.pem", _pem(bob, big))
        self.write("bob-key.pem", _key_pem(bob_k))

    def crl(self, name, serials):
        """A CRL of the intermediate revoking serials, written as name."""
        b = (x509.CertificateRevocationListBuilder()
             .issuer_name(self.inter.subject)
             .last_update(NOW - datetime.timedelta(days=1))
             .next_update(NOW + datetime.timedelta(days=30)))
        for n in serials:
            b = b.add_revoked_certificate(x509.RevokedCertificateBuilder().serial_number(n)
                                          .revocation_date(NOW - datetime.timedelta(hours=1))
                                          .build())
        crl = b.sign(self.inter_k, hashes.SHA256())
        self.write(name, crl.public_bytes(serialization.Encoding.PEM))

    def write(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(data)

    def path(self, name):
        return os.path.join(self.d, name)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(str(tmp_path_factory.mktemp("pki")))


def sf_bytes(der):
    """RFC 8941 §3.3.5: a Byte Sequence."""
    return ":" + base64.b64encode(der).decode() + ":"


def gw_text(pki, origin_port, require_port, optional_port, sni_port=None, admin=None,
            log_format="json", log_path="access.log", ticket_keys=None):
    p = pki.path
    ca = f"{{ca: {p('root.pem')}, crl: {p('crl.pem')}"
    text = f"""workers: 1
log_level: info
listen:
  - address: 127.0.0.1:{require_port}
    tls:
      certificate: {p('server.pem')}
      key: {p('server-key.pem')}
      client_auth: {ca}, mode: require}}
{f"      ticket_keys: {ticket_keys}" if ticket_keys else ""}
  - address: 127.0.0.1:{optional_port}
    tls:
      certificate: {p('server.pem')}
      key: {p('server-key.pem')}
      client_auth: {ca}, mode: optional}}
"""
    if sni_port:
        text += f"""  - address: 127.0.0.1:{sni_port}
    tls:
      certificates:
        - {{certificate: {p('server.pem')}, key: {p('server-key.pem')}, names: [a.test]}}
        - {{certificate: {p('server.pem')}, key: {p('server-key.pem')}, names: [b.test],
            client_auth: {{ca: {p('root2.pem')}, mode: optional}}}}
      client_auth: {{ca: {p('root.pem')}, mode: optional}}
"""
    text += f"""upstreams:
  app:
    servers: [127.0.0.1:{origin_port}]
routes:
  - {{host: '*', path: /status/, upstream: app, client_cert: required}}
  - {{host: '*', path: /, upstream: app, client_cert_chain: true}}
access_log:
  path: {log_path}
"""
    text += f"  log_format: '{log_format}'\n" if log_format.startswith("$") else \
        f"  format: {log_format}\n"
    if admin:
        text += f"admin:\n  address: 127.0.0.1:{admin}\n"
    return text


@pytest.fixture
def mtls(gateway, pki):
    """A gateway with a require and an optional listener (and an SNI one, an admin listener)
    in front of a recording origin: (gateway, origin, ports dict)."""
    with ScriptedOrigin() as o:
        ports = {k: free_port() for k in ("require", "optional", "sni", "admin")}
        g = gateway(gw_text(pki, o.port, ports["require"], ports["optional"], ports["sni"],
                            ports["admin"]),
                    wait=[("127.0.0.1", ports[k]) for k in ports])
        yield g, o, ports


def curl(port, path, cert=None, pki=None, http2=False, headers=()):
    cmd = ["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
           "--http2" if http2 else "--http1.1"]
    if cert:
        cmd += ["--cert", pki.path(f"{cert}.pem"), "--key", pki.path(f"{cert}-key.pem")]
    for h in headers:
        cmd += ["-H", h]
    return run(cmd + [f"https://localhost:{port}{path}"]).stdout


def s_client(port, pki, cert=None, extra=(), stdin=b"", servername="localhost"):
    cmd = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", servername,
           "-ign_eof"] + list(extra)
    if cert:
        cmd += ["-cert", pki.path(f"{cert}.pem"), "-key", pki.path(f"{cert}-key.pem")]
        if cert != "eve":  # s_client sends the first certificate of -cert only
            inter = "big-inter.pem" if cert == "bob" else "inter.pem"
            cmd += ["-cert_chain", pki.path(inter)]
    p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=20)
    return p.stdout.decode("latin-1") + p.stderr.decode("latin-1")


def origin_headers(o):
    return [{k.lower(): v for k, v in r.headers} for r in o.requests]


def log_lines(g, n):
    path = os.path.join(g.workdir, "access.log")
    for _ in range(100):
        if os.path.exists(path):
            with open(path) as f:
                lines = [l for l in f.read().splitlines() if l]
            if len(lines) >= n:
                return lines
        g.wait_log("\x00", timeout=0.05)
    raise AssertionError(f"fewer than {n} access log lines")


GET = b"GET /echo HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


def test_require_refuses_the_handshake_with_the_alert_of_the_failure(mtls, pki):
    g, o, ports = mtls
    port = ports["require"]
    # RFC 8446 §4.4.2.4 / §6.2: no certificate at all -> certificate_required (TLS 1.3)
    out = s_client(port, pki, stdin=GET)
    assert "alert certificate required" in out, out
    assert "alert" in s_client(port, pki, extra=["-tls1_2"], stdin=GET)
    # expired, revoked, another CA: the alerts OpenSSL maps the failures to
    assert "alert certificate expired" in s_client(port, pki, "old", stdin=GET)
    assert "alert certificate revoked" in s_client(port, pki, "mallory", stdin=GET)
    assert "alert unknown ca" in s_client(port, pki, "eve", stdin=GET)
    # each refusal is logged with OpenSSL's reason
    log = g.wait_log("event=tls_client_cert_refused")
    assert 'verify="FAILED:certificate has expired"' in log, log
    assert 'verify="FAILED:certificate revoked"' in log
    # a curl without a certificate does not get through either; alice does, both protocols
    assert curl(port, "/echo", pki=pki) == "000"
    assert curl(port, "/echo", "alice", pki) == "200"
    assert curl(port, "/status/200", "alice", pki, http2=True) == "200"
    assert len(o.requests) == 2
    # only the verified connections reached the origin, each with Client-Cert byte-exact
    for h in origin_headers(o):
        assert h["client-cert"] == sf_bytes(pki.der["alice"])
    fams, _ = scrape(ports["admin"])
    assert sample(fams, "h2gate_tls_client_verify_total", result="success") == 2
    assert sample(fams, "h2gate_tls_client_verify_total", result="failed") == 3
    assert sample(fams, "h2gate_tls_client_verify_total", result="none") >= 2


def test_the_servers_chain_is_its_file_not_completed_from_the_client_cas(mtls, pki):
    """The client CAs are in the context's store: the server's own chain is still what its
    certificate file holds (the leaf alone here), not the leaf and the root of that store."""
    g, o, ports = mtls
    for port in (ports["require"], ports["optional"]):
        out = s_client(port, pki, "alice", extra=["-showcerts"], stdin=GET)
        assert "HTTP/1.1 200" in out, out
        chain = out.split("Certificate chain", 1)[1].split("\n---\n", 1)[0]
        assert re.findall(r"^ *(\d+) s:", chain, re.M) == ["0"], chain


def test_optional_records_the_failure_and_the_route_decides(mtls, pki):
    g, o, ports = mtls
    port = ports["optional"]
    # without client_cert: required the request goes on; the origin hears of no certificate
    assert curl(port, "/echo", pki=pki) == "200"
    assert curl(port, "/echo", "old", pki) == "200"
    assert curl(port, "/echo", "eve", pki, http2=True) == "200"
    assert [("client-cert" in h) for h in origin_headers(o)] == [False, False, False]
    # a route with client_cert: required answers 403 to each of them, and the origin never
    # sees those requests
    for cert in (None, "old", "mallory", "eve"):
        assert curl(port, "/status/200", cert, pki) == "403", cert
        assert curl(port, "/status/200", cert, pki, http2=True) == "403", cert
    assert len(o.requests) == 3
    assert curl(port, "/status/200", "alice", pki, http2=True) == "200"
    log = g.wait_log("client_cert_refused")
    assert 'verify="FAILED:certificate revoked"' in log, log
    lines = [json.loads(l) for l in log_lines(g, 12)]
    got = [(l["path"], l["status"], l["tls_client_verify"]) for l in lines]
    assert got[:3] == [("/echo", 200, "NONE"), ("/echo", 200, "FAILED:certificate has expired"),
                       ("/echo", 200, "FAILED:unable to verify the first certificate")], got
    assert got[-1] == ("/status/200", 200, "SUCCESS")
    assert lines[-1]["tls_client_subject"] == "O=h2gate test,CN=alice"
    assert lines[1]["tls_client_subject"] == "O=h2gate test,CN=old"
    assert lines[0]["tls_client_subject"] == ""
    assert {l["status"] for l in lines[3:-1]} == {403}


def test_origin_gets_client_cert_and_chain_byte_exact_never_the_clients(mtls, pki):
    g, o, ports = mtls
    forged = ["Client-Cert: :Zm9yZ2Vk:", "Client-Cert-Chain: :Zm9yZ2Vk:, :Zm9yZ2Vk:"]
    for port in (ports["require"], ports["optional"]):
        assert curl(port, "/echo", "alice", pki, headers=forged) == "200"
        assert curl(port, "/echo", "alice", pki, http2=True, headers=forged) == "200"
    # no certificate (optional), and a cleartext-free listener does not matter: still stripped
    assert curl(ports["optional"], "/echo", None, pki, headers=forged) == "200"
    assert curl(ports["optional"], "/echo", "old", pki, http2=True, headers=forged) == "200"
    hs = origin_headers(o)
    assert len(hs) == 6
    for h in hs[:4]:
        assert h["client-cert"] == sf_bytes(pki.der["alice"])
        # the intermediate, not the leaf nor the root (RFC 9440 §2.3)
        assert h["client-cert-chain"] == sf_bytes(pki.inter_der)
    for h in hs[4:]:
        assert "client-cert" not in h and "client-cert-chain" not in h, h
    # python3-h2 with its own forged field in lowercase: the same
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(pki.path("eve.pem"), pki.path("eve-key.pem"))
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", ports["optional"]), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            cl = Client.__new__(Client)  # gwtest's client over this socket
            cl.s = s
            cl.c = h2.connection.H2Connection(h2.config.H2Configuration(
                client_side=True, header_encoding="utf-8"))
            cl.c.initiate_connection()
            cl.flush()
            sid = cl.request("/echo", extra=[("client-cert", ":Zm9yZ2Vk:")])
            status, _, _ = response(cl.events(ended(sid)), sid)
    assert status == "200"
    assert "client-cert" not in origin_headers(o)[-1]


def test_a_client_certificates_request_is_never_coalesced_with_another(mtls, pki):
    """Coalescing is on by default: an anonymous GET that arrives while alice's identical GET
    waits for the origin must not get alice's answer (the origin may have personalised it for
    her Client-Cert), nor alice an anonymous one."""
    g, o, ports = mtls
    url = f"https://localhost:{ports['optional']}/page-links/800"
    first = subprocess.Popen(["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}",
                              "--cert", pki.path("alice.pem"), "--key", pki.path("alice-key.pem"),
                              url], stdout=subprocess.PIPE, text=True)
    for _ in range(100):  # alice's request is at the origin
        if o.requests:
            break
        g.wait_log("\x00", timeout=0.02)
    assert curl(ports["optional"], "/page-links/800", pki=pki) == "200"
    assert first.communicate(timeout=10)[0] == "200"
    hs = origin_headers(o)
    assert len(hs) == 2, hs
    assert ["client-cert" in h for h in hs] == [True, False]


def test_tls_client_subject_names_only_a_verified_certificate(gateway, pki):
    """$tls_client_subject is the verified certificate's subject, else empty (config/README):
    under mode: optional a certificate that failed (expired, of an unknown CA: any subject its
    maker chose) went into the header rules' value as if verified, so the origin was told
    `X-Client-Subject: O=h2gate test,CN=eve` for a client nobody vouched for."""
    with ScriptedOrigin() as o:
        ports = {k: free_port() for k in ("require", "optional")}
        text = gw_text(pki, o.port, ports["require"], ports["optional"]).replace(
            "  - {host: '*', path: /, upstream: app, client_cert_chain: true}\n",
            "  - {host: '*', path: /, upstream: app, request_headers: {set: "
            "{X-Client-Subject: $tls_client_subject, X-Client-Verify: $tls_client_verify}}}\n")
        gateway(text, wait=[("127.0.0.1", ports[k]) for k in ports])
        for cert in ("alice", "old", "eve", None):
            assert curl(ports["optional"], "/echo", cert, pki) == "200", cert
        got = [(h.get("x-client-verify"), h.get("x-client-subject", "")) for h in origin_headers(o)]
    assert got[0] == ("SUCCESS", "O=h2gate test,CN=alice"), got
    assert got[1] == ("FAILED:certificate has expired", ""), got
    assert got[2][0].startswith("FAILED:") and got[2][1] == "", got
    assert got[3] == ("NONE", ""), got


def test_a_host_of_another_certificate_entry_is_misdirected(mtls, pki):
    """RFC 9110 §15.5.20: on the SNI listener a.test's entry verifies client certificates with
    root.pem and b.test's with root2.pem. eve's certificate (root2) verified for SNI b.test was
    taken for a request to Host a.test, whose entry refuses it: the route's client_cert:
    required let it through and the origin was told its Client-Cert. A request for a host of
    another entry than the connection's is answered 421; the same host still passes."""
    g, o, ports = mtls
    def head(sni, host, cert, path="/status/200"):
        out = s_client(ports["sni"], pki, cert, servername=sni,
                       stdin=f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                       .encode())
        # s_client's session dumps may share a line with the answer: the status line is found
        # anywhere in what it printed
        return next((st for st in ("200 OK", "403 Forbidden", "421 Misdirected Request")
                     if "HTTP/1.1 " + st in out), out[-300:])
    assert head("a.test", "a.test", "eve") == "403 Forbidden", "root2 is not a.test's"
    assert head("b.test", "b.test", "eve") == "200 OK"
    assert head("b.test", "a.test", "eve") == "421 Misdirected Request"
    assert head("a.test", "b.test", "alice") == "421 Misdirected Request"
    assert head("a.test", "a.test", "alice") == "200 OK"
    # a host's absolute form (RFC 1034 §3.1: its final dot) is that host's, not the default's
    assert head("a.test", "b.test.", "alice") == "421 Misdirected Request"
    assert head("b.test", "a.test.", "eve") == "421 Misdirected Request"
    # over HTTP/2 too (curl sends SNI b.test, :authority a.test)
    r = run(["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "--http2", "--max-time", "10",
             "--cert", pki.path("eve.pem"), "--key", pki.path("eve-key.pem"),
             "--resolve", f"b.test:{ports['sni']}:127.0.0.1", "-H", "Host: a.test",
             f"https://b.test:{ports['sni']}/status/200"])
    assert r.stdout == "421", r.stdout
    hosts = [h.get("host") for h in origin_headers(o)]
    assert hosts == ["b.test", "a.test"], hosts  # the two 200s only
    assert "event=misdirected" in g.log()


def test_client_cert_fields_are_stripped_where_no_client_auth_exists(gateway, pki):
    with ScriptedOrigin() as o:
        port = free_port()
        g = gateway(f"""workers: 1
listen:
  - address: 127.0.0.1:{port}
    tls: {{certificate: {pki.path('server.pem')}, key: {pki.path('server-key.pem')}}}
upstreams:
  app: {{servers: [127.0.0.1:{o.port}]}}
routes:
  - {{host: '*', path: /, upstream: app}}
""", wait=[("127.0.0.1", port)])
        assert curl(port, "/echo", "alice", pki, headers=["Client-Cert: :Zm9yZ2Vk:"]) == "200"
        assert curl(port, "/echo", "alice", pki, http2=True,
                    headers=["client-cert-chain: :Zm9yZ2Vk:"]) == "200"
        for h in origin_headers(o):
            assert "client-cert" not in h and "client-cert-chain" not in h, h
        g.stop()


def _resume(port, pki, cert, servername, sess_in=None, sess_out=None, stdin=GET):
    extra = ["-tls1_3"]
    if sess_in:
        extra += ["-sess_in", sess_in]
    if sess_out:
        extra += ["-sess_out", sess_out]
    return s_client(port, pki, cert, extra=extra, stdin=stdin, servername=servername)


def test_resumed_session_keeps_the_identity_and_another_entry_refuses_it(mtls, pki, tmp_path):
    g, o, ports = mtls
    sess = str(tmp_path / "sess.pem")
    first = _resume(ports["sni"], pki, "alice", "a.test", sess_out=sess)
    assert "HTTP/1.1 200" in first, first
    # resumed without sending the certificate again: the origin still hears of alice
    again = _resume(ports["sni"], pki, None, "a.test", sess_in=sess)
    assert "Reused, TLSv1.3" in again, again
    assert "HTTP/1.1 200" in again
    hs = origin_headers(o)
    assert len(hs) == 2
    assert hs[0]["client-cert"] == hs[1]["client-cert"] == sf_bytes(pki.der["alice"])
    # the session was minted where client_auth trusts another CA than b.test's entry: a full
    # handshake there, and alice's certificate is no one there (no certificate offered now)
    # (a request for b.test: localhost is a.test's entry, misdirected on b.test's connection)
    other = _resume(ports["sni"], pki, None, "b.test", sess_in=sess,
                    stdin=GET.replace(b"localhost", b"b.test"))
    assert "New, TLSv1.3" in other and "Reused" not in other, other
    assert "HTTP/1.1 200" in other
    assert "client-cert" not in origin_headers(o)[-1]
    # nor on a listener with another client_auth (mode require: the handshake needs a cert)
    req = _resume(ports["require"], pki, None, "a.test", sess_in=sess)
    assert "Reused" not in req and "alert certificate required" in req, req
    lines = [json.loads(l) for l in log_lines(g, 3)]
    assert [l["tls_client_verify"] for l in lines] == ["SUCCESS", "SUCCESS", "NONE"]


RESUMPTIONS = {"TLS 1.3 ticket": ["-tls1_3"], "TLS 1.2 ticket": ["-tls1_2"],
               "TLS 1.2 session id": ["-tls1_2", "-no_ticket"]}


@pytest.mark.parametrize("how", RESUMPTIONS)
def test_resumed_session_forwards_the_same_client_cert_chain(mtls, pki, tmp_path, how):
    """RFC 9440 §2.3: Client-Cert-Chain is the chain the certificate was verified with. A
    resumed session sends no certificate, and OpenSSL keeps only the leaf in the session: the
    chain comes from what the gateway kept with the session, byte for byte the same."""
    g, o, ports = mtls
    sess = str(tmp_path / "sess.pem")
    extra = RESUMPTIONS[how]
    first = s_client(ports["sni"], pki, "alice", extra=extra + ["-sess_out", sess], stdin=GET,
                     servername="a.test")
    assert "HTTP/1.1 200" in first and "New, TLSv1." in first, first
    for _ in range(2):  # a TLS 1.3 resumption's new ticket keeps it too
        again = s_client(ports["sni"], pki, None, stdin=GET, servername="a.test",
                         extra=extra + ["-sess_in", sess, "-sess_out", sess])
        assert "Reused, TLSv1." in again and "HTTP/1.1 200" in again, again
    hs = origin_headers(o)
    assert len(hs) == 3
    for h in hs:
        assert h["client-cert"] == sf_bytes(pki.der["alice"])
        assert h["client-cert-chain"] == sf_bytes(pki.inter_der)


@pytest.mark.parametrize("how", RESUMPTIONS)
def test_a_chain_too_long_to_keep_makes_a_full_handshake_instead(mtls, pki, tmp_path, how):
    """An intermediate of over 8 KiB is more than a session keeps: the session is not resumed,
    and the next connection verifies the certificate again and forwards its chain."""
    g, o, ports = mtls
    sess = str(tmp_path / "sess.pem")
    extra = RESUMPTIONS[how]
    first = s_client(ports["sni"], pki, "bob", extra=extra + ["-sess_out", sess], stdin=GET,
                     servername="a.test")
    assert "HTTP/1.1 200" in first, first
    again = s_client(ports["sni"], pki, "bob", extra=extra + ["-sess_in", sess], stdin=GET,
                     servername="a.test")
    assert "New, TLSv1." in again and "Reused" not in again, again
    assert "HTTP/1.1 200" in again
    hs = origin_headers(o)
    assert len(hs) == 2
    for h in hs:
        assert h["client-cert"] == sf_bytes(pki.der["bob"])
        assert h["client-cert-chain"] == sf_bytes(pki.big_inter_der)


def test_reload_with_a_new_crl_refuses_the_revoked_and_their_sessions(gateway, pki, tmp_path):
    """SIGHUP reads the CRL again: alice, revoked in the new one, is refused at once, and the
    session she got before cannot be resumed although the ticket keys survive the reload
    (ticket_keys: the session id context holds the CRL's bytes)."""
    keys = tmp_path / "ticket.keys"
    keys.write_bytes(os.urandom(48))
    with ScriptedOrigin() as o:
        ports = {k: free_port() for k in ("require", "optional")}
        g = gateway(gw_text(pki, o.port, ports["require"], ports["optional"],
                            ticket_keys=str(keys)),
                    wait=[("127.0.0.1", ports[k]) for k in ports])
        sess = str(tmp_path / "sess.pem")
        assert "HTTP/1.1 200" in _resume(ports["require"], pki, "alice", "localhost", sess_out=sess)
        assert "Reused, TLSv1.3" in _resume(ports["require"], pki, None, "localhost", sess_in=sess)
        pki.crl("crl-alice.pem", [pki.serial["mallory"], pki.serial["alice"]])
        with open(g.config_path) as f:
            text = f.read()
        with open(g.config_path, "w") as f:
            f.write(text.replace(pki.path("crl.pem"), pki.path("crl-alice.pem")))
        g.signal(signal.SIGHUP)
        assert "event=generation worker=0 generation=2 draining=yes" in \
            g.wait_log("event=generation worker=0 generation=2 draining=yes"), g.log()[-3000:]
        assert curl(ports["require"], "/echo", "alice", pki) == "000"
        out = _resume(ports["require"], pki, None, "localhost", sess_in=sess)
        assert "Reused" not in out and "alert certificate required" in out, out
        assert "alert certificate revoked" in _resume(ports["require"], pki, "alice", "localhost")
        # a CRL file that no longer parses: the reload is refused at the crl key, and the
        # running configuration (alice revoked) keeps serving
        with open(pki.path("crl-alice.pem"), "w") as f:
            f.write("-----BEGIN X509 CRL-----\nbm90IGEgQ1JM\n-----END X509 CRL-----\n")
        g.signal(signal.SIGHUP)
        log = g.wait_log("event=reload_failed")
        want = (re.escape(g.config_path) + r":\d+:\d+: 'crl' file '" +
                re.escape(pki.path("crl-alice.pem")) + "' cannot be loaded")
        assert re.search(want, log), log[-3000:]
        assert curl(ports["optional"], "/echo", "alice", pki) == "200"
        last = json.loads(log_lines(g, 3)[-1])
        assert last["tls_client_verify"] == "FAILED:certificate revoked", last


def test_combined_timing_and_log_format_end_with_the_client_certificate(gateway, pki):
    with ScriptedOrigin() as o:
        rp, op = free_port(), free_port()
        g = gateway(gw_text(pki, o.port, rp, op, log_format="combined_timing"),
                    wait=[("127.0.0.1", rp), ("127.0.0.1", op)])
        assert curl(rp, "/echo", "alice", pki) == "200"
        assert curl(op, "/echo", "old", pki) == "200"
        a, b = log_lines(g, 2)
        assert re.search(r' [0-9a-f]{32} "SUCCESS" "O=h2gate test,CN=alice"$', a), a
        assert b.endswith(' "FAILED:certificate has expired" "O=h2gate test,CN=old"'), b
        g.stop()
    with ScriptedOrigin() as o:
        rp, op = free_port(), free_port()
        g = gateway(gw_text(pki, o.port, rp, op, log_format="$status $ssl_client_verify "
                                                            "[$ssl_client_s_dn]"),
                    wait=[("127.0.0.1", rp), ("127.0.0.1", op)])
        assert curl(rp, "/echo", "alice", pki) == "200"
        assert curl(op, "/status/200", None, pki) == "403"
        assert log_lines(g, 2) == ["200 SUCCESS [O=h2gate test,CN=alice]", "403 NONE [-]"]
        g.stop()


def test_depth_counts_the_intermediates(gateway, pki):
    """depth 0: no intermediate may stand between alice and the root (OpenSSL's verify
    depth); depth 1 (the default) lets hers through."""
    with ScriptedOrigin() as o:
        rp, op = free_port(), free_port()
        text = gw_text(pki, o.port, rp, op).replace("mode: optional}", "mode: optional, depth: 0}")
        g = gateway(text, wait=[("127.0.0.1", rp), ("127.0.0.1", op)])
        assert curl(op, "/echo", "alice", pki) == "200"
        assert curl(rp, "/echo", "alice", pki) == "200"
        a, b = [json.loads(l) for l in log_lines(g, 2)]
        # OpenSSL stops building the chain at the depth: the root is out of reach
        assert a["tls_client_verify"] == "FAILED:unable to get local issuer certificate", a
        assert b["tls_client_verify"] == "SUCCESS", b
        assert "client-cert" not in origin_headers(o)[0] and "client-cert" in origin_headers(o)[1]
        g.stop()


@pytest.mark.parametrize("client_auth,want", [
    ("{ca: MISSING, mode: require}", "'ca' file '{d}/nope.pem' cannot be read"),
    ("{ca: KEY, mode: require}", "is not PEM: it holds no certificate"),
    ("{ca: ROOT, crl: ROOT}", "is not PEM: it holds no CRL"),
    ("{ca: ROOT, crl: BADCRL}", "'crl' file '{d}/bad-crl.pem' cannot be loaded"),
    ("{ca: BADCA}", "'ca' file '{d}/bad-ca.pem' cannot be loaded"),
    ("{ca: ROOT, depth: 17}", "'depth'"),
    ("{ca: ROOT, mode: sometimes}", "'mode' must be none, optional or require, not 'sometimes'"),
    ("{mode: optional}", "client_auth needs 'ca'"),
])
def test_bad_client_auth_is_refused_at_its_key(h2gate_bin, pki, tmp_path, client_auth, want):
    d = pki.d
    with open(os.path.join(d, "bad-crl.pem"), "w") as f:
        f.write("-----BEGIN X509 CRL-----\nbm90IGEgQ1JM\n-----END X509 CRL-----\n")
    with open(os.path.join(d, "bad-ca.pem"), "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
    subst = {"MISSING": f"{d}/nope.pem", "KEY": pki.path("server-key.pem"),
             "ROOT": pki.path("root.pem"), "BADCRL": f"{d}/bad-crl.pem",
             "BADCA": f"{d}/bad-ca.pem"}
    for k, v in subst.items():
        client_auth = client_auth.replace(k, v)
    port = free_port()
    text = f"""listen:
  - address: 127.0.0.1:{port}
    tls:
      certificate: {pki.path('server.pem')}
      key: {pki.path('server-key.pem')}
      client_auth: {client_auth}
upstreams:
  app: {{servers: [127.0.0.1:9]}}
routes:
  - {{host: '*', path: /, upstream: app}}
"""
    r = check_config(h2gate_bin, tmp_path, text)
    assert r.returncode == 1, r.stderr
    assert want.format(d=d) in r.stderr, r.stderr
    # at the line of client_auth (line 6), FILE:LINE:COL
    assert re.search(re.escape(str(tmp_path / "c.yaml")) + r":6:\d+: ", r.stderr), r.stderr

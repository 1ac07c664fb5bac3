"""A listener with tls.acme and `certificates:` entries beside it: the ACME certificate is the
default (no SNI, or a name no entry has), each entry is served for its names, and pebble's
tls-alpn-01 validation still reaches the ACME store. The config's refusals of what would be
ambiguous or unreachable."""
import subprocess

import pytest

from procs import free_port
from acmetest import acme_config, listener_refused, needs_pebble, served_chain, verify, x509

pytestmark = needs_pebble


def make_pair(tmp_path, name):
    cert, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "2", "-subj", f"/CN={name}", "-addext",
                        f"subjectAltName=DNS:{name}"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return cert, key


def test_acme_certificate_beside_sni_entries(gateway, pebble, tmp_path):
    port = free_port()
    pb = pebble(port)
    cert, key = make_pair(tmp_path, "files.test")
    text = acme_config(port, pb.directory, pb.ca, tmp_path / "acme", names=("a.test",),
                       tls_extra=f", certificates: [{{certificate: {cert}, key: {key}, "
                                 "names: [files.test]}]")
    g = gateway(text, wait=[("127.0.0.1", port)])
    # the file entry is served for its name from the start, the stand-in for the ACME name
    assert "CN = files.test" in x509(served_chain(port, "files.test")[0], "-subject")
    log = g.wait_log("event=acme_certificate_installed", timeout=25)
    assert "event=acme_certificate_installed names=a.test" in log, log[-3000:]
    # validation reached the store through the SNI choice, and the issued chain verifies
    chain = served_chain(port, "a.test")
    r = verify(tmp_path, chain, pb.roots(), "a.test")
    assert r.returncode == 0 and ": OK" in r.stdout, r.stdout + r.stderr
    # the ACME certificate is the default: no SNI, or a name no entry lists
    leaf = chain[0]
    assert x509(served_chain(port, None)[0], "-fingerprint") == x509(leaf, "-fingerprint")
    assert x509(served_chain(port, "other.test")[0], "-fingerprint") == \
        x509(leaf, "-fingerprint")
    # the file entry is still served for its name, unchanged by the swap
    files_leaf = served_chain(port, "files.test")[0]
    assert x509(files_leaf, "-fingerprint") == x509(cert.read_text(), "-fingerprint")


@pytest.mark.parametrize("tls,want", [
    ("{acme: [a.test], certificates: [{certificate: C, key: K}]}",
     "a 'certificates:' entry beside tls 'acme' needs 'names'"),
    ("{acme: [a.test, b.test], certificates: [{certificate: C, key: K, names: [B.test]}]}",
     "name 'B.test' is both in tls 'acme' and in a 'certificates:' entry"),
    ("{acme: [a.test], names: [c.test]}", "tls 'acme' replaces certificate, key, names"),
    ("{acme: [a.test], self_signed: true}", "tls 'acme' replaces certificate, key, names"),
])
def test_acme_beside_certificates_checked_at_load(h2gate_bin, tmp_path, tls, want):
    cert, key = make_pair(tmp_path, "c.test")
    listener_refused(h2gate_bin, tmp_path,
                     tls.replace('C,', f'{cert},').replace('K}', f'{key}}}'), want,
                     acme="acme: {directory: https://ca.test/dir}\n")


def test_listener_client_auth_applies_to_the_acme_certificate_not_to_validation(
        gateway, pebble, tmp_path):
    """client_auth mode require on an ACME listener: pebble's acme-tls/1 validation (which
    sends no client certificate) still succeeds, and a client without a certificate is refused
    the ACME certificate's handshake while one the CA signed is served."""
    port = free_port()
    pb = pebble(port)
    ca_crt, ca_key = make_pair(tmp_path, "client-ca")
    ck, csr, crt = tmp_path / "c.key", tmp_path / "c.csr", tmp_path / "c.crt"
    for cmd in (["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", str(ck), "-out", str(csr), "-subj", "/CN=alice"],
                ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey",
                 str(ca_key), "-set_serial", "7", "-days", "2", "-out", str(crt)]):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
    text = acme_config(port, pb.directory, pb.ca, tmp_path / "acme", names=("m.test",),
                       tls_extra=f", client_auth: {{ca: {ca_crt}, mode: require}}")
    g = gateway(text, wait=[("127.0.0.1", port)])
    log = g.wait_log("event=acme_certificate_installed", timeout=25)
    assert "event=acme_certificate_installed names=m.test" in log, log[-3000:]

    def curl(*extra):
        return subprocess.run(["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}",
                               "--resolve", f"m.test:{port}:127.0.0.1", *extra,
                               f"https://m.test:{port}/"], capture_output=True, text=True,
                              timeout=20)
    refused = curl()
    assert refused.stdout == "000" and refused.returncode != 0, refused
    served = curl("--cert", str(crt), "--key", str(ck))
    assert served.stdout == "502", served  # the handshake passed; the origin is a dead port

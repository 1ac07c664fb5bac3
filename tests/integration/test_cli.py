"""The h2gate command line: --version, --help, --check-config, refusal of bad configs."""
import errno
import glob
import os
import re
import signal
import subprocess
import time

import pytest

from procs import ROOT, free_port, h1_get, reuseport_listener, run, sanitizer
from gwtest import FileConfigs, gw_config


def version_of(h2gate_bin):
    """`h2gate --version`: its first line, and the lines after it as {name: text}."""
    r = run([h2gate_bin, "--version"])
    assert r.returncode == 0 and r.stderr == ""
    assert run([h2gate_bin, "-V"]).stdout == r.stdout
    lines = r.stdout.splitlines()
    return lines[0], dict(line.split(": ", 1) for line in lines[1:])


def built_running(text):
    m = re.fullmatch(r"built with (.+), running (.+)", text)
    assert m, text
    return m.groups()


def pkg_config_version(name):
    return run(["pkg-config", "--modversion", name]).stdout.strip()


def test_version(h2gate_bin):
    first, _ = version_of(h2gate_bin)
    assert re.fullmatch(r"h2gate \d+\.\d+\.\d+", first)


def test_version_prints_the_build(h2gate_bin):
    """--version printed the version number alone; it now says what a bug report needs, as
    nginx -V does. Each library's running version is checked against another user of the same
    shared library (openssl(1), Python's ssl and zlib modules, the zstd and brotli tools, the
    library's own version function called through ctypes); the versions built with against
    pkg-config (what meson compiled against); the compiler against the binary's .comment
    section; the configure line against the build directory's meson options."""
    import ctypes
    import ctypes.util
    import json
    import ssl
    import zlib
    _, v = version_of(h2gate_bin)
    built, running = built_running(v["OpenSSL"])
    library = re.search(r"\(Library: (.+)\)", run(["openssl", "version"]).stdout)
    assert running == (library.group(1) if library else run(["openssl", "version"]).stdout.strip())
    assert running == ssl.OPENSSL_VERSION
    assert built.startswith(f"OpenSSL {pkg_config_version('openssl')} ")
    assert built_running(v["zlib"]) == (pkg_config_version("zlib"), zlib.ZLIB_RUNTIME_VERSION)

    def lib(name):
        return ctypes.CDLL(ctypes.util.find_library(name))

    uv = lib("uv")
    uv.uv_version_string.restype = ctypes.c_char_p
    assert built_running(v["libuv"]) == (pkg_config_version("libuv"),
                                         uv.uv_version_string().decode())
    yaml = lib("yaml")
    yaml.yaml_get_version_string.restype = ctypes.c_char_p
    assert built_running(v["libyaml"]) == (pkg_config_version("yaml-0.1"),
                                           yaml.yaml_get_version_string().decode())
    hp = lib("http_parser")
    hp.http_parser_version.restype = ctypes.c_ulong
    n = hp.http_parser_version()
    header = open("/usr/include/http_parser.h").read()
    major, minor, patch = (re.search(rf"#define HTTP_PARSER_VERSION_{k} (\d+)", header).group(1)
                           for k in ("MAJOR", "MINOR", "PATCH"))
    assert built_running(v["http-parser"]) == (f"{major}.{minor}.{patch}",
                                               f"{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}")
    assert v["hiredis"] == f"built with {pkg_config_version('hiredis')}"
    if v["zstd"] != "not built in":
        tool = re.search(r"v(\d+\.\d+\.\d+)", run(["zstd", "--version"]).stdout).group(1)
        assert built_running(v["zstd"]) == (pkg_config_version("libzstd"), tool)
    if v["brotli"] != "not built in":
        tool = run(["brotli", "--version"]).stdout.split()[1]
        assert built_running(v["brotli"]) == (pkg_config_version("libbrotlienc"), tool)
    cc, cc_version = v["compiler"].split(" ", 1)
    comment = run(["readelf", "-p", ".comment", h2gate_bin]).stdout
    assert cc in ("gcc", "clang") and cc_version in comment, (v["compiler"], comment)
    opts = dict(kv.split("=", 1) for kv in v["configure"].split(" ") if "=" in kv)
    intro = os.path.join(os.path.dirname(os.path.dirname(h2gate_bin)), "meson-info",
                         "intro-buildoptions.json")
    if os.path.exists(intro):  # a build directory's binary, not an installed one
        with open(intro) as f:
            meson = {o["name"]: o["value"] for o in json.load(f)}
        for k in ("buildtype", "b_sanitize", "prefix", "sysconfdir"):
            assert opts[k] == str(meson[k]), k
        assert opts["tests"] == str(meson["tests"]).lower()


def test_help_lists_options(h2gate_bin):
    r = run([h2gate_bin, "--help"])
    assert r.returncode == 0
    for opt in ("-c", "--check-config", "--version", "--help"):
        assert opt in r.stdout


def test_unknown_option_is_usage_error(h2gate_bin):
    r = run([h2gate_bin, "--frobnicate"])
    assert r.returncode == 2
    assert "usage:" in r.stderr


CONFIGS = [os.path.join(ROOT, "config", "gateway.yaml")] + sorted(
    glob.glob(os.path.join(ROOT, "config", "examples", "*.yaml")))


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_check_config_accepts_shipped_configs(h2gate_bin, path, tmp_path):
    # checked from a working directory as the README prepares one (`mkdir -p state`): -t
    # checks the directories of the pid file and the access log as start-up would; config/ is
    # the tree's, for the example certificates the files name relative to it
    os.symlink(os.path.join(ROOT, "config"), tmp_path / "config")
    (tmp_path / "state").mkdir()
    r = run([h2gate_bin, "--check-config", path], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{path}: ok"


def test_embedded_default_is_config_gateway_yaml(h2gate_bin):
    r = run([h2gate_bin, "--print-default-config"])
    assert r.returncode == 0
    with open(os.path.join(ROOT, "config", "gateway.yaml")) as f:
        assert r.stdout == f.read()


BROKEN = """\
listen:
  - address: 127.0.0.1:8080
    colour: blue
upstreams:
  app:
    servers: [127.0.0.1:9000]
    max_connections: lots
routes:
  - { host: "*", path: /, upstream: nowhere }
"""


def test_check_config_rejects_broken_file_with_file_line_col(h2gate_bin, tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text(BROKEN)
    r = run([h2gate_bin, "--check-config", str(p)])
    assert r.returncode == 1
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    # every problem is reported, each as FILE:LINE:COL: message
    assert len(lines) >= 3, r.stderr
    for l in lines:
        assert re.match(re.escape(str(p)) + r":\d+:\d+: \S", l), l
    assert any(l.startswith(f"{p}:3:") and "colour" in l for l in lines), r.stderr
    assert any(l.startswith(f"{p}:7:") and "max_connections" in l for l in lines), r.stderr
    assert any(l.startswith(f"{p}:9:") and "nowhere" in l for l in lines), r.stderr


TWO_WORDS = """listen:
  - address: 127.0.0.1:8443
    tls:
      certificate: cert.pem
      key: key.pem
      alpn_preference: {alpn}
      ticket_key_cipher: {cipher}
forwarded_for: {fwd}
upstreams:
  app: {{servers: [127.0.0.1:9000]}}
routes:
  - {{path: /, upstream: app}}
"""


def test_a_key_of_two_words_names_both_and_the_bad_one(h2gate_bin, tmp_path):
    p = tmp_path / "words.yaml"
    p.write_text(TWO_WORDS.format(alpn="h3", cipher="des", fwd="keep"))
    r = run([h2gate_bin, "--check-config", str(p)])
    assert r.returncode == 1
    for want in (f"{p}:6:24: 'alpn_preference' must be h2 or http/1.1, not 'h3'",
                 f"{p}:7:26: 'ticket_key_cipher' must be aes-128-cbc or aes-256-cbc, not 'des'",
                 f"{p}:8:16: 'forwarded_for' must be replace or append, not 'keep'"):
        assert want in r.stderr, r.stderr
    # both words of each are taken (the certificate files are missing: that is the only error)
    for alpn, cipher, fwd in (("h2", "aes-128-cbc", "replace"),
                              ("http/1.1", "aes-256-cbc", "replace")):
        p.write_text(TWO_WORDS.format(alpn=alpn, cipher=cipher, fwd=fwd))
        r = run([h2gate_bin, "--check-config", str(p)])
        assert "must be" not in r.stderr, r.stderr


CACHE = """listen: [{{address: 127.0.0.1:8080}}]
upstreams: {{app: {{servers: [127.0.0.1:9000]}}}}
routes: [{{upstream: app, cache: {route}}}]
cache: {{memory: {memory}, max_object: 2MiB, stale_if_error: {sie}}}
"""


def test_cache_section_is_checked_and_a_route_turns_it_on(h2gate_bin, tmp_path):
    p = tmp_path / "cache.yaml"
    p.write_text(CACHE.format(route="false", memory="64MiB", sie="1h"))
    r = run([h2gate_bin, "--check-config", str(p)])
    assert r.returncode == 0, r.stderr
    p.write_text(CACHE.format(route="true", memory="64MiB", sie="1h"))
    r = run([h2gate_bin, "--check-config", str(p)])
    assert r.returncode == 0, r.stderr
    # every value checked, each error at its FILE:LINE:COL
    p.write_text(CACHE.format(route="true", memory="1MiB", sie="1.5s"))
    r = run([h2gate_bin, "--check-config", str(p)])
    assert r.returncode == 1
    for want in (f"{p}:4:35: cache 'max_object' (2097152 bytes) must not be larger than "
                 "'memory' (1048576 bytes)",
                 f"{p}:4:57: cache 'stale_if_error' must be a duration"):
        assert want in r.stderr, r.stderr


def test_check_config_missing_file(h2gate_bin, tmp_path):
    r = run([h2gate_bin, "--check-config", str(tmp_path / "absent.yaml")])
    assert r.returncode == 1
    assert "absent.yaml" in r.stderr


def test_config_path_that_is_a_directory_is_said_so(h2gate_bin, tmp_path):
    """`-c DIRECTORY` read as an empty file and said "the config is empty"."""
    for args in (["-t", "-c", str(tmp_path)], ["--check-config", str(tmp_path)],
                 ["-c", str(tmp_path)]):
        r = run([h2gate_bin, *args], timeout=10)
        assert r.returncode == 1, args
        assert r.stderr == f"{tmp_path}:1:1: is a directory, not a config file\n", args


@pytest.mark.parametrize("case", ["key_mismatch", "key_is_certificate", "log_dir_missing",
                                  "tls_ca_unreadable", "pid_dir_missing"])
def test_check_opens_every_file_start_up_opens(h2gate_bin, tmp_path, case):
    """-t (and --check-config) said ok to a config that start-up then refused: it now loads
    each certificate with its key, each TLS upstream's tls_ca and the access log as start-up
    does, and says FILE:LINE:COL at the key that names the file; start-up says the same."""
    fc = FileConfigs(tmp_path, free_port(), free_port(), 9)
    text, pos, msg = fc.bad[case]
    p = tmp_path / "gw.yaml"
    p.write_text(text)
    for args in (["-t", "-c", str(p)], ["--check-config", str(p)]):
        r = run([h2gate_bin, *args], timeout=20)
        assert (r.returncode, r.stdout) == (1, ""), (args, r.stdout, r.stderr)
        assert r.stderr == f"{p}:{pos}: {msg}\n", args
    r = run([h2gate_bin, "-c", str(p)], timeout=20)
    assert r.returncode == 1
    assert f'event=startup_failed error="{p}:{pos}: {msg}"' in r.stderr, r.stderr


def test_check_neither_creates_nor_truncates_the_access_log(h2gate_bin, tmp_path):
    fc = FileConfigs(tmp_path, free_port(), free_port(), 9)
    p = tmp_path / "gw.yaml"
    p.write_text(fc.good)
    r = run([h2gate_bin, "-t", "-c", str(p)], timeout=20)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{p}: ok\n", "")
    assert os.listdir(os.path.dirname(fc.log)) == []  # not created (nor left behind)
    with open(fc.log, "w") as f:
        f.write("a line from before\n")
    r = run([h2gate_bin, "-t", "-c", str(p)], timeout=20)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{p}: ok\n", "")
    with open(fc.log) as f:
        assert f.read() == "a line from before\n"


def test_gateway_refuses_to_start_on_bad_config(h2gate_bin, tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text(BROKEN)
    r = run([h2gate_bin, "-c", str(p)], timeout=10)
    assert r.returncode == 1
    assert f"{p}:3:" in r.stderr


def refused_start(cmd, timeout=5):
    """Run a gateway that must refuse to start: (exit status, stderr); fails the test if it
    is still running after timeout seconds (then it started)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        _, err = p.communicate()
        raise AssertionError("the second instance started:\n" + err)
    return p.returncode, err


def wait_pid_file(path, timeout=5):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    return open(path).read()


@pytest.mark.parametrize("same", ["file", "listener", "admin", "pid_file"])
def test_second_instance_on_the_same_addresses_or_pid_file_is_refused(gateway, h2gate_bin,
                                                                      tmp_path, same):
    """A second gateway must not start next to a running one: with the same file, on one of
    its listener addresses (SO_REUSEPORT would let it share the port and take half the
    connections), on its admin address, or with the pid file of a running gateway (it would
    replace it, then remove it at exit). Each is refused with an error line that says why and
    exit status 1; the first instance's pid file is neither rewritten nor removed."""
    port, admin = free_port(), free_port()
    pid_path = tmp_path / "h2gate.pid"

    def conf(port, admin, pid):
        return gw_config(port, ["127.0.0.1:9"], extra=f"admin: {{address: 127.0.0.1:{admin}}}\n"
                         + (f"pid_file: {pid}\n" if pid else ""))

    g = gateway(conf(port, admin, pid_path), wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    assert wait_pid_file(pid_path) == f"{g.proc.pid}\n"
    before = os.stat(pid_path)
    in_use = ('address=127.0.0.1:{0} reason="bind() to 127.0.0.1:{0} failed (98: Address '
              'already in use): another process listens there"')
    pid_in_use = f"event=pid_file_in_use path={pid_path} pid={g.proc.pid} "
    other_pid = tmp_path / "other.pid"
    text, line = {
        "file": (conf(port, admin, pid_path), pid_in_use),
        "listener": (conf(port, free_port(), other_pid),
                     "event=listen_failed " + in_use.format(port)),
        "admin": (conf(free_port(), admin, None), "event=admin_failed " + in_use.format(admin)),
        "pid_file": (conf(free_port(), free_port(), pid_path), pid_in_use),
    }[same]
    p = tmp_path / "second.yaml"
    p.write_text(text)
    rc, err = refused_start([h2gate_bin, "-c", str(p)])
    assert rc == 1, err
    errors = [l for l in err.splitlines() if "level=error" in l]
    assert line in errors[0], err
    assert not other_pid.exists()
    after = os.stat(pid_path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert pid_path.read_text() == f"{g.proc.pid}\n"
    # the first one still serves, and removes its pid file at exit
    assert g.proc.poll() is None
    assert h1_get(port, "/").startswith(b"HTTP/1.1 502")
    g.signal(signal.SIGTERM)
    assert g.wait() == 0
    assert not pid_path.exists()


def test_a_foreign_reuseport_socket_on_the_address_is_refused(h2gate_bin, tmp_path):
    """Any process of the same user listening with SO_REUSEPORT (which the gateway's own
    sockets would silently join) makes the start fail."""
    s = reuseport_listener()
    port = s.getsockname()[1]
    try:
        p = tmp_path / "gw.yaml"
        p.write_text(gw_config(port, ["127.0.0.1:9"]))
        rc, err = refused_start([h2gate_bin, "-c", str(p)])
        assert rc == 1, err
        assert f'event=listen_failed address=127.0.0.1:{port} reason="bind() to' in err
    finally:
        s.close()


def test_a_stale_pid_file_does_not_stop_the_start(gateway, tmp_path):
    """A pid file left by a crash names a process that is gone, or whose number now belongs to
    another program: the gateway starts and replaces it."""
    port = free_port()
    pid_path = tmp_path / "h2gate.pid"
    pid_path.write_text(f"{os.getpid()}\n")  # this test's interpreter: not an h2gate
    g = gateway(gw_config(port, ["127.0.0.1:9"], extra=f"pid_file: {pid_path}\n"),
                wait=[("127.0.0.1", port)])
    deadline = time.monotonic() + 5
    while pid_path.read_text() != f"{g.proc.pid}\n" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pid_path.read_text() == f"{g.proc.pid}\n"


SIGNALFD_FAILS = r"""
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
int signalfd(int fd, const sigset_t *mask, int flags);
int signalfd(int fd, const sigset_t *mask, int flags)
{
    (void)fd;
    (void)mask;
    (void)flags;
    errno = atoi(getenv("SIGNALFD_ERRNO"));
    return -1;
}
"""


@pytest.mark.skipif(sanitizer() == "asan", reason="ASan's runtime must come first in LD_PRELOAD")
@pytest.mark.parametrize("err,status", [(errno.EMFILE, "GW_E_IO"), (errno.ENOMEM, "GW_E_NOMEM")])
def test_a_failed_signalfd_stops_with_its_own_error(h2gate_bin, tmp_path, err, status):
    """The main loop's signalfd refused (here by a preloaded stand-in): start-up says why and
    the process stops with the code of that failure, out of memory only when it was that."""
    src, lib = tmp_path / "fail.c", tmp_path / "libfail.so"
    src.write_text(SIGNALFD_FAILS)
    r = run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)])
    assert r.returncode == 0, r.stderr
    p = tmp_path / "gw.yaml"
    p.write_text(gw_config(free_port(), ["127.0.0.1:9"]))
    env = dict(os.environ, LD_PRELOAD=str(lib), SIGNALFD_ERRNO=str(err))
    r = run([h2gate_bin, "-c", str(p)], timeout=20, env=env)
    assert r.returncode == 1, r.stderr
    assert f'event=startup_failed reason="signalfd: {os.strerror(err)}"' in r.stderr, r.stderr
    assert f"event=stopped status={status}" in r.stderr, r.stderr

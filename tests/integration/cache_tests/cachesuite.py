"""Plays the cases of the http-tests cache-tests suite (cases.json, transcribed from
https://github.com/http-tests/cache-tests, BSD-3-Clause: LICENSE.cache-tests) against an HTTP
cache in front of a scripted origin, and judges them the way the suite does.

A case is a list of requests. Each has a fresh URL (/test/<uuid>[/filename][?query]) so cases
run side by side. The client sends a request's headers (plus `Req-Num: n`, the request's number
in its case) to the cache; the origin (SuiteOrigin) answers request n with the case's n-th
response (status, fields, body: the uuid unless the case gives one; dates written as offsets
from now are turned into HTTP-dates), adds `Server-Request-Count` (how many requests of this
case it has seen), `Server-Now` (ms) and `Request-Numbers`, and records what it got. Request n
"comes from the cache" when its answer carries a Server-Request-Count below n, "not cached" when
it carries n, "etag/lm validated" when the origin saw If-None-Match/If-Modified-Since (it
answers 304 only to the validator it sent last; else 999). `pause_after` sleeps 3 s after
the request, as upstream does (the caches run on the real clock).

Results are upstream's: True, or (kind, message) with kind "Assertion" (the behaviour checked
failed) or "Setup" (a step the check relies on failed). classify() maps them to upstream's
categories (pass, fail, optional_fail, yes/no for `check` cases, setup_fail, dependency_fail).
One deliberate difference: a two-element `expected_response_headers_missing` entry ([name,
value]) is checked as documented (the field is absent or does not contain value); upstream's
client reads it from a property that is never set, so it never fails there. And a request
field a case lists twice (vary-normalise-combine's `Foo: 1` and `Foo: 2`) goes as two field
lines, as the case means; upstream's fetch() joins them into one. Field values are Latin-1
both ways (the obs-text ETag of conditional-etag-strong-respond-obs-text is one byte).

The caches under test are at the end: h2gate_config() (what test_cache_suite.py and run.py
start) and NginxCache (run.py --peer nginx)."""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "lib"))

from gwtest import gw_config  # noqa: E402
from origin import ScriptedOrigin  # noqa: E402
from procs import Gateway, free_port, stop_proc, wait_port  # noqa: E402

CASES = os.path.join(HERE, "cases.json")
PAUSE = 3.0  # upstream's pause_after, in seconds
TIMEOUT = 10.0  # upstream's request timeout

DATE_FIELDS = {"date", "expires", "last-modified", "if-modified-since", "if-unmodified-since"}
LOCATION_FIELDS = {"location", "content-location"}
NO_BODY_STATUS = {204, 304}
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
LONG_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def load_cases(path=CASES):
    """[case]: each case dict with its upstream fields plus "suite" (the suite's id)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for suite in data["suites"]:
        for t in suite["tests"]:
            out.append(dict(t, suite=suite["id"]))
    return out


def load_meta(path=CASES):
    """The upstream repository, commit and license the cases were transcribed from."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return {k: data[k] for k in ("upstream", "commit", "license")}


def http_date(now_ms, delta_s, rfc850=False):
    """The HTTP-date delta_s seconds from now_ms (IMF-fixdate, or RFC 850's obsolete form)."""
    if now_ms is None:
        return "Invalid Date"
    t = time.gmtime((now_ms + delta_s * 1000) // 1000)
    if rfc850:
        return (f"{LONG_DAYS[t.tm_wday]}, {t.tm_mday:02d}-{MONTHS[t.tm_mon - 1]}-{t.tm_year % 100:02d} "
                f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")
    return (f"{DAYS[t.tm_wday]}, {t.tm_mday:02d} {MONTHS[t.tm_mon - 1]} {t.tm_year} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")


def fixup(name, value, now_ms, base_url, req):
    """A field value of a case as sent or expected: an integer in a date field is an offset in
    seconds from the origin's now; a Location/Content-Location of a `magic_locations` request
    is put under the case's URL."""
    low = name.lower()
    if low in DATE_FIELDS and isinstance(value, int) and not isinstance(value, bool):
        return http_date(now_ms, value, low in req.get("rfc850date", ()))
    if low in LOCATION_FIELDS and req.get("magic_locations"):
        return f"{base_url}/{value}" if value else base_url
    return str(value)


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


class Failure(Exception):
    def __init__(self, setup, message):
        super().__init__(message)
        self.kind = "Setup" if setup else "Assertion"


def check(setup, cond, message):
    if not cond:
        raise Failure(setup, message)


def is_setup(req, member):
    return req.get("setup") is True or member in req.get("setup_tests", ())


class SuiteOrigin(ScriptedOrigin):
    """The origin of every case at once: /test/<uuid>... answers from the case registered
    under uuid (register()), and state(uuid) is what it received, request by request."""

    def __init__(self):
        self.cases = {}    # uuid -> [request config]
        self.rendered = {}  # (uuid, index) -> [(name, value, saved)] as first sent
        self.stash = {}    # uuid -> [{request_num, request_method, request_headers, response_headers}]
        super().__init__()

    def register(self, uid, requests):
        with self.lock:
            self.cases[uid] = requests
            self.stash[uid] = []

    def state(self, uid):
        with self.lock:
            return list(self.stash.get(uid, []))

    def _respond(self, c, req):
        path = urllib.parse.urlsplit(req.target).path
        parts = path.split("/")
        if len(parts) < 3 or parts[1] != "test":
            c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return True
        uid = parts[2]
        with self.lock:
            requests = self.cases.get(uid)
            server_num = len(self.stash.get(uid, [])) + 1
        if requests is None:
            c.sendall(b"HTTP/1.1 409 Conflict\r\nContent-Length: 0\r\n\r\n")
            return True
        client_num = _int(req.header("req-num"))
        num = client_num or server_num
        if not 1 <= num <= len(requests):
            c.sendall(b"HTTP/1.1 409 Conflict\r\nContent-Length: 0\r\n\r\n")
            return True
        conf = requests[num - 1]
        if conf.get("response_pause"):
            time.sleep(conf["response_pause"])
        now_ms = int(time.time() * 1000)
        with self.lock:
            server_num = len(self.stash[uid]) + 1

        status, reason = conf.get("response_status", [200, "OK"])
        if conf.get("expected_type", "").endswith("validated"):
            # 304 only to the validators of the response before: as it was sent, or as the
            # case writes it when that request did not reach the origin
            with self.lock:
                prev = self.rendered.get((uid, num - 2))
            if prev is None:
                prev = [(h[0], h[1], None) for h in requests[num - 2].get("response_headers", [])] \
                    if num >= 2 else []
            last = {n.lower(): v for n, v, _ in prev}
            lm, etag = last.get("last-modified"), last.get("etag")
            if (lm and req.header("if-modified-since") == lm) or \
                    (etag and req.header("if-none-match") == etag):
                status, reason = 304, "Not Modified"
            else:
                status, reason = 999, "304 Not Generated"

        fields = [("Server-Base-Url", req.target), ("Server-Request-Count", str(server_num)),
                  ("Client-Request-Count", str(client_num) if client_num else "NaN"),
                  ("Server-Now", str(now_ms))]
        with self.lock:
            rendered = self.rendered.get((uid, num - 1))
            if rendered is None:  # upstream rewrites its config once: later answers repeat it
                rendered = []
                for h in conf.get("response_headers", []):
                    value = fixup(h[0], h[1], now_ms, req.target, conf)
                    rendered.append((h[0], value, len(h) < 3 or h[2] is True))
                self.rendered[(uid, num - 1)] = rendered
        saved = {}
        for name, value, keep in rendered:
            fields.append((name, value))
            if keep:  # the values of the field so far, as the client should see them joined
                saved[name] = ", ".join(v for n, v in fields if n.lower() == name.lower())
        names = {n.lower() for n, _ in fields}
        if "content-type" not in names:
            fields.append(("Content-Type", "text/plain"))
        if "date" not in names:
            fields.append(("Date", http_date(now_ms, 0)))
        entry = {"request_num": client_num, "request_method": req.method,
                 "request_headers": _joined(req.headers),
                 "response_headers": list(saved.items())}
        with self.lock:
            self.stash[uid].append(entry)
            numbers = " ".join(str(e["request_num"]) for e in self.stash[uid])
        fields.append(("Request-Numbers", numbers))

        if conf.get("disconnect"):
            return False  # closed with no answer at all
        body = b"" if status in NO_BODY_STATUS else \
            (conf.get("response_body") or uid).encode("utf-8")
        framed = "content-length" in names or "transfer-encoding" in names
        if not framed and status not in NO_BODY_STATUS:
            fields.append(("Content-Length", str(len(body))))
        head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{n}: {v}\r\n" for n, v in fields)
        c.sendall(head.encode("latin-1", "replace") + b"\r\n" +
                  (b"" if req.method == "HEAD" else body))
        # a case that sets the framing fields itself: the close ends the body
        return not framed


def _joined(pairs):
    out = {}
    for k, v in pairs:
        k = k.lower()
        out[k] = f"{out[k]}, {v}" if k in out else v
    return out


class Response:
    def __init__(self, status, fields, body):
        self.status = status
        self.fields = fields  # [(lowercase name, value)] as received
        self.body = body

    def get(self, name):
        """The field's values joined with ", " (fetch's Headers.get()), None when absent."""
        vals = [v for n, v in self.fields if n == name.lower()]
        return ", ".join(vals) if vals else None

    def has(self, name):
        return self.get(name) is not None


def send(port, uid, req, num, prev, host="localhost"):
    """Request num of a case through the cache on port: a Response, or raises OSError."""
    target = f"/test/{uid}"
    if "filename" in req:
        target += "/" + req["filename"]
    if "query_arg" in req:
        target += "?" + req["query_arg"]
    fields = [("Pragma", "foo"), ("Cache-Control", "nothing-to-see-here")]  # as upstream's CLI
    for name, value in req.get("request_headers", []):
        if req.get("magic_ims") and name.lower() == "if-modified-since":
            value = fixup(name, value, _int(prev.get("server-now")) if prev else None,
                          prev.get("server-base-url") if prev else None, req)
        fields.append((name, str(value)))
    fields += [("Test-ID", req["id"]), ("Req-Num", str(num))]
    method = req.get("request_method", "GET")
    body = req.get("request_body")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host)
        for name, value in fields:
            conn.putheader(name, value.encode("latin-1", "replace"))
        if body is not None:
            conn.putheader("Content-Length", str(len(body.encode())))
        conn.endheaders(body.encode() if body is not None else None)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, [(k.lower(), v) for k, v in r.getheaders()],
                        data.decode("utf-8", "replace"))
    finally:
        conn.close()


def check_response(req, num, res, uid):
    """Upstream's client-side checks of response num (raises Failure)."""
    res_num = _int(res.get("server-request-count"))
    numbers = res.get("request-numbers")
    if numbers:
        seen = numbers.split(" ")
        check(True, len(seen) == len(set(seen)), "retry")
    et = req.get("expected_type")
    if et == "cached":
        if not (res.status == 304 and res_num is None):
            check(is_setup(req, "expected_type"), res_num is not None and res_num < num,
                  f"Response {num} does not come from cache")
    elif et == "not_cached":
        check(is_setup(req, "expected_type"), res_num == num, f"Response {num} comes from cache")

    if "expected_status" in req:
        if req["expected_status"] is not None:
            check(is_setup(req, "expected_status"), res.status == req["expected_status"],
                  f"Response {num} status is {res.status}, not {req['expected_status']}")
    elif "response_status" in req:
        check(True, res.status == req["response_status"][0],
              f"Response {num} status is {res.status}, not {req['response_status'][0]}")
    elif res.status == 999:
        check(is_setup(req, "expected_type"), False,
              f"Request {num} should have been conditional, but it was not.")
    else:
        check(True, res.status == 200, f"Response {num} status is {res.status}, not 200")

    setup = is_setup(req, "expected_response_headers")
    for h in req.get("expected_response_headers", []):
        if isinstance(h, str):
            check(setup, res.has(h), f"Response {num} {h} header not present.")
        elif len(h) > 2:
            check(setup, res.has(h[0]), f"Response {num} {h[0]} header not present.")
            value = res.get(h[0])
            if h[1] == "=":
                ok, msg = value == res.get(h[2]), f"match {h[2]} ({res.get(h[2])})"
            elif h[1] == ">":
                ok, msg = (_int(value) or 0) > h[2], f"be bigger than {h[2]}"
            else:
                raise ValueError(f"unknown operator {h[1]}")
            check(setup, ok, f"Response {num} header {h[0]} is {value}, should {msg}")
        else:
            want = fixup(h[0], h[1], _int(res.get("server-now")), res.get("server-base-url"), req)
            check(setup, res.get(h[0]) == want,
                  f'Response {num} header {h[0]} is "{res.get(h[0])}", not "{want}"')
    setup = is_setup(req, "expected_response_headers_missing")
    for h in req.get("expected_response_headers_missing", []):
        if isinstance(h, str):
            check(setup, not res.has(h), f'Response {num} includes unexpected header {h}: "{res.get(h)}"')
        else:
            value = res.get(h[0])
            check(setup, value is None or h[1] not in value,
                  f'Response {num} header {h[0]} still has value "{value}"')

    if req.get("check_body") is False:
        return
    if "expected_response_text" in req:
        if req["expected_response_text"] is not None:
            check(is_setup(req, "expected_response_text"), res.body == req["expected_response_text"],
                  f'Response body is "{res.body}", not "{req["expected_response_text"]}"')
    elif req.get("response_body") is not None:
        check(True, res.body == req["response_body"],
              f'Response body is "{res.body}", not "{req["response_body"]}"')
    elif res.status not in NO_BODY_STATUS and req.get("request_method") != "HEAD":
        check(True, res.body == uid, f'Response body is "{res.body}", not "{uid}"')


def check_origin(requests, responses, state):
    """Upstream's checks of what the origin received, request by request (raises Failure)."""
    idx = 0
    for i, req in enumerate(requests):
        num = i + 1
        got = state[idx] if idx < len(state) else None
        setup = is_setup(req, "expected_type")
        validators = []
        et = req.get("expected_type")
        if et == "cached":
            continue  # the origin should not have seen it
        if et == "not_cached":
            check(setup, got is not None and got["request_num"] == num,
                  f"Response {num} comes from cache "
                  f"({got['request_num'] if got else 'nothing'} on server)")
        elif et == "etag_validated":
            validators.append("if-none-match")
        elif et == "lm_validated":
            validators.append("if-modified-since")
        idx += 1
        for v in validators:
            check(setup, got is not None, f"request {num} wasn't sent to server")
            check(setup, v in got["request_headers"], f"request {num} doesn't have {v} header")
        if got is None and ("expected_request_headers" in req or "expected_method" in req
                            or "expected_request_headers_missing" in req):
            check(False, False, f"request {num} wasn't sent to server")
        setup_h = is_setup(req, "expected_request_headers")
        for h in req.get("expected_request_headers", []):
            if isinstance(h, str):
                check(setup_h, h.lower() in got["request_headers"], f"Request {num} {h} header not present.")
            else:
                value = got["request_headers"].get(h[0].lower())
                check(setup_h, value == h[1], f'Request {num} header {h[0]} is "{value}", not "{h[1]}"')
        setup_m = is_setup(req, "expected_request_headers_missing")
        for h in req.get("expected_request_headers_missing", []):
            if isinstance(h, str):
                check(setup_m, h.lower() not in got["request_headers"], f"Request {num} {h} header present.")
            else:
                value = got["request_headers"].get(h[0].lower())
                check(setup_m, value != h[1], f'Request {num} header {h[0]} is "{value}"')
        if got is not None and i < len(responses):
            for name, value in got["response_headers"]:
                if name.lower() == "date":
                    continue
                received = responses[i].get(name)
                check(True, received == value,
                      f'Response {num} header {name} is "{received}", not "{value}"')
        if "expected_method" in req:
            check(is_setup(req, "expected_method"), got is not None and got["request_method"] == req["expected_method"],
                  f"Request {num} had method {got['request_method'] if got else None}, "
                  f"not {req['expected_method']}")


def play(case, origin, port, host="localhost"):
    """Runs one case through the cache on port: True, or (kind, message)."""
    uid = str(uuidlib.uuid4())
    requests = [dict(r, id=case["id"]) for r in case["requests"]]
    origin.register(uid, requests)
    responses = []
    try:
        for i, req in enumerate(requests):
            prev = dict(responses[-1].fields) if responses else None
            try:
                res = send(port, uid, req, i + 1, prev, host)
            except (OSError, http.client.HTTPException) as e:
                return ("Assertion", f"request {i + 1}: {type(e).__name__} {e}")
            responses.append(res)
            check_response(req, i + 1, res, uid)
            if req.get("pause_after"):
                time.sleep(PAUSE)
        check_origin(requests, responses, origin.state(uid))
    except Failure as f:
        return (f.kind, str(f))
    return True


def run_all(cases, origin, port, workers=None, host="localhost", progress=None):
    """Every case, concurrently (each has its own URL): {id: result}. By default all of them
    at once, so that their pauses overlap: the run takes about as long as the case with the
    most pauses (two, 6 s), not a pause per batch of `workers` cases (48 at a time took five
    batches, 18 s)."""
    results = {}
    lock = threading.Lock()

    def one(case):
        r = play(case, origin, port, host)
        with lock:
            results[case["id"]] = r
            if progress:
                progress(case, r)

    with ThreadPoolExecutor(max_workers=workers or max(1, len(cases))) as pool:
        list(pool.map(one, cases))
    return results


def classify(cases, results):
    """{id: category}, with upstream's categories: pass, fail, optional_fail, yes, no,
    setup_fail, retry, dependency_fail (a case whose depends_on case did not pass)."""
    by_id = {c["id"]: c for c in cases}
    memo = {}

    def one(cid):
        if cid in memo:
            return memo[cid]
        case, r = by_id[cid], results.get(cid)
        for dep in case.get("depends_on", []):
            if dep in by_id and one(dep) not in ("pass", "yes"):
                memo[cid] = "dependency_fail"
                return memo[cid]
        if r is not True and r[0] == "Setup":
            memo[cid] = "retry" if r[1] == "retry" else "setup_fail"
        elif case.get("kind", "required") == "required":
            memo[cid] = "pass" if r is True else "fail"
        elif case["kind"] == "optimal":
            memo[cid] = "pass" if r is True else "optional_fail"
        else:
            memo[cid] = "yes" if r is True else "no"
        return memo[cid]

    return {cid: one(cid) for cid in results}


# ---- the caches under test -------------------------------------------------------------------

# nginx as the shared cache the suite's own docker image runs (docker/nginx/nginx.conf
# upstream), with the stale answers of RFC 5861 turned on where nginx has them.
NGINX_CACHE_CONF = """
daemon off;
master_process off;
worker_processes 1;
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    proxy_cache_path {dir}/cache levels=1:2 keys_zone=suite:8m max_size=100m inactive=600m;
    upstream origin {{ server 127.0.0.1:{origin}; keepalive 16; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache suite;
            proxy_cache_revalidate on;
            proxy_cache_use_stale error timeout updating http_500 http_502 http_503 http_504;
        }}
    }}
}}
"""


class NginxCache:
    def __init__(self, origin_port):
        self.dir = tempfile.mkdtemp(prefix="nginx-cache-")
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CACHE_CONF.format(dir=self.dir, port=self.port, origin=origin_port))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-c", conf, "-p", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port("127.0.0.1", self.port, proc=self.proc)

    def stop(self):
        stop_proc(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


def h2gate_config(port, origin_port):
    """A route with `cache: true`, the default `cache:` settings but stale_if_error (RFC 5861
    §4 for answers that do not name it, as nginx's proxy_cache_use_stale above does; heuristic
    freshness stays off, as nginx has none). Some cases make the origin fail on purpose (it
    closes without an answer, sends a broken head): the upstream's health check must not eject
    its only server for them, as nginx never does with a single server (its max_fails is
    ignored then)."""
    return gw_config(port, [f"127.0.0.1:{origin_port}"], route_extra="cache: true",
                     upstream_extra="health: {fail_threshold: 1000, eject: 1ms}",
                     extra="cache:\n  stale_if_error: 1h\n", log_level="warn")


class H2gateCache:
    def __init__(self, origin_port):
        self.dir = tempfile.mkdtemp(prefix="h2gate-cache-")
        self.port = free_port()
        self.gw = Gateway(self.dir, h2gate_config(self.port, origin_port),
                          wait=[("127.0.0.1", self.port)])

    def stop(self):
        self.gw.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

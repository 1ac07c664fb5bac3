"""Instances that follow a Redis failover by themselves (`cluster.sentinels`): a primary, a
replica (`--replicaof`) and three real sentinels (`redis-server --sentinel`, all on free
loopback ports); the primary is SIGKILLed under load, the sentinels promote the replica, the
instances find it, and a shared limit holds through it (the share rule while they decide
alone). A sentinel that names a replica is refused; with every sentinel down, an instance
serves in local mode and says why. Debian's redis-server, h2load and Python's ssl as clients;
fake_redis.py for the sentinels that lie."""
import os
import re
import socket
import signal
import subprocess
import time

import pytest

from fake_redis import FakeSentinel
from gwtest import sample, scrape, tls_client_ctx, tls_exchange, gw_config
from procs import Redis, free_port, raw_exchange, sanitized, slow, wait_port

MASTER = "h2gate-test"
KEYS = "h2gate:tls:ticket-keys"


class Node(Redis):
    """redis-server on a free loopback port with more arguments (`--replicaof ...`)."""

    def __init__(self, extra=()):
        self.extra = list(extra)
        super().__init__()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--daemonize", "no", *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port("127.0.0.1", self.port, proc=self.proc)

    def info(self, section):
        text = self.cmd("INFO", section).decode()
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


class Sentinel(Redis):
    """`redis-server sentinel.conf --sentinel` watching the primary at port, with the failure
    detection of the test: down after 1 s (down_after ms), a failover given 3 s."""

    def __init__(self, primary_port, down_after=1000):
        self.primary_port = primary_port
        self.down_after = down_after
        super().__init__()

    def start(self):
        conf = os.path.join(self.dir, "sentinel.conf")  # rewritten by the sentinel
        with open(conf, "w") as f:
            f.write(f"port {self.port}\nbind 127.0.0.1\ndaemonize no\ndir {self.dir}\n"
                    f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} 2\n"
                    f"sentinel down-after-milliseconds {MASTER} {self.down_after}\n"
                    f"sentinel failover-timeout {MASTER} 3000\n"
                    f"sentinel parallel-syncs {MASTER} 1\n")
        self.log_path = os.path.join(self.dir, "sentinel.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=self._log,
                                     stderr=subprocess.STDOUT)
        wait_port("127.0.0.1", self.port, proc=self.proc)

    def close(self):
        super().close()
        self._log.close()


class Fleet:
    """A primary, its replica and three sentinels that know both and each other (the primary
    down for them after down_after ms)."""

    def __init__(self, down_after=1000):
        self.primary = Node()
        self.replica = Node(["--replicaof", "127.0.0.1", str(self.primary.port)])
        self.sentinels = []
        try:
            wait_for(lambda: self.replica.info("replication").get("master_link_status") == "up",
                     10, "the replica in sync")
            self.sentinels = [Sentinel(self.primary.port, down_after) for _ in range(3)]
            # a failover needs a majority of sentinels that know each other, and the replica
            for s in self.sentinels:
                wait_for(lambda: len(s.cmd("SENTINEL", "sentinels", MASTER)) == 2 and
                         len(s.cmd("SENTINEL", "replicas", MASTER)) == 1, 15,
                         "the sentinels know each other and the replica")
        except Exception:
            self.close()
            raise

    def addrs(self):
        return ", ".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def close(self):
        for n in [*self.sentinels, self.replica, self.primary]:
            n.close()


def wait_for(pred, timeout=10, what=""):
    """pred() until true, timeout scaled (slow())."""
    deadline = time.monotonic() + slow(timeout)
    while time.monotonic() < deadline:
        try:
            v = pred()
        except (KeyError, AssertionError, OSError, TypeError):
            v = None
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or pred}")


def metric(g, name, **labels):
    return sample(scrape(g.admin)[0], name, **labels)


def primary_of(g):
    """The address h2gate_cluster_primary_info names, or None."""
    for line in scrape(g.admin)[1].splitlines():
        m = re.match(r'h2gate_cluster_primary_info\{address="([^"]+)"\} 1$', line)
        if m:
            return m.group(1)
    return None


def sentinel_gw(gateway, origin, sentinels, route_extra="", cluster_extra="", timeout="500ms"):
    """A gateway in front of origin (cleartext g.port, TLS g.tls_port, admin g.admin) whose
    cluster is what sentinels (HOST:PORT, ...) name for MASTER."""
    port, tls_port, admin = free_port(), free_port(), free_port()
    extra = (f"cluster:\n  sentinels: [{sentinels}]\n  master: {MASTER}\n  timeout: {timeout}\n"
             f"  poll_interval: 200ms\n{cluster_extra}admin: {{address: 127.0.0.1:{admin}}}\n")
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra=route_extra,
                          extra=extra, tls_port=tls_port),
                wait=[("127.0.0.1", port), ("127.0.0.1", tls_port), ("127.0.0.1", admin)])
    g.port, g.tls_port, g.admin = port, tls_port, admin
    return g


def h2load(g, secs, rps_per_client=60, clients=2):
    return subprocess.Popen(["h2load", "-c", str(clients), "-m", "1", "--rps", str(rps_per_client),
                             "-D", str(secs), "--warm-up-time", "0",
                             f"http://127.0.0.1:{g.port}/echo"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def counts(p, secs):
    out = p.communicate(timeout=secs + 60)[0]
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    assert m, out
    assert int(m[2]) == 0 and int(m[4]) == 0, out
    return int(m[1]), int(m[3])


def log_time(line):
    m = re.match(r"ts=(\S+)Z ", line)
    return time.mktime(time.strptime(m.group(1)[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + \
        float("0" + m.group(1)[19:])


def test_two_instances_follow_a_failover_and_hold_the_limit(gateway, origin):
    """request_rate 100/s (burst 10) on two instances, loaded at 240 requests/s in all for
    15 s; the primary SIGKILLed 4 s in. The sentinels promote the replica; both instances
    follow (event=cluster_failover, h2gate_cluster_primary_info, failovers 1) and decide alone
    for half the limit each meanwhile: the 15-second total stays within 1,500 +- 15 %. The
    promoted replica held the rate keys, the heartbeat set and the ticket keys; a TLS session
    made before the failover, and one made after it, resume on the other instance."""
    if sanitized():  # counts over seconds of load, as test_cluster.py's: the plain build's
        # (CI time); the ASan run follows a failover in test_a_silent_sentinel_is_left_...
        pytest.skip("a measurement of the plain build; the ASan run covers these paths")
    fleet = Fleet()
    try:
        gws = [sentinel_gw(gateway, origin, fleet.addrs(), "request_rate: 100\nrequest_burst: 10")
               for _ in range(2)]
        p, r = f"127.0.0.1:{fleet.primary.port}", f"127.0.0.1:{fleet.replica.port}"
        for g in gws:
            wait_for(lambda: primary_of(g) == p and metric(g, "h2gate_cluster_up") == 1 and
                     metric(g, "h2gate_cluster_instances") == 2 and
                     metric(g, "h2gate_cluster_ticket_key_updates_total") >= 1, 10,
                     "the instances on the primary")
            assert re.search(rf"event=cluster_primary redis={p} sentinel=127\.0\.0\.1:\d+ "
                             rf"master={MASTER}\n", g.log()), g.log()[-2000:]
        ctx = tls_client_ctx()
        before, _ = tls_exchange(ctx, gws[0].tls_port)
        local0 = [metric(g, "h2gate_cluster_local_mode_seconds_total") for g in gws]
        secs = 15
        started = time.monotonic()
        loads = [h2load(g, secs) for g in gws]
        # the replica has what the instances wrote under the load (replicated from the
        # primary): waited for, as a loaded machine may start h2load or replicate late; then
        # the kill comes 4 s into the load, the shared decisions having run that long
        keys = fleet.primary.cmd("GET", KEYS)
        assert keys
        wait_for(lambda: fleet.replica.cmd("KEYS", "h2gate:rate:*") and
                 fleet.replica.cmd("ZCARD", "h2gate:instances") == 2 and
                 fleet.replica.cmd("GET", KEYS) == keys, 10, "the load's keys on the replica")
        time.sleep(max(0.0, started + 4 - time.monotonic()))
        killed_at = time.time()
        fleet.primary.proc.kill()
        fleet.primary.proc.wait()
        results = [counts(lp, secs) for lp in loads]
        ok = sum(o for o, _ in results)
        limited = sum(lim for _, lim in results)
        windows = [metric(g, "h2gate_cluster_local_mode_seconds_total") - l0
                   for g, l0 in zip(gws, local0)]
        followed = []
        for g in gws:
            line = re.search(rf"^.*event=cluster_primary redis={r} .*$", g.log(), re.M)
            assert line, g.log()[-3000:]
            followed.append(log_time(line.group(0)) - killed_at)
        expect = 10 + 100 * secs
        print(f"\ntwo instances, request_rate 100/s for {secs} s, primary killed at 4 s: {ok} "
              f"2xx (expected {expect}), {limited} 429; local mode "
              f"{', '.join(f'{w:.2f}' for w in windows)} s; new primary taken "
              f"{', '.join(f'{f:.2f}' for f in followed)} s after the kill")
        assert expect * 0.85 <= ok <= expect * 1.15, (ok, limited)
        for g in gws:
            assert primary_of(g) == r
            assert metric(g, "h2gate_cluster_failovers_total") == 1
            assert metric(g, "h2gate_cluster_up") == 1
            assert re.search(rf"event=cluster_failover from={p} to={r} master={MASTER}\n",
                             g.log()), g.log()[-3000:]
            assert "event=cluster_degraded" in g.log()
            # shared decisions again after the failover
            assert metric(g, "h2gate_cluster_rate_decisions_total", verdict="allowed") > 0
        assert all(0.5 < w < 12 for w in windows), windows
        # the replica is the primary now, with the keys the instances use
        assert fleet.replica.cmd("ROLE")[0] == b"master"
        assert fleet.replica.cmd("GET", KEYS) == keys
        _, reused = tls_exchange(ctx, gws[1].tls_port, before)
        assert reused, "a session made before the failover did not resume"
        after, _ = tls_exchange(ctx, gws[1].tls_port)
        _, reused = tls_exchange(ctx, gws[0].tls_port, after)
        assert reused, "a session made after the failover did not resume"
    finally:
        fleet.close()


def test_a_sentinel_that_names_a_replica_is_refused(gateway, origin):
    """The first sentinel names the replica (it lies, or is behind): ROLE says slave, the
    address is refused and said so, and the next sentinel's answer, the primary, is taken."""
    primary = Node()
    replica = Node(["--replicaof", "127.0.0.1", str(primary.port)])
    liar = FakeSentinel(("127.0.0.1", replica.port))
    honest = FakeSentinel(("127.0.0.1", primary.port))
    try:
        g = sentinel_gw(gateway, origin, f"127.0.0.1:{liar.port}, 127.0.0.1:{honest.port}")
        p = f"127.0.0.1:{primary.port}"
        wait_for(lambda: primary_of(g) == p and metric(g, "h2gate_cluster_up") == 1, 10,
                 "the primary taken")
        log = g.log()
        assert re.search(rf'event=cluster_primary_refused redis=127\.0\.0\.1:{replica.port} '
                         rf'sentinel=127\.0\.0\.1:{liar.port} master={MASTER} '
                         r'reason="ROLE: slave, not the primary"', log), log[-3000:]
        assert re.search(rf'event=sentinel_failed sentinel=127\.0\.0\.1:{liar.port} '
                         rf'master={MASTER} reason="named 127\.0\.0\.1:{replica.port}: ROLE: '
                         r'slave, not the primary"', log), log[-3000:]
        assert re.search(rf"event=cluster_primary redis={p} sentinel=127\.0\.0\.1:{honest.port} ",
                         log), log[-3000:]
        assert metric(g, "h2gate_cluster_failovers_total") == 0
        # the instance's writes went to the primary, none to the replica's address
        wait_for(lambda: primary.cmd("GET", KEYS) is not None, 5, "the keys on the primary")
        assert [c[:2] for c in liar.commands] == [[b"SENTINEL", b"master"]]
        assert b"SUBSCRIBE" in honest.names()
    finally:
        for x in (liar, honest):
            x.close()
        for n in (replica, primary):
            n.close()


def test_a_stale_sentinel_naming_a_restarted_old_primary_is_outvoted(gateway, origin):
    """Two Redis that both say "master" in ROLE: the old primary, restarted alone after a
    failover it missed, and the one promoted. The first sentinel (partitioned during the
    failover) still names the old one, at config-epoch 1; the second names the new one at
    config-epoch 2. The instance takes the configuration of the greater epoch, as Sentinel
    itself does, says the first sentinel is behind, and writes nothing to the old primary."""
    old, new = Node(), Node()
    stale = FakeSentinel(("127.0.0.1", old.port), epoch=1)
    current = FakeSentinel(("127.0.0.1", new.port), epoch=2)
    try:
        assert old.cmd("ROLE")[0] == b"master" and new.cmd("ROLE")[0] == b"master"
        g = sentinel_gw(gateway, origin, f"127.0.0.1:{stale.port}, 127.0.0.1:{current.port}")
        pn = f"127.0.0.1:{new.port}"
        wait_for(lambda: primary_of(g) == pn and metric(g, "h2gate_cluster_up") == 1, 10,
                 "the new primary taken")
        wait_for(lambda: new.cmd("GET", KEYS) is not None, 5, "the keys on the new primary")
        time.sleep(0.5)  # polls and heartbeats: all to the new primary
        log = g.log()
        assert re.search(rf"event=cluster_primary redis={pn} sentinel=127\.0\.0\.1:"
                         rf"{current.port} master={MASTER}\n", log), log[-3000:]
        assert re.search(rf'event=sentinel_failed sentinel=127\.0\.0\.1:{stale.port} '
                         rf'master={MASTER} reason="behind: names 127\.0\.0\.1:{old.port} of '
                         r'config-epoch 1, not 2"', log), log[-3000:]
        assert f"redis=127.0.0.1:{old.port}" not in log, log[-3000:]
        assert old.cmd("DBSIZE") == 0, old.cmd("KEYS", "*")
        assert metric(g, "h2gate_cluster_failovers_total") == 0
        assert b"SUBSCRIBE" in current.names() and b"SUBSCRIBE" not in stale.names()
    finally:
        for x in (stale, current):
            x.close()
        for n in (old, new):
            n.close()


def test_a_black_holed_sentinel_does_not_hold_the_round(gateway, origin):
    """Three sentinels, the first black-holed (its kernel takes the connection, nothing ever
    answers: a host gone without a reset behind a proxy, or a process stopped). The other two,
    a majority, name the primary: it is taken at once, not after the black hole's 5 s timeout,
    and the first sentinel is not waited for."""
    primary = Node()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(8)  # accepted by the kernel, never read
    a = FakeSentinel(("127.0.0.1", primary.port), epoch=3)
    b = FakeSentinel(("127.0.0.1", primary.port), epoch=3)
    try:
        t0 = time.monotonic()
        g = sentinel_gw(gateway, origin, f"127.0.0.1:{hole.getsockname()[1]}, "
                        f"127.0.0.1:{a.port}, 127.0.0.1:{b.port}", timeout="5s")
        pn = f"127.0.0.1:{primary.port}"
        wait_for(lambda: primary_of(g) == pn and metric(g, "h2gate_cluster_up") == 1, 10,
                 "the primary taken")
        took = time.monotonic() - t0
        # the gateway's start is in it; the black hole's timeout alone would be 5 s
        assert took < 4.0, f"{took:.2f} s: the round waited for the black-holed sentinel"
    finally:
        for x in (a, b):
            x.close()
        hole.close()
        primary.close()


def test_a_demoted_primary_answering_readonly_is_left(gateway, origin):
    """The primary taken becomes a replica (REPLICAOF, as after a failover it slept through):
    its next write answers READONLY, the instance lets it go, asks the sentinel again and takes
    the primary it names now (a failover, counted)."""
    a, b = Node(), Node()
    sentinel = FakeSentinel(("127.0.0.1", a.port))
    try:
        g = sentinel_gw(gateway, origin, f"127.0.0.1:{sentinel.port}")
        pa, pb = f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"
        wait_for(lambda: primary_of(g) == pa and metric(g, "h2gate_cluster_up") == 1, 10,
                 "a taken")
        sentinel.named = ("127.0.0.1", b.port)
        assert a.cmd("REPLICAOF", "127.0.0.1", b.port) == b"OK"
        wait_for(lambda: primary_of(g) == pb, 10, "b taken")
        log = g.log()
        assert re.search(r'event=cluster_degraded redis=\S+ reason="[^"]*READONLY', log), \
            log[-3000:]
        assert re.search(rf"event=cluster_failover from={pa} to={pb} master={MASTER}\n", log), \
            log[-3000:]
        assert metric(g, "h2gate_cluster_failovers_total") == 1
        wait_for(lambda: b.cmd("GET", KEYS) is not None, 5, "the keys on b")
    finally:
        sentinel.close()
        for n in (a, b):
            n.close()


def test_every_sentinel_down_serves_in_local_mode_and_says_why(gateway, origin):
    """Two sentinels that refuse connections and one that does not know the master: requests
    are served, decided locally (the local bucket: burst 3, then 2/s), one degraded line says
    why, each sentinel's failure is logged once, and the rounds go on with a backoff."""
    dead = [free_port(), free_port()]
    unknowing = FakeSentinel(None)
    try:
        addrs = ", ".join([f"127.0.0.1:{d}" for d in dead] + [f"127.0.0.1:{unknowing.port}"])
        g = sentinel_gw(gateway, origin, addrs, "request_rate: 2\nrequest_burst: 3")
        g.wait_log("event=cluster_degraded", timeout=10)
        codes = [int(raw_exchange(g.port, b"GET /echo HTTP/1.1\r\nHost: a\r\nConnection: close"
                                  b"\r\n\r\n").split()[1]) for _ in range(5)]
        assert codes[:3] == [200] * 3 and 429 in codes[3:], codes
        time.sleep(1.5)  # a few rounds
        log = g.log()
        assert re.search(r'event=cluster_degraded redis=- reason="no primary from the sentinels '
                         rf'\(last: sentinel 127\.0\.0\.1:{unknowing.port}: does not know this '
                         r'master\)" ticket_keys=local', log), log[-3000:]
        for d in dead:
            assert len(re.findall(rf'event=sentinel_failed sentinel=127\.0\.0\.1:{d} '
                                  rf'master={MASTER} reason="connection: [^"]*refused"', log)) == 1, \
                log[-3000:]
        assert log.count(f"event=sentinel_failed sentinel=127.0.0.1:{unknowing.port}") == 1
        assert log.count("event=cluster_degraded") == 1
        asked = unknowing.names().count(b"SENTINEL")
        assert 2 <= asked <= 15, asked  # rounds after 100, 200, 400, 800 ms ...
        assert metric(g, "h2gate_cluster_up") == 0
        assert metric(g, "h2gate_cluster_local_mode_seconds_total") >= 1
        assert metric(g, "h2gate_cluster_rate_decisions_total", verdict="local") >= 5
        assert primary_of(g) is None
    finally:
        unknowing.close()


def test_a_silent_sentinel_is_left_and_a_failover_still_followed(gateway, origin):
    """The sentinel holding the subscription stops answering without closing (SIGSTOP: its
    kernel keeps the connection and accepts new ones). The subscription's PING goes unanswered:
    within poll_interval + timeout (and a tick) the sentinel is said silent, another is asked
    and subscribed to; a manual failover (SENTINEL FAILOVER on a live sentinel) then reaches
    the instance as +switch-master from that other sentinel, not from a failed write."""
    fleet = Fleet()
    stopped = None
    try:
        g = sentinel_gw(gateway, origin, fleet.addrs())
        p, r = f"127.0.0.1:{fleet.primary.port}", f"127.0.0.1:{fleet.replica.port}"
        wait_for(lambda: primary_of(g) == p and metric(g, "h2gate_cluster_up") == 1, 10,
                 "the primary taken")
        port = int(re.search(r"event=cluster_primary redis=\S+ sentinel=127\.0\.0\.1:(\d+) ",
                             g.log()).group(1))
        stopped = next(s for s in fleet.sentinels if s.port == port)
        time.sleep(0.5)  # PINGs answered meanwhile: not silent
        assert "event=sentinel_silent" not in g.log(), g.log()[-2000:]
        stopped.proc.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        silent = f"event=sentinel_silent sentinel=127.0.0.1:{port} master={MASTER} silent_ms=700"
        log = g.wait_log(silent, timeout=5)
        took = time.monotonic() - t0
        assert silent in log, log[-3000:]
        # poll_interval 200 ms + timeout 500 ms, found at the next tick (the margin scaled for
        # the ASan build: a fixed 1.5 s was not; a sentinel never left times the wait out)
        assert took < 0.7 + slow(0.8), took
        others = [s for s in fleet.sentinels if s is not stopped]
        wait_for(lambda: any(any(b"sub=1" in c for c in s.cmd("CLIENT", "LIST").split(b"\n"))
                             for s in others), 5, "subscribed to another sentinel")
        assert primary_of(g) == p and metric(g, "h2gate_cluster_failovers_total") == 0
        # a failover of the sentinels that are left (the stopped one cannot vote, nor is needed)
        assert others[0].cmd("SENTINEL", "FAILOVER", MASTER) == b"OK"
        wait_for(lambda: primary_of(g) == r, 20, "the new primary taken")
        log = g.log()
        print(f"\nsilent sentinel left after {took:.2f} s")
        assert re.search(rf"event=sentinel_switch sentinel=127\.0\.0\.1:(?!{port} )\d+ "
                         rf"master={MASTER} from={p} to={r}\n", log), log[-3000:]
        assert metric(g, "h2gate_cluster_failovers_total") == 1
    finally:
        if stopped:
            stopped.proc.send_signal(signal.SIGCONT)
        fleet.close()


def test_a_silent_primary_is_left_and_the_sentinels_asked_again(gateway, origin):
    """The primary stops answering without closing (SIGSTOP: its kernel keeps the connection
    and accepts new ones), the sentinels slow to call it down (down-after 10 s: no failover
    here). Within ping_interval + timeout (200 ms + 2 s) of its last answer the instance drops
    it (event=cluster_primary_silent) and decides alone at once; the sentinels are asked again,
    still name it, and its check is refused (nothing answers within connect_timeout), round
    after round. SIGCONT: a round takes it again (the same primary, no failover), decisions are
    shared again. (The timeout is 2 s so that a request decided at once, a fraction of a second
    even against the ASan build on a loaded machine, is told from one that waited for Redis:
    with 500 ms, a fixed 0.3 s bound told them apart.)"""
    fleet = Fleet(down_after=10000)
    stopped = False
    try:
        g = sentinel_gw(gateway, origin, fleet.addrs(), "request_rate: 100\nrequest_burst: 100",
                        cluster_extra="  connect_timeout: 300ms\n", timeout="2s")
        p = f"127.0.0.1:{fleet.primary.port}"
        wait_for(lambda: primary_of(g) == p and metric(g, "h2gate_cluster_up") == 1 and
                 metric(g, "h2gate_cluster_calls_total", result="ok") >= 3, 10,
                 "the primary taken, its scripts loaded")
        taken = f"event=cluster_primary redis={p} "

        def request():
            t = time.monotonic()
            resp = raw_exchange(g.port, b"GET /echo HTTP/1.1\r\nHost: a\r\n"
                                b"Connection: close\r\n\r\n", timeout=10)
            return resp.split(b" ", 2)[1], time.monotonic() - t

        assert request()[0] == b"200"
        assert metric(g, "h2gate_cluster_rate_decisions_total", verdict="allowed") == 1
        assert g.log().count(taken) == 1
        fleet.primary.proc.send_signal(signal.SIGSTOP)
        stopped = True
        t0 = time.monotonic()
        log = g.wait_log("event=cluster_primary_silent", timeout=5)
        took = time.monotonic() - t0
        assert re.search(rf"event=cluster_primary_silent redis={p} master={MASTER} "
                         r"silent_ms=\d+ limit_ms=2200\n", log), log[-3000:]
        assert took < 2.2 + slow(0.4), took  # and a tick (the margin scaled for ASan)
        assert metric(g, "h2gate_cluster_primary_silent_total") == 1
        # alone at once, for the share of the limit
        local = metric(g, "h2gate_cluster_rate_decisions_total", verdict="local")
        code, spent = request()
        assert code == b"200" and spent < min(slow(0.3), 1.0), (code, spent)  # not 2 s
        assert metric(g, "h2gate_cluster_rate_decisions_total", verdict="local") == local + 1
        # asked again: named again, and refused (unanswered)
        log = g.wait_log(f'reason="named {p}: connection: connect timed out"', timeout=5)
        assert re.search(rf'event=sentinel_failed sentinel=\S+ master={MASTER} '
                         rf'reason="named {p}: connection: connect timed out"', log), log[-3000:]
        assert metric(g, "h2gate_cluster_up") == 0
        fleet.primary.proc.send_signal(signal.SIGCONT)
        stopped = False
        t1 = time.monotonic()
        wait_for(lambda: g.log().count(taken) == 2 and metric(g, "h2gate_cluster_up") == 1, 10,
                 "the primary taken again")
        back = time.monotonic() - t1
        wait_for(lambda: request()[0] == b"200" and metric(
            g, "h2gate_cluster_rate_decisions_total", verdict="allowed") >= 2, 5, "shared again")
        assert primary_of(g) == p and metric(g, "h2gate_cluster_failovers_total") == 0
        print(f"\nsilent primary left after {took:.2f} s, taken again {back:.2f} s after SIGCONT")
    finally:
        if stopped:
            fleet.primary.proc.send_signal(signal.SIGCONT)
        fleet.close()

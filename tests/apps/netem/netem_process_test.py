#!/usr/bin/env python3
"""tern-netem as a process, between this script's UDP clients and server on loopback.

  netem_process_test.py --netem PATH CASE [--enet-server PATH --enet-ping PATH]

Each CASE starts tern-netem with --stats-json, sends seeded, numbered datagrams through it and
compares what arrived with what was sent and with the proxy's own counters. A run is complete
when the counters (rewritten every second) say every datagram came in and nothing is still
queued, and every datagram the proxy sent out has been read: a condition, polled under a
generous deadline that only a hang reaches. Exit 0 when the case holds, 1 otherwise.
"""

import argparse
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 60
HEADER = struct.Struct("<QQ")  # sequence number, send time (ns, monotonic)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def big_buffers(sock):
    for opt in (SO_RCVBUFFORCE, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, 32 << 20)
            return
        except OSError:
            continue


def udp_socket(bind=("127.0.0.1", 0)):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    big_buffers(s)
    s.bind(bind)
    s.setblocking(False)
    return s


def drain(sock, out, limit=100000):
    """Reads every datagram waiting on `sock` into `out` as (bytes, source, receive time)."""
    n = 0
    while n < limit:
        try:
            data, src = sock.recvfrom(65536)
        except BlockingIOError:
            return n
        out.append((data, src, time.monotonic_ns()))
        n += 1
    return n


class Netem:
    def __init__(self, exe, args):
        self.dir = tempfile.mkdtemp(prefix="netem-test-")
        self.stats_path = os.path.join(self.dir, "stats.json")
        cmd = [exe, "--listen", "127.0.0.1:0", "--stats-json", self.stats_path, "--quiet"] + args
        print("run:", " ".join(cmd), flush=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"listening 127\.0\.0\.1:(\d+) upstream", line)
        if not m:
            self.proc.kill()
            raise SystemExit(f"tern-netem did not start: {line!r} {self.proc.stderr.read()}")
        self.address = ("127.0.0.1", int(m.group(1)))

    def stats(self):
        try:
            with open(self.stats_path) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def stop(self):
        """SIGTERM; returns the final counters (the file is rewritten at exit)."""
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=10)
        assert self.proc.returncode == 0, (self.proc.returncode, err)
        assert "netem done" in out, out
        return self.stats()


def settle(netem, sent_up, up_got, down_got, drain_all, sockets, echoed=lambda: 0):
    """Drains (`drain_all()`) until the proxy has taken all `sent_up` datagrams and the
    `echoed()` answers of the server, holds nothing, and every datagram it sent each way has
    been read (`up_got`, `down_got`): all on one snapshot of its counters. Loopback delivers on
    send, so a datagram the kernel dropped for a full buffer shows here as a hang."""
    end = time.monotonic() + DEADLINE_S
    st = None
    while time.monotonic() < end:
        drain_all()
        st = netem.stats()
        if (st and st["up"]["in"] == sent_up and st["down"]["in"] == echoed()
                and st["up"]["queued"] == 0 and st["down"]["queued"] == 0
                and len(up_got) == st["up"]["out"] and len(down_got) == st["down"]["out"]):
            return st
        # Woken by the next datagram, so arrival times stay close to the proxy's send times.
        select.select(sockets, [], [], 0.02)
    raise SystemExit(f"timed out waiting for every datagram through tern-netem (hang or a "
                     f"kernel drop): sent {sent_up}, echoed {echoed()}, read {len(up_got)} up "
                     f"and {len(down_got)} down, counters {st}")


def stream(netem_exe, args, n, size=64, sizes=None, echo=False, pace=256, interval_s=0.0):
    """Sends n numbered datagrams from one client through a proxy with `args`; returns
    (received at the server [(seq, delay_ns, bytes)], received at the client, counters)."""
    server = udp_socket()
    client = udp_socket()
    netem = Netem(netem_exe, ["--upstream", f"127.0.0.1:{server.getsockname()[1]}"] + args)
    got_server, got_client = [], []
    echoed = [0]

    def do_echo():
        while echoed[0] < len(got_server):
            data, src, _ = got_server[echoed[0]]
            server.sendto(data, src)
            echoed[0] += 1

    try:
        for seq in range(n):
            length = sizes[seq % len(sizes)] if sizes else size
            payload = HEADER.pack(seq, time.monotonic_ns())
            client.sendto(payload + b"x" * (length - len(payload)), netem.address)
            if interval_s:
                # Paced: read as datagrams arrive, so the arrival times measure the proxy, not
                # this loop's lateness.
                until = time.monotonic() + interval_s
                while True:
                    drain(server, got_server)
                    drain(client, got_client)
                    if echo:
                        do_echo()
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    select.select([server, client], [], [], left)
            elif seq % pace == pace - 1:
                drain(server, got_server)
                drain(client, got_client)
                if echo:
                    do_echo()
        def drain_all():
            drain(server, got_server)
            drain(client, got_client)
            if echo:
                do_echo()

        st = settle(netem, n, got_server, got_client, drain_all, [server, client],
                    echoed=lambda: echoed[0])
        final = netem.stop()
    finally:
        netem.close()
        server.close()
        client.close()
    assert final["up"]["in"] == st["up"]["in"], (final, st)
    check_balance(st)
    check_balance(final)

    def decode(items):
        # (sequence number, one-way or round-trip time, length, arrival time)
        return [(HEADER.unpack_from(d)[0], t - HEADER.unpack_from(d)[1], len(d), t)
                for d, _, t in items]

    return decode(got_server), decode(got_client), final


cleanup = []


def check_balance(st):
    """Every datagram the proxy took is sent, dropped for a named reason, or still held."""
    for d in ("up", "down"):
        k = st[d]
        drops = sum(k[r] for r in ("drop_mtu", "drop_loss", "drop_queue", "drop_oversize",
                                   "drop_pool", "drop_send"))
        assert k["out"] == k["in"] - drops + k["duplicated"] - k["queued"], (d, k)


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        raise SystemExit(1)


def inversions(seqs):
    return sum(1 for a, b in zip(seqs, seqs[1:]) if b < a)


# ---- cases ----------------------------------------------------------------------------------


def case_loss(exe, _):
    n = 20000
    got, _, st = stream(exe, ["--up-loss", "5%", "--seed", "7", "--pool", "30000",
                              "--queue", "30000"], n)
    up = st["up"]
    lost = n - len(got)
    check(up["out"] == len(got), f"the server got every datagram the proxy sent ({len(got)})")
    check(up["drop_loss"] == lost, f"the proxy counted each loss ({up['drop_loss']} == {lost})")
    check(0.04 <= lost / n <= 0.06, f"loss {lost / n:.4f} within 4%..6%")
    check(len(set(g[0] for g in got)) == len(got), "no duplicates")
    check(st["down"]["in"] == 0 and up["drop_queue"] == 0 and up["drop_pool"] == 0,
          "nothing else dropped")


def case_ge(exe, _):
    n = 20000
    got, _, st = stream(exe, ["--up-ge", "1%,25%", "--seed", "11", "--pool", "30000",
                              "--queue", "30000"], n)
    seen = set(g[0] for g in got)
    lost = [s not in seen for s in range(n)]
    bursts = sum(1 for i in range(n) if lost[i] and (i == 0 or not lost[i - 1]))
    total = sum(lost)
    check(bursts > 50, f"{bursts} loss bursts")
    check(st["up"]["loss_bursts"] == bursts and st["up"]["drop_loss"] == total,
          "the proxy's burst and loss counters match what went missing")
    mean = total / bursts
    check(3.2 <= mean <= 4.8, f"mean burst length {mean:.2f} near 1/r = 4")
    check(0.025 <= total / n <= 0.055, f"loss {total / n:.4f} near p/(p+r) = 3.85%")


def case_delay(exe, _):
    n = 2000
    got, back, st = stream(exe, ["--up-delay", "20ms", "--up-jitter", "5ms", "--down-delay",
                                 "10ms", "--seed", "3"], n, echo=True, interval_s=0.0005)
    check(len(got) == n and len(back) == n, f"all {n} arrived and came back")
    one_way = sorted(g[1] for g in got)
    rtt = sorted(b[1] for b in back)
    check(one_way[0] >= 15_000_000, f"every one-way delay >= delay - jitter (min {one_way[0] / 1e6:.2f} ms)")
    check(rtt[0] >= 25_000_000, f"every round trip >= 15 + 10 ms (min {rtt[0] / 1e6:.2f} ms)")
    med = one_way[n // 2] / 1e6
    check(19 <= med <= 40, f"median one-way delay {med:.2f} ms near 20 ms")
    check(inversions([g[0] for g in got]) == 0, "jitter kept the order (jitter-reorder off)")


def case_reorder(exe, _):
    n = 5000
    got, _, st = stream(exe, ["--up-delay", "10ms", "--up-reorder", "20%", "--seed", "5",
                              "--queue", "10000"], n, pace=100)
    seqs = [g[0] for g in got]
    check(len(got) == n, "all arrived")
    r = st["up"]["reordered"]
    check(0.16 <= r / n <= 0.24, f"{r} of {n} sent without the delay (20%)")
    check(inversions(seqs) > 0, f"{inversions(seqs)} arrived before an earlier one")
    got2, _, st2 = stream(exe, ["--up-delay", "5ms", "--up-jitter", "4ms", "--up-jitter-reorder",
                                "on", "--seed", "5", "--queue", "10000"], n, pace=100)
    check(inversions([g[0] for g in got2]) > 0, "jitter-reorder on: jitter reorders")
    check(st2["up"]["reordered"] == 0, "no datagram counted as reordered by --reorder")


def case_dup(exe, _):
    n = 20000
    got, _, st = stream(exe, ["--up-dup", "10%", "--seed", "9", "--pool", "30000",
                              "--queue", "30000"], n)
    d = st["up"]["duplicated"]
    seqs = [g[0] for g in got]
    twice = len(seqs) - len(set(seqs))
    check(len(set(seqs)) == n, "every datagram arrived")
    check(twice == d, f"{twice} arrived twice, the proxy counted {d}")
    check(0.08 <= d / n <= 0.12, f"duplication {d / n:.4f} near 10%")


def case_rate(exe, _):
    n, size, rate = 200, 1000, 100000  # 10 ms a datagram on the link: the burst outruns it
    got, _, st = stream(exe, ["--up-rate", str(rate), "--up-queue", "50", "--seed", "1"], n,
                        size=size, pace=1)
    up = st["up"]
    check(up["queued_peak"] <= 50, f"queue peak {up['queued_peak']} within its bound 50")
    check(up["drop_queue"] > 0, f"{up['drop_queue']} tail drops counted")
    check(len(got) + up["drop_queue"] == n, "every datagram arrived or was tail-dropped")
    check(inversions([g[0] for g in got]) == 0, "in order")
    # The link never runs faster than its rate: the arrivals span at least the serialisation
    # time of all but the first (a lower bound, like the delay's), less one datagram's for a
    # first arrival read late.
    span = got[-1][3] - got[0][3]
    floor = (len(got) - 2) * size * 1e9 / rate
    check(span >= floor, f"{len(got)} datagrams over {span / 1e6:.1f} ms >= {floor / 1e6:.1f} ms at {rate} B/s")


def case_mtu(exe, _):
    sizes = [400, 500, 501, 1200, 64]
    n = 1000
    got, back, st = stream(exe, ["--mtu", "500", "--seed", "1"], n, sizes=sizes, echo=True)
    big = sum(1 for i in range(n) if sizes[i % len(sizes)] > 500)
    check(st["up"]["drop_mtu"] == big, f"exactly the {big} datagrams over 500 bytes dropped")
    check(len(got) == n - big and all(g[2] <= 500 for g in got), "the rest arrived")
    check(len(back) == n - big and st["down"]["drop_mtu"] == 0, "and came back")


def case_seed(exe, _):
    n = 5000
    args = ["--loss", "10%", "--dup", "5%", "--queue", "10000", "--pool", "20000"]
    runs = []
    for seed in ("42", "42", "43"):
        got, back, st = stream(exe, args + ["--seed", seed], n, echo=True)
        runs.append((sorted(g[0] for g in got), sorted(b[0] for b in back)))
    check(runs[0] == runs[1], "seed 42 twice: the same datagrams lost and duplicated, both ways")
    check(runs[0] != runs[2], "seed 43: a different pattern")


def case_flows(exe, _):
    clients = 2000
    # A socket per client here and in the proxy: both need the descriptors.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < clients + 100:
        print(f"RLIMIT_NOFILE hard limit {hard} < {clients + 100}: skipped")
        return 77
    server = udp_socket()
    netem = Netem(exe, ["--upstream", f"127.0.0.1:{server.getsockname()[1]}",
                        "--max-flows", str(clients)])
    socks = [udp_socket() for _ in range(clients)]
    got_server, replies = [], [[] for _ in range(clients)]
    sources = {}
    try:
        for i, s in enumerate(socks):
            s.sendto(struct.pack("<I", i), netem.address)
        end = time.monotonic() + DEADLINE_S
        done = 0
        while done < clients and time.monotonic() < end:
            drain(server, got_server)
            for data, src, _ in got_server[len(sources):]:
                sources[struct.unpack("<I", data)[0]] = src
                server.sendto(data, src)
            done = 0
            for i, s in enumerate(socks):
                if not replies[i]:
                    drain(s, replies[i])
                done += bool(replies[i])
            time.sleep(0.01)
        # One more client than flows allowed: refused and counted.
        extra = udp_socket()
        extra.sendto(b"late", netem.address)
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            st = netem.stats()
            if st and st["flows_refused"] == 1:
                break
            time.sleep(0.02)
        st = netem.stop()
    finally:
        netem.close()
    check(len(sources) == clients, f"the server heard {len(sources)} of {clients} clients")
    check(len(set(sources.values())) == clients, "each from its own upstream source")
    check(all(len(r) == 1 and struct.unpack("<I", r[0][0])[0] == i for i, r in enumerate(replies)),
          "every client got its own reply back")
    check(st["flows_created"] == clients and st["flows_active"] == clients, "one flow per client")
    check(st["flows_refused"] == 1, "the client past --max-flows was refused and counted")
    check_balance(st)


def wait_for(netem, cond, what, poke=lambda: None):
    """Polls the proxy's counters until cond(stats) holds; a deadline only a hang reaches."""
    end = time.monotonic() + DEADLINE_S
    st = None
    while time.monotonic() < end:
        poke()
        st = netem.stats()
        if st and cond(st):
            return st
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}: {st}")


def first_contact(netem, server, client):
    """One datagram through the proxy; returns the flow's upstream source as the server sees it."""
    client.sendto(b"hello", netem.address)
    got = []
    end = time.monotonic() + DEADLINE_S
    while not got and time.monotonic() < end:
        select.select([server], [], [], 0.1)
        drain(server, got)
    check(bool(got), "the first datagram went through")
    return got[0][1]


def case_kernel(exe, _):
    """Datagrams lost in the proxy's full receive buffer are counted as such, not hidden."""
    server, client = udp_socket(), udp_socket()
    netem = Netem(exe, ["--upstream", f"127.0.0.1:{server.getsockname()[1]}"])
    sink = []
    try:
        src = first_contact(netem, server, client)
        burst = 20000
        os.kill(netem.proc.pid, signal.SIGSTOP)  # nothing reads the flow's socket meanwhile
        for _ in range(burst):
            server.sendto(b"y" * 64, src)
        os.kill(netem.proc.pid, signal.SIGCONT)
        # The kernel reports a socket's drops with the datagrams queued after them: a marker
        # after each snapshot of the counters (one a second) carries the count once the
        # backlog is read, and is read itself before the next snapshot.
        markers, seen, st = 0, None, None
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            drain(client, sink)
            st = netem.stats()
            if st and st["elapsed_s"] != seen:
                seen = st["elapsed_s"]
                if st["down"]["in"] + st["down"]["drop_kernel"] == burst + markers:
                    break
                server.sendto(b"marker", src)
                markers += 1
            time.sleep(0.05)
        final = netem.stop()
    finally:
        netem.close()
    check(st["down"]["drop_kernel"] > 0, f"{st['down']['drop_kernel']} of {burst} counted as kernel drops")
    check(st["down"]["in"] + st["down"]["drop_kernel"] == burst + markers,
          "every datagram the server sent was read or counted")
    check(final["down"]["drop_kernel"] == st["down"]["drop_kernel"], "and no more dropped")


def case_expire(exe, _):
    """Idle flows are closed (their sockets too) and a returning client gets a new one."""
    server, client = udp_socket(), udp_socket()
    netem = Netem(exe, ["--upstream", f"127.0.0.1:{server.getsockname()[1]}", "--idle-timeout",
                        "300ms"])
    try:
        first = first_contact(netem, server, client)
        wait_for(netem, lambda st: st["flows_expired"] == 1 and st["flows_active"] == 0,
                 "the idle flow to expire")
        second = first_contact(netem, server, client)
        st = wait_for(netem, lambda st: st["flows_created"] == 2, "a second flow")
        netem.stop()
    finally:
        netem.close()
    check(st["flows_active"] == 1, "the returning client has a flow again")
    check(first != second, f"from a new upstream socket ({first[1]} then {second[1]})")


def case_ipv6(exe, _):
    """A dual-stack listener ("*:0") in front of an IPv6 server, IPv4 and IPv6 clients."""
    try:
        server = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        server.bind(("::1", 0))
    except OSError as e:
        print(f"no IPv6 loopback here ({e}): skipped")
        return 77
    server.settimeout(DEADLINE_S)
    cmd = [exe, "--listen", "*:0", "--upstream", f"[::1]:{server.getsockname()[1]}", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        m = re.match(r"listening \[::\]:(\d+) upstream \[::1\]:", proc.stdout.readline())
        check(m is not None, "listening on [::]")
        port = int(m.group(1))
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family, socket.SOCK_DGRAM) as c:
                c.settimeout(DEADLINE_S)
                c.sendto(b"hello", (host, port))
                data, src = server.recvfrom(100)
                server.sendto(b"back " + data, src)
                check(c.recvfrom(100)[0] == b"back hello", f"a client on {host} gets its answer")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=DEADLINE_S)
        check(proc.returncode == 0 and "flows_created=2" in out, "two flows")
    finally:
        if proc.poll() is None:
            proc.kill()
    return 0


def case_reload(exe, _):
    """SIGHUP replaces the impairments with the file's new ones; a bad file keeps the old."""
    d = tempfile.mkdtemp(prefix="netem-reload-")
    cleanup.append(d)
    cfg = os.path.join(d, "netem.toml")

    def write(text):
        with open(cfg + ".new", "w") as f:
            f.write(text)
        os.replace(cfg + ".new", cfg)

    write("[up]\nloss = 1.0\n")
    server, client = udp_socket(), udp_socket()
    netem = Netem(exe, ["--config", cfg, "--upstream", f"127.0.0.1:{server.getsockname()[1]}"])
    got = []

    def burst(first):
        for seq in range(first, first + 100):
            client.sendto(HEADER.pack(seq, 0), netem.address)
        return wait_for(netem, lambda st: st["up"]["in"] == first + 100 and
                        len(got) == st["up"]["out"] and st["up"]["queued"] == 0,
                        "the burst through", lambda: drain(server, got))

    try:
        st = burst(0)
        check(st["up"]["drop_loss"] == 100 and not got, "loss = 1.0: all 100 lost")
        write("[up]\nloss = 0.0\n")
        netem.proc.send_signal(signal.SIGHUP)
        wait_for(netem, lambda st: st["reloads"] == 1, "the reload")
        st = burst(100)
        check(st["up"]["drop_loss"] == 100 and len(got) == 100, "after SIGHUP, loss = 0: all 100 pass")
        write("[up]\nloss = 7\n")
        netem.proc.send_signal(signal.SIGHUP)
        wait_for(netem, lambda st: st["reloads_refused"] == 1, "the refused reload")
        st = burst(200)
        check(st["reloads"] == 1 and len(got) == 200, "a bad file is refused, the old rules stay")
        netem.stop()
    finally:
        netem.close()
    return 0


def case_run(exe, args):
    """The sample config loads, --duration stops the proxy, the progress line is printed."""
    cfg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "config",
                       "netem.toml")
    run = subprocess.run([exe, "--config", cfg, "--listen", "127.0.0.1:0", "--upstream",
                          "127.0.0.1:9", "--duration", "2.5"], capture_output=True, text=True,
                         timeout=DEADLINE_S)
    check(run.returncode == 0, f"config/netem.toml runs ({run.stderr.strip()[-300:]})")
    check(run.stdout.startswith("listening 127.0.0.1:") and "netem done" in run.stdout,
          "listening line first, summary last")
    check(re.search(r"^netem [12]s flows=0 refused=0 \| up in=0 ", run.stderr, re.M) is not None,
          f"a progress line each second: {run.stderr.strip()}")
    proc = subprocess.Popen([exe, "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(proc.stdout.readline().startswith("listening"), "started")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=DEADLINE_S)
    check(proc.returncode == 0 and "netem done" in out, "SIGINT stops it cleanly, with the summary")


def ping_through(exe, server_cmd, ping_cmd, name):
    """An echo server behind the proxy at 10% loss each way and a reliable ping-pong client
    through it: every one of 200 pings must come back."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(server_cmd(f"127.0.0.1:{port}"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    netem = Netem(exe, ["--upstream", f"127.0.0.1:{port}", "--loss", "10%", "--seed", "2"])
    try:
        ping = subprocess.run(ping_cmd(f"{netem.address[0]}:{netem.address[1]}") +
                              ["--count", "200", "--reliable", "--timeout-ms", "20000"],
                              capture_output=True, text=True, timeout=DEADLINE_S)
        st = netem.stop()
    finally:
        netem.close()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
    print(ping.stdout.strip(), ping.stderr.strip())
    check_balance(st)
    check(ping.returncode == 0, f"{name}'s ping-pong completed through 10% loss each way")
    check("count=200 lost=0" in ping.stdout, "all 200 reliable echoes arrived")
    check(st["up"]["drop_loss"] > 0 and st["down"]["drop_loss"] > 0,
          f"the proxy dropped some each way (up {st['up']['drop_loss']}, down {st['down']['drop_loss']})")


def case_enet(exe, args):
    if not args.enet_server or not args.enet_ping:
        print("libenet's programs (perf/reference) not built: skipped")
        return 77
    ping_through(exe, lambda a: [args.enet_server, "--listen", a],
                 lambda a: [args.enet_ping, "--connect", a], "libenet")
    return 0


def case_ternping(exe, args):
    ping_through(exe, lambda a: [args.tern_ping, "--serve", a, "--shards", "1", "--pin", "off"],
                 lambda a: [args.tern_ping, "--connect", a], "tern-ping")
    return 0


def case_cli(exe, _):
    for bad in (["--nope"], [], ["--listen", "127.0.0.1:0"], ["--upstream", "127.0.0.1:9"],
                ["--listen", "127.0.0.1:0", "--upstream", "nowhere"],
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--loss", "5"],
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--delay", "25"],
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--rate", "fast"],
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--reorder", "5%"],
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--loss", "1%", "--ge", "1%,5%"],
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--up-queue", "0"],
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--jitter-dist", "pareto"],
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--pool", "4000000",
                 "--slot-bytes", "65535"]):
        run = subprocess.run([exe] + bad, capture_output=True, text=True, timeout=10)
        check(run.returncode == 2 and "usage: tern-netem" in run.stderr, f"{bad}: usage, exit 2")
    ok = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
    check(ok.returncode == 0 and "usage: tern-netem" in ok.stdout, "--help: usage, exit 0")
    d = tempfile.mkdtemp(prefix="netem-cli-")
    cleanup.append(d)
    for bad, want in ((["--stats-json", os.path.join(d, "no", "such", "dir.json")], "cannot write"),
                      (["--listen", "192.0.2.1:1"], "cannot listen on 192.0.2.1:1")):
        run = subprocess.run([exe, "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9",
                              "--duration", "0.1"] + bad, capture_output=True, text=True,
                             timeout=DEADLINE_S)
        check(run.returncode == 1 and want in run.stderr, f"{bad}: exit 1, {want!r}")
    cases = [
        ('[up]\nloss = 1.5\n', "up.loss: must be a fraction"),
        ('[up]\nlos = 0.1\n', "up.los: unknown key"),
        ('[down]\ndelay = "25"\n', "down.delay: wants a duration"),
        ('[down]\nreorder = "5%"\n', "down.reorder: needs a delay"),
        ('upstream = 9\n', "upstream: must be a string"),
        ('colour = "red"\n', "colour: unknown key"),
        ('up = 3\n', "up: must be a table"),
        ('[up\n', ":1:"),
    ]
    for i, (text, want) in enumerate(cases):
        path = os.path.join(d, f"bad{i}.toml")
        with open(path, "w") as f:
            f.write(text)
        run = subprocess.run([exe, "--config", path, "--listen", "127.0.0.1:0", "--upstream",
                              "127.0.0.1:9"], capture_output=True, text=True, timeout=10)
        check(run.returncode == 1 and path in run.stderr and want in run.stderr,
              f"config {text.strip()!r}: names the file and says {want!r} ({run.stderr.strip()})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netem", required=True)
    ap.add_argument("--enet-server")
    ap.add_argument("--enet-ping")
    ap.add_argument("--tern-ping")
    ap.add_argument("case")
    args = ap.parse_args()
    fn = globals().get("case_" + args.case)
    if fn is None:
        print(f"unknown case {args.case}", file=sys.stderr)
        return 2
    try:
        return fn(args.netem, args) or 0
    finally:
        for d in cleanup:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""tern-relay's operations as a process (issue 34 item 5): the admin endpoint's token, its
listings against real libenet clients (enet-relay-member, one ENet host per client so each has
its own address), kick and ban as those clients see them (a
banned address's CONNECT gets no answer at all: the ban is the engine's, before the handshake),
the bans file ([security] bans_file) at start and on SIGHUP, per-room and top-talker series
bounded by metrics.top_rooms / top_talkers with an "other" aggregate, JSON log lines, the
Grafana dashboard's every metric name against a real scrape, and the new keys' config errors.

Waits for a 1 s ban to run out (polling, under a deadline): suite 'timing' too.

usage: relay_ops_test.py RELAY_BINARY MEMBER_CLIENT"""
import json
import os
import queue
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

RELAY, MEMBER = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(HERE, "..", "..", "..", "config", "grafana", "tern-relay.json")
TOKEN = "ops-test-token-0123456789"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(args, timeout=20):
    return subprocess.run([RELAY] + args, capture_output=True, text=True, timeout=timeout)


def http(method, url, token=None, timeout=10):
    """(status, body text) of one request."""
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def enet_connect(connect_id):
    """A libenet 1.3 CONNECT datagram as a client's first (peer ID 0xFFF, sent time)."""
    return struct.pack("!HHBBH", 0x8FFF, 0x1234, 2 | 0x80, 0xFF, 1) + struct.pack(
        "!HBBIIIIIIIIII", 0, 0xFF, 0xFF, 1400, 65536, 2, 0, 0, 5000, 2, 2, connect_id, 0)


def answered(relay_addr, source_ip, metrics=None, counter=None):
    """Sends one CONNECT from source_ip. True when the relay answers it (the ACK and
    VERIFY_CONNECT datagram). With a counter: waits for the relay to count the datagram there
    first, then allows 0.5 s for an answer that would be sent in the same poll iteration."""
    host, port = relay_addr.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind((source_ip, 0))
        before = samples(scrape(metrics), counter).get("", 0) if counter else 0
        u.sendto(enet_connect(0x5EED0000 + u.getsockname()[1]), (host, int(port)))
        if counter:
            wait_until("counted", lambda: sum(samples(scrape(metrics), counter).values()) > before)
        u.settimeout(0.5 if counter else 10)
        try:
            return len(u.recv(2048)) > 0
        except socket.timeout:
            return False


def scrape(metrics):
    return http("GET", f"http://{metrics}/metrics")[1]


def samples(body, name):
    """{labels text: value} of metric `name` in a Prometheus text body."""
    out = {}
    for line in body.splitlines():
        m = re.match(re.escape(name) + r"(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1) or ""] = float(m.group(2))
    return out


def wait_until(what, cond, deadline_s=15):
    """Polls cond() until true (a deadline that only a hang passes); returns its last value."""
    end = time.monotonic() + deadline_s
    while True:
        v = cond()
        if v or time.monotonic() > end:
            return v
        time.sleep(0.02)


class Members:
    """enet-relay-member: commands in, event lines out (read by a thread into a queue)."""

    def __init__(self, relay_addr):
        self.p = subprocess.Popen([MEMBER, relay_addr], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.strip())

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def connect(self, room, ip="127.0.0.1"):
        self.send(f"connect {room} {ip}")
        self.next_id += 1
        return self.next_id - 1

    def expect(self, pattern, deadline_s=15):
        """The first line (seen before or arriving) matching `pattern`, or None."""
        for i, line in enumerate(self.seen):
            if re.fullmatch(pattern, line):
                return self.seen.pop(i)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if re.fullmatch(pattern, line):
                return line
            self.seen.append(line)
        return None

    def port_of(self, cid, deadline_s=15):
        line = self.expect(rf"connected {cid} \d+", deadline_s)
        return int(line.split()[2]) if line else None

    def drain(self):
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                return self.seen

    def close(self):
        try:
            self.send("quit")
        except (BrokenPipeError, OSError):
            pass
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()


def start_relay(config_path, extra=()):
    p = subprocess.Popen([RELAY, "--config", config_path, *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    return p, p.stdout.readline()


with tempfile.TemporaryDirectory() as d:
    # ---- configuration errors for the new keys: file, key, reason, non-zero exit ----------
    def bad_config(text, must_contain, what, extra=()):
        path = os.path.join(d, "bad.toml")
        with open(path, "w") as f:
            f.write(text)
        r = run(["--config", path, *extra])
        ok = r.returncode == 2 and all(s in r.stderr for s in [path] + must_contain)
        check(ok, f"{what}: exit {r.returncode}, stderr {r.stderr.strip()!r}")
        return r

    bad_config("[admin]\ntoken = \"short\"\n", ["admin.token", "at least 16"], "admin token too short")
    bad_config("[admin]\ntoken = \"has a space in it, long enough\"\n", ["admin.token", "spaces"],
               "admin token with a space")
    bad_config("[admin]\ntokn = \"0123456789abcdef0\"\n", ["admin.tokn", "unknown key"],
               "misspelt admin key")
    bad_config(f"[admin]\ntoken = \"{TOKEN}\"\ntoken_file = \"t\"\n", ["admin.token_file", "not both"],
               "token and token_file both")
    bad_config("[admin]\ntoken_file = \"no-such-token\"\n", ["admin.token_file", "cannot read"],
               "unreadable token_file")
    bad_config("[log]\nformat = \"xml\"\n", ["log.format", "\"text\" or \"json\""], "unknown log format")
    bad_config("[log]\nlevel = \"debug\"\n", ["log.level", "unknown key"], "misspelt log key")
    bad_config("[metrics]\ntop_rooms = 1000\n", ["metrics.top_rooms", "between 0 and 100"],
               "top_rooms out of range")
    bad_config("[metrics]\ntop_talkers = -1\n", ["metrics.top_talkers", "between 0 and 100"],
               "top_talkers out of range")
    bad_config(f"[metrics]\nlisten = \"\"\n[admin]\ntoken = \"{TOKEN}\"\n",
               ["admin.token", "metrics.listen"], "admin token with the metrics port off")
    r = bad_config("[log]\nformat = \"xml\"\n", ["log.format"], "config error as a JSON line",
                   extra=["--log-format", "json"])
    try:
        err = json.loads(r.stderr.strip().splitlines()[-1])
        check(err.get("level") == "error" and err.get("event") == "config_error"
              and "log.format" in err.get("message", ""), f"config error as JSON: {err}")
    except (ValueError, IndexError) as e:
        check(False, f"config error with --log-format json parses as JSON ({e}): {r.stderr!r}")
    r = run(["--log-format", "yaml"])
    check(r.returncode == 2 and "--log-format: text or json" in r.stderr and "usage:" in r.stderr,
          "bad --log-format: exit 2 with usage")

    # ---- no token: the admin endpoint is off, the log stays text --------------------------
    plain = os.path.join(d, "plain.toml")
    with open(plain, "w") as f:
        f.write("[relay]\nlisten = \"127.0.0.1:0\"\nshards = 1\npin = false\n"
                "[metrics]\nlisten = \"127.0.0.1:0\"\n")
    relay, ready = start_relay(plain)
    try:
        words = ready.split()
        check(words[:1] == ["relaying"], f"default log format is today's text line: {ready!r}")
        metrics = next(w.split("=", 1)[1] for w in words if w.startswith("metrics="))
        status, body = http("GET", f"http://{metrics}/admin/rooms", token=TOKEN)
        check(status == 404 and "off" in body, f"no admin.token: /admin/rooms is 404 ({status} {body!r})")
        status, _ = http("POST", f"http://{metrics}/admin/kick?peer=127.0.0.1:1", token=TOKEN)
        check(status == 404, f"no admin.token: /admin/kick is 404 ({status})")
        body = scrape(metrics)
        check(samples(body, "tern_relay_admin_requests_total").get('{result="disabled"}') == 2,
              "requests to the disabled endpoint counted")
        check(samples(body, "tern_relay_admin_enabled").get("") == 0, "tern_relay_admin_enabled 0")
    finally:
        relay.terminate()
        out, err = relay.communicate(timeout=20)
    check(relay.returncode == 0 and out.splitlines()[-1].startswith("relay stopped "),
          f"text summary line as before: {out.splitlines()[-1:]}")

    # ---- token from a file, JSON logs, two shards ------------------------------------------
    token_file = os.path.join(d, "admin.token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    cfg = os.path.join(d, "ops.toml")
    with open(cfg, "w") as f:
        f.write("[relay]\nlisten = \"127.0.0.1:0\"\nshards = 2\npin = false\n"
                "[metrics]\nlisten = \"127.0.0.1:0\"\ntop_rooms = 3\ntop_talkers = 2\n"
                "[admin]\ntoken_file = \"admin.token\"\n"
                "[log]\nformat = \"json\"\n[shutdown]\ndrain_timeout_ms = 2000\n")
    relay, ready = start_relay(cfg)
    members = None
    try:
        first = json.loads(ready)
        check(first.get("event") == "relaying" and first.get("admin") is True,
              f"ready line is a JSON log line: {first}")
        addr, metrics = first["listen"], first["metrics"]
        base = f"http://{metrics}"

        # Authorization.
        status, _ = http("GET", base + "/admin/rooms")
        check(status == 401, f"no token: 401 ({status})")
        status, _ = http("GET", base + "/admin/rooms", token=TOKEN + "x")
        check(status == 401, f"wrong token: 401 ({status})")
        status, _ = http("GET", base + "/admin/rooms", token=TOKEN[:-1])
        check(status == 401, f"token prefix: 401 ({status})")
        check(samples(scrape(metrics), "tern_relay_admin_requests_total").get(
            '{result="unauthorized"}') == 3, "three unauthorized requests counted")

        # 32 clients in 30 rooms: room 101 has three, rooms 102..130 one each.
        members = Members(addr)
        rooms = [101, 101, 101] + list(range(102, 131))
        ids = [members.connect(room) for room in rooms]
        ports = [members.port_of(i) for i in ids]
        check(all(ports), f"32 libenet clients connected: ports {ports}")
        # A libenet client reports its connection before the relay has it (the relay's connect
        # event waits for the client's acknowledgement), and a member's join reaches the other
        # shards through their rings. Every client listed means every join has been sent; one
        # more round of questions to every shard is answered only after each has taken what
        # its rings held before it (posted work and ring messages are taken in one iteration),
        # so from then on every shard knows every member and the copies below are all made.
        want_peers = sorted(f"127.0.0.1:{p}" for p in ports)
        check(wait_until("all listed", lambda: sorted(p["peer"] for p in json.loads(http(
            "GET", base + "/admin/peers", token=TOKEN)[1])["peers"]) == want_peers),
            "the relay lists all 32 clients")
        http("GET", base + "/admin/rooms", token=TOKEN)
        # Traffic: client 0 (room 101) 20 x 1000 bytes, fanned out to two; client 3 (room 102,
        # alone) 5 x 300; client 4 (room 103, alone) 3 x 100.
        members.send("send 0 20 1000")
        members.send("send 3 5 300")
        members.send("send 4 3 100")

        def traffic():
            body = scrape(metrics)
            msgs = samples(body, "tern_relay_room_messages_in_total")
            return body if sum(msgs.values()) == 28 and samples(
                body, "tern_relay_room_copies_out_total").get('{room="101"}') == 40 else None
        body = wait_until("traffic counted", traffic) or scrape(metrics)
        msgs = samples(body, "tern_relay_room_messages_in_total")
        check(sum(msgs.values()) == 28, f"room messages (top and other) add up to 28: {msgs}")
        labels = set(msgs)
        check(len(labels) == 4 and '{room="other"}' in labels,
              f"30 rooms, top_rooms 3: 3 room series + other ({sorted(labels)})")
        for fam in ("tern_relay_room_members", "tern_relay_room_bytes_in_total",
                    "tern_relay_room_copies_out_total", "tern_relay_room_bytes_out_total"):
            check(len(samples(body, fam)) == 4, f"{fam}: 4 series")
        out = samples(body, "tern_relay_room_bytes_out_total")
        check(max(out, key=out.get) == '{room="101"}' and out['{room="101"}'] == 40000,
              f"busiest room is 101 with 40000 bytes out: {out}")
        members_by_room = samples(body, "tern_relay_room_members")
        check(members_by_room.get('{room="101"}') == 3 and sum(members_by_room.values()) == 32,
              f"room members: 101 has 3, all 32 counted: {members_by_room}")
        check(samples(body, "tern_relay_room_count").get("") == 30, "tern_relay_room_count 30")
        talk = samples(body, "tern_relay_talker_bytes_in_total")
        check(len(talk) == 3, f"top_talkers 2: 2 series + other ({sorted(talk)})")
        check(talk.get(f'{{peer="127.0.0.1:{ports[0]}",room="101"}}') == 20000
              and talk.get(f'{{peer="127.0.0.1:{ports[3]}",room="102"}}') == 1500
              and talk.get('{peer="other",room=""}') == 300,
              f"loudest clients by bytes, the rest in other: {talk}")
        check(samples(body, "tern_relay_traffic_complete").get("") == 1, "every shard answered")

        # Listings match the clients.
        status, text = http("GET", base + "/admin/rooms", token=TOKEN)
        listed = json.loads(text)
        got = {r["room"]: r["members"] for r in listed["rooms"]}
        want = {room: rooms.count(room) for room in set(rooms)}
        check(status == 200 and got == want, f"/admin/rooms: {got}")
        status, text = http("GET", base + "/admin/peers?room=101", token=TOKEN)
        got = sorted(p["peer"] for p in json.loads(text)["peers"])
        check(got == sorted(f"127.0.0.1:{p}" for p in ports[:3]), f"/admin/peers?room=101: {got}")
        status, text = http("GET", base + "/admin/peers", token=TOKEN)
        got = sorted(p["peer"] for p in json.loads(text)["peers"])
        check(got == sorted(f"127.0.0.1:{p}" for p in ports), f"/admin/peers: all 32 ({len(got)})")

        # Kick: the named client sees disconnect data 4; the others stay.
        status, text = http("POST", base + f"/admin/kick?peer=127.0.0.1:{ports[1]}&reason=test",
                            token=TOKEN)
        check(status == 200 and json.loads(text).get("kicked") == 1, f"kick: {status} {text!r}")
        line = members.expect(r"disconnected 1 data=\d+")
        check(line == "disconnected 1 data=4", f"kicked client saw disconnect data 4: {line!r}")

        def peers_now(q=""):
            return sorted(p["peer"] for p in json.loads(
                http("GET", base + "/admin/peers" + q, token=TOKEN)[1])["peers"])
        left = [f"127.0.0.1:{p}" for i, p in enumerate(ports) if i != 1]
        check(wait_until("kick listed", lambda: peers_now() == sorted(left)),
              "after the kick: the 31 others still listed")
        others = [l for l in members.drain() if l.startswith("disconnected")]
        check(not others, f"no other client was disconnected: {others}")
        status, _ = http("POST", base + "/admin/kick?peer=127.0.0.1:1", token=TOKEN)
        check(status == 404, f"kick of no client: 404 ({status})")
        status, _ = http("GET", base + f"/admin/kick?peer=127.0.0.1:{ports[2]}", token=TOKEN)
        check(status == 405, f"kick with GET: 405 ({status})")
        status, _ = http("POST", base + "/admin/kick?peer=nonsense", token=TOKEN)
        check(status == 400, f"kick with a bad peer: 400 ({status})")

        # Connect data 0 joins no room: the relay acknowledges the client's reliable message
        # and can relay it to no one, so the client is disconnected with data 6, not left on as
        # if it had been relayed.
        roomless = members.connect(0)
        check(members.port_of(roomless) is not None, "a client with connect data 0 connected")
        no_room_before = samples(scrape(metrics), "tern_relay_drops_total").get(
            '{reason="no_room"}', 0)
        members.send(f"send {roomless} 1 16")
        line = members.expect(rf"disconnected {roomless} data=\d+")
        check(line == f"disconnected {roomless} data=6",
              f"the roomless client's reliable message ended it with data 6: {line!r}")
        check(samples(scrape(metrics), "tern_relay_drops_total").get('{reason="no_room"}', 0)
              == no_room_before + 1, "its message counted as drops_total{reason=no_room}")

        # Ban: 127.0.0.2's clients are disconnected (data 5) and its connects refused; the
        # 127.0.0.1 clients are not touched.
        banned = [members.connect(101, "127.0.0.2") for _ in range(2)]
        banned_ports = [members.port_of(i) for i in banned]
        check(all(banned_ports) and wait_until("listed", lambda: all(
            f"127.0.0.2:{p}" in peers_now() for p in banned_ports)),
            "two clients from 127.0.0.2 connected and listed")
        status, text = http("POST", base + "/admin/ban?address=127.0.0.2&seconds=600", token=TOKEN)
        check(status == 200 and json.loads(text).get("kicked") == 2, f"ban: {status} {text!r}")
        for i in banned:
            line = members.expect(rf"disconnected {i} data=\d+")
            check(line == f"disconnected {i} data=5", f"banned client {i} saw data 5: {line!r}")
        # Refused before the handshake: a libenet CONNECT from it gets no VERIFY_CONNECT (one
        # from an address not banned does), and the engine counts it.
        check(answered(addr, "127.0.0.6"), "a CONNECT from 127.0.0.6 is answered")
        check(not answered(addr, "127.0.0.2", metrics, "tern_relay_connects_banned_total"),
              "a CONNECT from banned 127.0.0.2 gets no answer at all (counted as banned)")
        body = scrape(metrics)
        check(samples(body, "tern_relay_drops_total").get('{reason="banned"}', 0) >= 2,
              "the banned clients counted as drops_total{reason=banned}")
        check(peers_now() == sorted(left), "the 127.0.0.1 clients stayed through the ban")
        bans = json.loads(http("GET", base + "/admin/bans", token=TOKEN)[1])["bans"]
        check([b["address"] for b in bans] == ["127.0.0.2"] and bans[0]["remaining_ms"] > 0,
              f"/admin/bans: {bans}")
        status, text = http("POST", base + "/admin/unban?address=127.0.0.2", token=TOKEN)
        check(status == 200 and json.loads(text).get("was_banned") is True, f"unban: {text!r}")
        back = members.connect(101, "127.0.0.2")
        port = members.port_of(back)
        check(port is not None and wait_until(
            "unbanned listed", lambda: f"127.0.0.2:{port}" in peers_now("?room=101")),
            "after unban, 127.0.0.2 connects and stays listed")

        # Expiry: a 1 s ban on 127.0.0.3 ends by itself; reconnects are accepted after it.
        status, _ = http("POST", base + "/admin/ban?address=127.0.0.3&seconds=1", token=TOKEN)
        check(status == 200, "1 s ban on 127.0.0.3")
        def ban_listed(address):
            bans = json.loads(http("GET", base + "/admin/bans", token=TOKEN)[1])["bans"]
            return any(b["address"] == address for b in bans)
        check(wait_until("ban ran out", lambda: not ban_listed("127.0.0.3"), 20),
              "the 1 s ban on 127.0.0.3 runs out (no longer listed)")
        cid = members.connect(104, "127.0.0.3")
        port = members.port_of(cid)
        check(port is not None and wait_until(
            "listed", lambda: f"127.0.0.3:{port}" in peers_now("?room=104")),
            "after the ban ran out, 127.0.0.3 connects and stays listed")
        refused = [l for l in members.drain() if l.startswith(f"disconnected {cid} ")]
        check(not refused, f"and was not refused: {refused}")
        status, _ = http("POST", base + "/admin/ban?address=127.0.0.4&seconds=0", token=TOKEN)
        check(status == 400, f"ban for 0 s: 400 ({status})")
        # A prefix: every address in it, listed as written.
        status, text = http("POST", base + "/admin/ban?address=127.0.9.0/24&seconds=600",
                            token=TOKEN)
        check(status == 200, f"prefix ban: {status} {text!r}")
        check(not answered(addr, "127.0.9.77", metrics, "tern_relay_connects_banned_total"),
              "a CONNECT from 127.0.9.77 (in the banned /24) gets no answer")
        check(ban_listed("127.0.9.0/24"), "/admin/bans lists 127.0.9.0/24")
        http("POST", base + "/admin/unban?address=127.0.9.0/24", token=TOKEN)
        check(answered(addr, "127.0.9.77"), "after the unban, 127.0.9.77 is answered")
        for bad in ("0.0.0.0", "::", "127.0.0.1:80", "nowhere", "127.0.0.0/33"):
            status, _ = http("POST", base + f"/admin/ban?address={bad}", token=TOKEN)
            check(status == 400, f"ban of {bad!r}: 400 ({status})")
        status, _ = http("GET", base + "/admin/nothing", token=TOKEN)
        check(status == 404, f"unknown admin path: 404 ({status})")

        # The Grafana dashboard: a Prometheus datasource variable, and every metric name in its
        # queries in this scrape.
        with open(DASHBOARD) as f:
            dash = json.load(f)
        variables = dash.get("templating", {}).get("list", [])
        check(any(v.get("type") == "datasource" and v.get("query") == "prometheus"
                  for v in variables), "dashboard has a Prometheus datasource variable")
        body = scrape(metrics)
        exported = set(re.findall(r"^(tern_relay_[a-z0-9_]+)", body, re.M))
        exprs = []

        def walk(panels):
            for p in panels:
                exprs.extend(t["expr"] for t in p.get("targets", []) if "expr" in t)
                walk(p.get("panels", []))
        walk(dash.get("panels", []))
        check(len(exprs) >= 10, f"dashboard has queries ({len(exprs)})")
        for e in exprs:
            names = set(re.findall(r"\btern_relay_[a-z0-9_]+", e))
            missing = names - exported
            check(names and not missing, f"dashboard expr {e!r}: metrics exported"
                  + (f" (missing {sorted(missing)})" if missing else ""))

        relay.send_signal(signal.SIGHUP)
        time.sleep(0.2)  # not asserted on: lets the reload line come before the drain's
    finally:
        if members is not None:
            members.close()
        relay.terminate()
        out, err = relay.communicate(timeout=30)
        if sys.exc_info()[0] is not None:  # the relay's last words say why the test broke off
            print(f"relay exit {relay.returncode}; its stderr:\n{err[-6000:]}")

    # Every line the relay printed, on both streams, is one JSON object.
    events = []
    for stream, text in (("stdout", ready + out), ("stderr", err)):
        for line in text.splitlines():
            try:
                o = json.loads(line)
                ok = isinstance(o, dict) and all(k in o for k in ("ts", "level", "event"))
            except ValueError:
                ok = False
            check(ok, f"{stream} line is a JSON log object: {line[:100]!r}")
            if ok:
                events.append(o)
    names = [e["event"] for e in events]
    for want in ("relaying", "admin_kick", "admin_ban", "admin_unban", "rules_not_reloaded",
                 "relay_stopped"):
        check(want in names, f"JSON log has a {want} event")
    stopped = next((e for e in events if e["event"] == "relay_stopped"), {})
    check(stopped.get("banned", 0) >= 1 and "drained" in stopped,
          f"relay_stopped carries the summary's fields: banned={stopped.get('banned')}")

    # ---- the bans file: read at start, reloaded on SIGHUP, a bad one named by file and line --
    bans_path = os.path.join(d, "relay.bans")
    with open(bans_path, "w") as f:
        f.write("# refused from the start, until the line goes\n127.0.0.8\n")
    bcfg = os.path.join(d, "bans.toml")
    with open(bcfg, "w") as f:
        f.write("[relay]\nlisten = \"127.0.0.1:0\"\nshards = 2\npin = false\n"
                "[metrics]\nlisten = \"127.0.0.1:0\"\n"
                f"[admin]\ntoken = \"{TOKEN}\"\n[security]\nbans_file = \"relay.bans\"\n")
    relay, ready = start_relay(bcfg)
    members = None
    try:
        words = ready.split()
        addr = words[1]
        metrics = next(w.split("=", 1)[1] for w in words if w.startswith("metrics="))
        base = f"http://{metrics}"

        def listed():
            return {b["address"]: b for b in
                    json.loads(http("GET", base + "/admin/bans", token=TOKEN)[1])["bans"]}
        b = listed().get("127.0.0.8")
        check(b is not None and b["until_removed"] is True, f"bans file at start: {listed()}")
        check(not answered(addr, "127.0.0.8", metrics, "tern_relay_connects_banned_total"),
              "a CONNECT from 127.0.0.8 (bans file) gets no answer")
        members = Members(addr)
        cid = members.connect(201, "127.0.0.9")
        check(members.port_of(cid) is not None, "a client from 127.0.0.9 connected")
        with open(bans_path, "w") as f:
            f.write("127.0.0.9 600   # the line for .8 is gone\n")
        relay.send_signal(signal.SIGHUP)
        line = members.expect(rf"disconnected {cid} data=\d+")
        check(line == f"disconnected {cid} data=5", f"SIGHUP: 127.0.0.9's client saw data 5: {line!r}")
        check(wait_until("reloaded", lambda: "127.0.0.8" not in listed()),
              "SIGHUP: 127.0.0.8's ban lifted with its line")
        b = listed().get("127.0.0.9")
        check(b is not None and 0 < b["remaining_ms"] <= 600_000 and not b["until_removed"],
              f"SIGHUP: 127.0.0.9 banned for 600 s: {b}")
        check(answered(addr, "127.0.0.8"), "after the reload, 127.0.0.8 is answered")
        with open(bans_path, "w") as f:
            f.write("127.0.0.10\n127.0.0.300 60\n")
        relay.send_signal(signal.SIGHUP)
        check(wait_until("kept", lambda: "127.0.0.9" in listed() and "127.0.0.10" not in listed(), 3),
              "a bad bans file on SIGHUP keeps the running bans")
    finally:
        if members is not None:
            members.close()
        relay.terminate()
        out, err = relay.communicate(timeout=30)
    check(f"{bans_path}:2: " in err and "bans not reloaded" in err,
          f"the bad reload was logged with file and line: {err[-400:]!r}")
    check("bans reloaded" in err, "the good reload was logged")
    with open(bans_path, "w") as f:
        f.write("127.0.0.1\n\n10.0.0.0/40\n")
    r = run(["--config", bcfg])
    check(r.returncode == 2 and f"security.bans_file: {bans_path}:3: prefix length" in r.stderr,
          f"a bad bans file at start: exit {r.returncode}, {r.stderr.strip()!r}")

print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)

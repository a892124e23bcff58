#!/usr/bin/env python3
"""Mixed rooms on one tern-relay (issue 31): libenet members (Debian's libenet, C) and kcp-go
members (Debian's kcp-go, Go) in the same rooms, two shards. Every member sends MESSAGES
numbered messages; every member must receive every other member's messages exactly once and
in order per sender, and nothing from another room. Prints the accounting per room.

KCP members join with a first message "join:<room>" (the relay's default kcp.room_rule), or
with --room-rule conv by their conv (their first message, "hello", is ignored by everyone);
their messages reach libenet members on channel 0, reliable; libenet members' reliable
channel-0 messages reach KCP members as plain KCP messages, payload untouched.

Exits 77 (skip) with the reason only when Go or kcp-go's source is absent."""
import argparse
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

GOPATH = "/usr/share/gocode"
KCP_SRC = os.path.join(GOPATH, "src/github.com/xtaci/kcp-go")

# room -> (libenet members, kcp-go members)
ROOMS = {1: (4, 4), 2: (2, 3)}


def build_go(src, workdir):
    go = shutil.which("go")
    if go is None:
        print("SKIP: go not found (apt-get install golang-go; scripts/setup.sh installs it)")
        sys.exit(77)
    if not os.path.isdir(KCP_SRC):
        print("SKIP: kcp-go source not found at %s (apt-get install golang-github-xtaci-kcp-dev)"
              % KCP_SRC)
        sys.exit(77)
    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    out = os.path.join(workdir, "kcp_relay_member")
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH,
               GOCACHE=os.path.join(workdir, "gocache"), GOPROXY="off")
    subprocess.run([go, "build", "-o", out, src], env=env, check=True, timeout=300)
    return out


def stop_relay(relay):
    """Stops tern-relay and prints its stop summary (its own counts of both ports) and the
    end of its error output."""
    relay.terminate()
    try:
        out, err = relay.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        relay.kill()
        out, err = relay.communicate()
    sys.stdout.write("".join(l + "\n" for l in out.splitlines() if "relay stopped" in l))
    sys.stdout.write(err[-2000:])


def read_line(proc, deadline, what):
    """The process's next stdout line, or exits naming `what` at the deadline."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            sys.exit("timed out waiting for %s" % what)
        r, _, _ = select.select([proc.stdout], [], [], left)
        if r:
            line = proc.stdout.readline()
            if line == "":
                sys.exit("%s: process exited (status %s)" % (what, proc.wait()))
            return line.strip()


def expect(proc, word, deadline, what):
    line = read_line(proc, deadline, what)
    if line != word:
        sys.exit("%s: expected %r, got %r" % (what, word, line))


def metrics(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--enet-member", required=True)
    ap.add_argument("--go-src", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--room-rule", choices=["join", "conv"], default="join")
    a = ap.parse_args()
    go_member = build_go(a.go_src, a.workdir)

    tmp = tempfile.mkdtemp(prefix="kcprelay-mixed-")
    conf = os.path.join(tmp, "relay.toml")
    with open(conf, "w") as f:
        f.write('[relay]\nlisten = "127.0.0.1:0"\nshards = %d\npin = false\n'
                '[metrics]\nlisten = "127.0.0.1:0"\n'
                '[kcp]\nport = 0\nroom_rule = "%s"\nchannel = 0\n' % (a.shards, a.room_rule))
    relay = subprocess.Popen([a.relay, "--config", conf], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    procs = []
    try:
        line = read_line(relay, time.monotonic() + 30, "tern-relay to start")
        m = re.search(r"relaying (\S+) .*kcp=(\S+).*metrics=(\S+)", line)
        if m is None:
            sys.exit("unexpected start line: %r" % line)
        enet_addr, kcp_addr, metrics_addr = m.groups()
        print(line)

        next_id = 0
        for room, (n_enet, n_kcp) in ROOMS.items():
            enet_ids = list(range(next_id, next_id + n_enet))
            kcp_ids = list(range(next_id + n_enet, next_id + n_enet + n_kcp))
            next_id += n_enet + n_kcp
            room_ids = ",".join(str(i) for i in enet_ids + kcp_ids)
            procs.append(("libenet room %d" % room, subprocess.Popen(
                [a.enet_member, enet_addr, str(room), str(a.messages),
                 ",".join(map(str, enet_ids)), room_ids],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)))
            procs.append(("kcp-go room %d" % room, subprocess.Popen(
                [go_member, "-relay", kcp_addr, "-room", str(room), "-messages",
                 str(a.messages), "-ids", ",".join(map(str, kcp_ids)), "-room-ids", room_ids]
                + (["-conv-room"] if a.room_rule == "conv" else []),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)))

        deadline = time.monotonic() + 30
        for what, p in procs:
            expect(p, "joined", deadline, what + " to join")
        # Every join must have reached the relay before anyone sends, or an early message
        # would miss a late member: the relay's per-room member gauge says when.
        url = "http://%s/metrics" % metrics_addr
        want = {room: e + k for room, (e, k) in ROOMS.items()}
        while True:
            text = metrics(url)
            have = {}
            for room in ROOMS:
                mm = re.search(r'tern_relay_room_members\{room="%d"\} (\d+)' % room, text)
                have[room] = int(mm.group(1)) if mm else 0
            if have == want:
                break
            if time.monotonic() > deadline:
                sys.exit("members never all joined: %s of %s" % (have, want))
            time.sleep(0.05)

        started = time.monotonic()
        for _, p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        deadline = time.monotonic() + 90
        for what, p in procs:
            expect(p, "done", deadline, what + " to receive everything")
        took = time.monotonic() - started
        # Anything arriving twice would come now; the members count it at quit.
        time.sleep(0.5)
        failed = False
        reports = {}
        for what, p in procs:
            out, _ = p.communicate("quit\n", timeout=30)
            reports[what] = out.strip()
            if p.returncode != 0:
                failed = True
                print("%s: exit status %d" % (what, p.returncode))
        for what, _ in procs:
            print(reports[what])
        for room, (n_enet, n_kcp) in ROOMS.items():
            n = n_enet + n_kcp
            print("room %d (kcp room_rule %s): %d libenet + %d kcp-go members, %d x %d x %d = %s "
                  "copies, %s"
                  % (room, a.room_rule, n_enet, n_kcp, n, n - 1, a.messages,
                     format(n * (n - 1) * a.messages, ","),
                     "FAILED" if failed else "all delivered once, in order per sender"))
        print("delivered in %.1f s through %d shards" % (took, a.shards))
        text = metrics(url)
        for name in ("tern_relay_kcp_sessions", "tern_relay_kcp_protocol_drops_total",
                     "tern_relay_peers"):
            vals = [int(v) for v in re.findall(r'^%s\{shard="\d+"\} (\d+)' % name, text, re.M)]
            print("%s per shard: %s" % (name, vals))
        kcp_per_shard = [int(v) for v in re.findall(
            r'^tern_relay_kcp_sessions\{shard="\d+"\} (\d+)', text, re.M)]
        if sum(kcp_per_shard) < sum(k for _, k in ROOMS.values()):
            print("the relay holds fewer KCP sessions than members: %s" % kcp_per_shard)
            failed = True
        return 1 if failed else 0
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
        stop_relay(relay)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

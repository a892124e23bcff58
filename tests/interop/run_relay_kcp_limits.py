#!/usr/bin/env python3
"""tern-relay's limits on kcp-go members (issue 31), with Debian's kcp-go:

  refused    limits.room_size 2: the third member's join is refused (room_full). Its client
             keeps writing: the relay's KCP core refuses the session's segments without an ack
             or a new session, so kcp-go's writes block once its send window is full of
             unacknowledged messages, the relay counts them (kcp_refused) and drops none as
             no_room. (Before, each resend opened a new session that acknowledged them.)
  rate       limits.message_rate 100: a member sends 400 messages at once; the other member
             gets all 400, in order; the relay held them in the sender's window
             (kcp_intake_waits) and dropped nothing.
  bandwidth  limits.peer_bandwidth 10000 bytes/s, the same way.

Exits 77 (skip) with the reason only when Go or kcp-go's source is absent."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_relay_mixed import build_go, expect, metrics, read_line, stop_relay  # noqa: E402


def total(text, name):
    return sum(int(v) for v in re.findall(r'^%s\{shard="\d+"\} (\d+)' % name, text, re.M))


def drops(text, reason):
    m = re.search(r'^tern_relay_drops_total\{reason="%s"\} (\d+)' % reason, text, re.M)
    return int(m.group(1)) if m else 0


def wait_for(what, pred, seconds):
    deadline = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > deadline:
            sys.exit("timed out waiting for " + what)
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--go-src", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--case", choices=["refused", "rate", "bandwidth"], required=True)
    a = ap.parse_args()
    member = build_go(a.go_src, a.workdir)

    limits = {"refused": "room_size = 2\n", "rate": "message_rate = 100\n",
              "bandwidth": "peer_bandwidth = 10000\n"}[a.case]
    tmp = tempfile.mkdtemp(prefix="kcprelay-limits-")
    conf = os.path.join(tmp, "relay.toml")
    with open(conf, "w") as f:
        f.write('[relay]\nlisten = "127.0.0.1:0"\nshards = 2\npin = false\n'
                '[limits]\n' + limits +
                '[metrics]\nlisten = "127.0.0.1:0"\n'
                '[kcp]\nport = 0\nroom_rule = "join"\n')
    relay = subprocess.Popen([a.relay, "--config", conf], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    procs = []
    try:
        line = read_line(relay, time.monotonic() + 30, "tern-relay to start")
        m = re.search(r"relaying (\S+) .*kcp=(\S+).*metrics=(\S+)", line)
        if m is None:
            sys.exit("unexpected start line: %r" % line)
        _, kcp_addr, metrics_addr = m.groups()
        url = "http://%s/metrics" % metrics_addr
        print(line)

        def start(*extra):
            p = subprocess.Popen([member, "-relay", kcp_addr, "-room", "1"] + list(extra),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            procs.append(p)
            expect(p, "joined", time.monotonic() + 30, "kcp-go member to join")
            return p

        def say(p, text):
            p.stdin.write(text + "\n")
            p.stdin.flush()

        def members():
            mm = re.search(r'tern_relay_room_members\{room="1"\} (\d+)', metrics(url))
            return int(mm.group(1)) if mm else 0

        receiver = start()
        wait_for("the first member to join", lambda: members() == 1, 30)
        failed = False
        if a.case == "refused":
            messages = 200
            other = start()
            wait_for("the second member to join", lambda: members() == 2, 30)
            sender = start("-send-window", "32", "-write-timeout-ms", "2000")
            wait_for("the second join to be refused",
                     lambda: drops(metrics(url), "room_full") == 1, 30)
            say(sender, "send %d" % messages)
            wrote = read_line(sender, time.monotonic() + 120, "the refused member's writes")
            print("refused member: %s of %d (kcp-go blocks once its 32-segment send window "
                  "holds only unacknowledged messages)" % (wrote, messages))
            wait_for("the relay to refuse the session's segments",
                     lambda: total(metrics(url), "tern_relay_kcp_refused_total") > 0, 30)
            text = metrics(url)
            refused = total(text, "tern_relay_kcp_refused_total")
            connects = total(text, "tern_relay_kcp_connects_total")
            no_room = drops(text, "no_room")
            print("kcp_refused %d, kcp_connects %d, no_room drops %d, room_full drops %d"
                  % (refused, connects, no_room, drops(text, "room_full")))
            if int(wrote.split()[1]) >= messages:
                print("FAIL: every write went through: the refused session's messages were "
                      "acknowledged")
                failed = True
            if connects != 3:
                print("FAIL: %d KCP sessions opened, expected 3 (the refused one reopened)"
                      % connects)
                failed = True
            if no_room != 0:
                print("FAIL: acknowledged messages dropped as no_room")
                failed = True
            expected_received = {receiver: 0, other: 0, sender: 0}
        else:
            messages = 400 if a.case == "rate" else 200
            sender = start()
            wait_for("both members to join", lambda: members() == 2, 30)
            say(sender, "send %d" % messages)
            wrote = read_line(sender, time.monotonic() + 120, "the sender's writes")
            print("sender: %s of %d" % (wrote, messages))
            deadline = time.monotonic() + 120
            while True:
                say(receiver, "count")
                got = int(read_line(receiver, deadline, "the receiver's count").split()[1])
                if got == messages:
                    break
                time.sleep(0.1)
            text = metrics(url)
            waits = total(text, "tern_relay_kcp_intake_waits_total")
            all_drops = sum(int(v) for v in re.findall(
                r'^tern_relay_drops_total\{reason="\w+"\} (\d+)', text, re.M))
            print("kcp_intake_waits %d, relay drops %d, kcp protocol drops %d"
                  % (waits, all_drops, total(text, "tern_relay_kcp_protocol_drops_total")))
            if waits == 0:
                print("FAIL: the sender was never held by %s" % limits.strip())
                failed = True
            if all_drops != 0:
                print("FAIL: the relay dropped messages")
                failed = True
            expected_received = {receiver: messages, sender: 0}
        for p in procs:
            out, _ = p.communicate("quit\n", timeout=30)
            last = out.strip().splitlines()[-1] if out.strip() else ""
            want = "received %d in order" % expected_received[p]
            print("member: %s" % last)
            if last != want:
                print("FAIL: expected %r" % want)
                failed = True
        print("%s: %s" % (a.case, "FAILED" if failed else "ok"))
        return 1 if failed else 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        stop_relay(relay)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

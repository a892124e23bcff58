#!/usr/bin/env python3
"""Smoke test for enet-relay: bad command lines exit 2 with usage; a relay on an ephemeral port
(--broadcast-rooms 100-199 --max-room-size 3) passes enet-relay-check; SIGTERM ends it with
exit 0 and a summary line whose counters match what the check sent.

usage: run_enet_relay_check.py ENET_RELAY ENET_RELAY_CHECK
"""
import re
import signal
import subprocess
import sys
import threading

relay, check = sys.argv[1:3]

for bad in (["--nope"], [], ["--listen", "127.0.0.1:0", "--peers", "0"],
            ["--listen", "127.0.0.1:0", "--peers", "4096"],
            ["--listen", "127.0.0.1:0", "--channels", "256"],
            ["--listen", "127.0.0.1:0", "--broadcast-rooms", "5-3"],
            ["--listen", "127.0.0.1:0", "--broadcast-rooms", "1-2,"],
            ["--listen", "127.0.0.1:0", "--max-room-size", "x"], ["--listen", "nohost"]):
    run = subprocess.run([relay] + bad, capture_output=True, timeout=10)
    assert run.returncode == 2 and b"usage" in run.stderr, (bad, run)

server = subprocess.Popen([relay, "--listen", "127.0.0.1:0", "--broadcast-rooms", "100-199",
                           "--max-room-size", "3"], stdout=subprocess.PIPE, text=True)
try:
    first = []
    reader = threading.Thread(target=lambda: first.append(server.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert first and first[0].startswith("relaying "), f"no 'relaying' line: {first}"
    port = int(re.fullmatch(r"relaying 127\.0\.0\.1:(\d+)", first[0].strip()).group(1))
    assert port != 0, first[0]

    run = subprocess.run([check, "--connect", f"127.0.0.1:{port}"], capture_output=True,
                         text=True, timeout=40)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    assert run.returncode == 0, f"enet-relay-check exited {run.returncode}"

    server.send_signal(signal.SIGTERM)
    out, _ = server.communicate(timeout=10)
    assert server.returncode == 0, f"enet-relay exited {server.returncode}"
    summary = [line for line in out.splitlines() if line.startswith("relayed ")]
    assert len(summary) == 1, out
    print(summary[0])
    got = dict(f.split("=", 1) for f in summary[0].split()[1:])
    # 4 + 3 joins accepted, one refused; rooms 7, 8, 150; 4 peers x 3 messages + 4 broadcast
    # messages; 18 room copies + 2 + 1 + 1 + 1 broadcast copies; the room-8 peer's 3 messages
    # had no recipient.
    want = {"signal": "15", "peers": "7", "rooms": "3", "messages_in": "16",
            "copies_out": "23", "dropped": "3", "refused": "1"}
    for key, value in want.items():
        assert got.get(key) == value, f"{key}={got.get(key)}, expected {value}: {summary[0]}"
    print("enet-relay smoke test passed")
finally:
    if server.poll() is None:
        server.kill()
        server.wait()

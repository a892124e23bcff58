#!/usr/bin/env python3
"""Checks raw-udp-echo: every datagram comes back unchanged to its sender (IPv4 and IPv6 on a
dual-stack listener), SIGTERM stops it with exit 0 and a counter line, bad flags exit 2."""
import re
import signal
import socket
import subprocess
import sys

exe = sys.argv[1]
bad = subprocess.run([exe, "--nope"], capture_output=True, timeout=10)
assert bad.returncode == 2 and b"usage" in bad.stderr, bad

server = subprocess.Popen([exe, "--listen", "[::]:0"], stdout=subprocess.PIPE, text=True)
try:
    line = server.stdout.readline()
    port = int(re.search(r":(\d+)$", line.strip()).group(1))
    sent = 0
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.settimeout(2)
        for i in range(500):
            payload = bytes([i % 251]) * (1 + i % 1400)
            s.sendto(payload, (host, port))
            data, _ = s.recvfrom(4096)
            assert data == payload, f"{host}: echo {i} differs"
            sent += 1
        s.close()
    server.send_signal(signal.SIGTERM)
    out, _ = server.communicate(timeout=10)
    assert server.returncode == 0, server.returncode
    m = re.search(r"datagrams=(\d+)", out)
    assert m and int(m.group(1)) == sent, out
    print(f"raw-udp-echo echoed {sent} datagrams over IPv4 and IPv6")
finally:
    if server.poll() is None:
        server.kill()

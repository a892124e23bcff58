#!/usr/bin/env python3
"""Runs enet-echo-check against a real echo server process (tern-ping --serve).

  run_echo_check.py --server PATH [--listen-flag FLAG] [--server-arg ARG ...] --check PATH
                    [--checksum]

Picks a free loopback UDP port, starts `SERVER --serve 127.0.0.1:PORT` (FLAG replaces --serve,
e.g. --listen for perf/reference's enet-echo-server, which validates the check itself), runs the check
against it, then stops the server with SIGTERM (SIGKILL if it ignores that). Exit status is
the check's, or 1 if the server died early or would not stop. Every step is bounded in time.
"""

import argparse
import signal
import socket
import subprocess
import sys
import time

CHECK_TIMEOUT_S = 60
STOP_TIMEOUT_S = 5


def free_udp_port() -> int:
    # The port is released before the server binds it; another process could take it in
    # between, which on a test machine is rare enough to accept.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> bool:
    """SIGTERM, then SIGKILL; True if the server stopped on SIGTERM."""
    if proc.poll() is not None:
        return True
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)
        return False


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--listen-flag", default="--serve")
    ap.add_argument("--server-arg", action="append", default=[])
    ap.add_argument("--check", required=True)
    ap.add_argument("--checksum", action="store_true")
    args = ap.parse_args()

    port = free_udp_port()
    endpoint = f"127.0.0.1:{port}"
    server_cmd = [args.server, args.listen_flag, endpoint] + args.server_arg
    check_cmd = [args.check, "--connect", endpoint]
    if args.checksum:
        server_cmd.append("--checksum")
        check_cmd.append("--checksum")

    print("server:", " ".join(server_cmd), flush=True)
    server = subprocess.Popen(server_cmd)
    try:
        # No readiness signal is needed: libenet retransmits the connect for 5 s, but a server
        # that fails to start at all is reported as such rather than as a connect timeout.
        time.sleep(0.2)
        if server.poll() is not None:
            print(f"FAIL: server exited at start with status {server.returncode}", flush=True)
            return 1
        print("check: ", " ".join(check_cmd), flush=True)
        try:
            rc = subprocess.run(check_cmd, timeout=CHECK_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            print(f"FAIL: check did not finish within {CHECK_TIMEOUT_S} s", flush=True)
            rc = 1
        if server.poll() is not None:
            print(f"FAIL: server exited during the check with status {server.returncode}",
                  flush=True)
            rc = rc or 1
    finally:
        stopped = stop(server)
    if not stopped:
        print(f"FAIL: server ignored SIGTERM for {STOP_TIMEOUT_S} s and was killed", flush=True)
        rc = rc or 1
    else:
        print(f"server stopped on SIGTERM with status {server.returncode}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())

"""What the dpdk suite's scripts share: stopping a process, reading its log, its k=v summary
lines, and a list of failed checks."""

import signal
import subprocess

STOP_TIMEOUT_S = 15
STEP_TIMEOUT_S = 60


def stop(proc):
    """SIGTERM, then SIGKILL; returns (stopped on SIGTERM, exit status)."""
    if proc.poll() is not None:
        return True, proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
        return True, proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)
        return False, proc.returncode


def read(f):
    f.seek(0)
    return f.read()


def fields(text, *prefixes):
    """The k=v pairs of the first line that starts with one of the prefixes (and a space)."""
    line = next((l for l in text.splitlines() if any(l.startswith(p + " ") for p in prefixes)),
                "")
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


class Failures:
    def __init__(self):
        self.items = []

    def check(self, ok, what):
        print(("PASS: " if ok else "FAIL: ") + what, flush=True)
        if not ok:
            self.items.append(what)

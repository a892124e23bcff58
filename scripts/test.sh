#!/usr/bin/env bash
# The test command: installs what is missing, configures build-test from scratch, builds it,
# runs every suite (extra arguments go to `meson test`, e.g. --suite drivers), and ends with
# one line "N passed, N failed" (", N skipped" when any were). Exits with meson test's status.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh || exit $?

rm -rf build-test
meson setup build-test || { echo "meson setup failed"; exit 1; }
ninja -C build-test || { status=$?; echo "build failed (ninja exit $status)"; exit "$status"; }

meson test -C build-test --print-errorlogs --num-processes 2 "$@"
status=$?

python3 - build-test/meson-logs/testlog.json <<'PY'
import json, sys

passed = failed = skipped = 0
try:
    with open(sys.argv[1]) as log:
        for line in log:
            line = line.strip()
            if not line:
                continue
            result = json.loads(line).get("result", "")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:  # FAIL, UNEXPECTEDPASS, TIMEOUT, ERROR
                failed += 1
except FileNotFoundError:
    pass  # no test defined yet: meson writes no log
summary = f"{passed} passed, {failed} failed"
if skipped:
    summary += f", {skipped} skipped"
print(summary)
PY
exit "$status"

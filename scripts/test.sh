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

# The same core under AddressSanitizer + UndefinedBehaviorSanitizer: every suite that drives
# the protocol core in-process. Skipped when a suite was picked on the command line.
logs=(build-test/meson-logs/testlog.json)
if [ "$#" -eq 0 ] && [ "${TERN_SKIP_SANITIZERS:-0}" != 1 ]; then
  rm -rf build-asan
  if meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=disabled \
        -Dbenchmarks=disabled >/dev/null && ninja -C build-asan; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      meson test -C build-asan --print-errorlogs --num-processes 2 \
        --suite unit --suite api --suite drivers --suite sim --suite attack --suite runtime
    asan_status=$?
    [ "$asan_status" -ne 0 ] && status=$asan_status
    logs+=(build-asan/meson-logs/testlog.json)
  else
    echo "sanitizer build failed"
    status=1
  fi
fi

# The runtime's cross-thread code (rings, and the shards built on them) under ThreadSanitizer.
if [ "$#" -eq 0 ] && [ "${TERN_SKIP_SANITIZERS:-0}" != 1 ]; then
  rm -rf build-tsan
  if meson setup build-tsan -Dtsan=true -Dfuzz=disabled -Dbenchmarks=disabled \
        -Dinterop=disabled >/dev/null && ninja -C build-tsan; then
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      meson test -C build-tsan --print-errorlogs --num-processes 2 --suite runtime
    tsan_status=$?
    [ "$tsan_status" -ne 0 ] && status=$tsan_status
    logs+=(build-tsan/meson-logs/testlog.json)
  else
    echo "ThreadSanitizer build failed"
    status=1
  fi
fi

python3 - "${logs[@]}" <<'PY'
import json, sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
  try:
    with open(path) as log:
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

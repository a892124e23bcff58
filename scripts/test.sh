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

logs=(build-test/meson-logs/testlog.json)

# sanitizer_stage DIR "MESON OPTIONS" "SUITES": a fresh build with a sanitizer, then the named
# suites; its log joins the summary and its failure fails the run.
sanitizer_stage() {
  local dir=$1 options=$2 suites=() suite
  for suite in $3; do suites+=(--suite "$suite"); done
  rm -rf "$dir"
  # shellcheck disable=SC2086  # options are words
  if meson setup "$dir" $options >/dev/null && ninja -C "$dir"; then
    meson test -C "$dir" --print-errorlogs --num-processes 2 "${suites[@]}" || status=$?
    logs+=("$dir/meson-logs/testlog.json")
  else
    echo "$dir: sanitizer build failed"
    status=1
  fi
}

# Skipped when a suite was picked on the command line.
if [ "$#" -eq 0 ] && [ "${TERN_SKIP_SANITIZERS:-0}" != 1 ]; then
  # Every suite that drives the protocol core in-process, under ASan + UBSan.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    sanitizer_stage build-asan \
      "-Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=disabled -Dbenchmarks=disabled" \
      "base protocol api capi ping drivers sim attack runtime net filter netem kcp secure"
  # The runtime's cross-thread code (rings, the shards built on them, and the relay's
  # cross-shard rooms with real libenet clients) under TSan, and the building blocks below it.
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    sanitizer_stage build-tsan "-Dtsan=true -Dfuzz=disabled -Dbenchmarks=disabled" \
      "base runtime relay"
fi

python3 - "${logs[@]}" <<'PY'
import json, sys

passed = failed = skipped = 0
failures = []
for path in sys.argv[1:]:
  try:
    with open(path) as log:
        for line in log:
            line = line.strip()
            if not line:
                continue
            entry = json.loads(line)
            result = entry.get("result", "")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:  # FAIL, UNEXPECTEDPASS, TIMEOUT, ERROR
                failed += 1
                # The build directory tells the sanitizer stages apart.
                failures.append((f"{path.split('/')[0]}: {entry.get('name', '?')} ({result})",
                                 (entry.get("stdout") or "").splitlines()[-20:]))
  except FileNotFoundError:
    pass  # no test defined yet: meson writes no log
# Named again here because a CI log is often read from its tail only.
for name, tail in failures:
    print(f"failed: {name}; the end of its output:")
    for text in tail:
        print(f"    {text}")
summary = f"{passed} passed, {failed} failed"
if skipped:
    summary += f", {skipped} skipped"
print(summary)
PY
exit "$status"

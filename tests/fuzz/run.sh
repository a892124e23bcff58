#!/bin/sh
# Runs one libFuzzer target for a while, starting from the checked-in seed corpus.
#
#   tests/fuzz/run.sh TARGET SECONDS [libFuzzer options...]
#
# TARGET is fuzz_decoder, fuzz_reassembly, fuzz_handshake or fuzz_frame. The seeds are copied into a work corpus so the
# source tree is never written to; what the fuzzer learns accumulates there across runs.
#
# Environment:
#   TERN_FUZZ_BUILD      build directory holding tests/fuzz/TARGET (default: the first of
#                        build-fuzz, build-test, build-unit, build under the source root that has it)
#   TERN_FUZZ_BIN        the target binary itself (overrides TERN_FUZZ_BUILD)
#   TERN_FUZZ_WORK       work corpus directory (default: BUILD/tests/fuzz/work/TARGET)
#   TERN_FUZZ_SCRATCH=1  use a temporary work corpus, removed afterwards (the meson tests)
#   TERN_FUZZ_ARTIFACTS  where crash/leak/timeout inputs are written (default: work dir)
set -eu

if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET SECONDS [libFuzzer options...]" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seeds="$here/corpus/$target"
if [ ! -d "$seeds" ]; then
  echo "run.sh: no seed corpus at $seeds" >&2
  exit 2
fi

bin=${TERN_FUZZ_BIN:-}
if [ -z "$bin" ]; then
  for build in ${TERN_FUZZ_BUILD:-} "$root/build-fuzz" "$root/build-test" "$root/build-unit" "$root/build"; do
    if [ -n "$build" ] && [ -x "$build/tests/fuzz/$target" ]; then
      bin="$build/tests/fuzz/$target"
      break
    fi
  done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "run.sh: $target not built; configure with -Dfuzz=enabled and run ninja" >&2
  exit 2
fi

if [ "${TERN_FUZZ_SCRATCH:-0}" = 1 ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/tern-$target.XXXXXX")
  trap 'rm -rf "$work"' EXIT INT TERM
else
  work=${TERN_FUZZ_WORK:-$(dirname "$bin")/work/$target}
  mkdir -p "$work"
fi
cp "$seeds"/* "$work"/

artifacts=${TERN_FUZZ_ARTIFACTS:-$work/}
mkdir -p "$artifacts"

echo "run.sh: $bin for ${seconds}s, corpus $work, artifacts $artifacts"
# UBSan findings are fatal (the targets are built with -fno-sanitize-recover=all); libFuzzer
# checks each input for leaks itself.
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 -error_exitcode=1 \
  -artifact_prefix="$artifacts" "$@" "$work"

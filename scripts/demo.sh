#!/usr/bin/env bash
# The main job, end to end: a release build, tern-relay on loopback (pinned to CPU 0), and
# tern-loadgen (pinned to CPU 1) playing 1,000 clients in rooms of 8 against it, first with
# reliable then with unreliable 64-byte messages at 30 Hz per client; each run prints its
# summary (throughput, latency percentiles, loss, duplicates, order). Every step is bounded in
# time; the relay is drained with SIGTERM at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

if [[ -d build-release ]]; then
  meson configure build-release -Dbuildtype=release -Db_lto=true
else
  meson setup build-release --buildtype=release -Db_lto=true
fi
timeout 900 ninja -C build-release apps/relay/tern-relay apps/loadgen/tern-loadgen
relay_bin=build-release/apps/relay/tern-relay
loadgen_bin=build-release/apps/loadgen/tern-loadgen

pin_relay=()
pin_load=()
if taskset -c 0,1 true 2>/dev/null; then
  pin_relay=(taskset -c 0)
  pin_load=(taskset -c 1)
fi

out=$(mktemp)
# `timeout` bounds the relay even if this script is killed without running its trap.
timeout 900 "${pin_relay[@]}" "$relay_bin" --listen 127.0.0.1:0 --shards 1 --pin off \
  --metrics 127.0.0.1:0 >"$out" &
relay=$!
trap 'kill "$relay" 2>/dev/null || true; wait "$relay" 2>/dev/null || true; rm -f "$out"' EXIT

for _ in $(seq 100); do
  grep -q '^relaying ' "$out" && break
  kill -0 "$relay" 2>/dev/null || { echo "demo: tern-relay exited before it was up" >&2; exit 1; }
  sleep 0.1
done
grep -q '^relaying ' "$out" || { echo "demo: tern-relay not up after 10 s" >&2; exit 1; }
read -r _ address _ < <(grep '^relaying ' "$out")
echo "demo: $(head -1 "$out")"

for delivery in reliable unreliable; do
  echo "== tern-loadgen --target $address --clients 1000 --room-size 8 --rate 30 --delivery $delivery"
  timeout 300 "${pin_load[@]}" "$loadgen_bin" --target "$address" --clients 1000 --room-size 8 \
    --rate 30 --size 64 --warmup 1 --duration 5 --delivery "$delivery" --quiet
done

kill -TERM "$relay"
wait "$relay" || true
trap 'rm -f "$out"' EXIT
echo "demo: $(tail -1 "$out")"

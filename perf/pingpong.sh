#!/usr/bin/env bash
# Side-by-side ping-pong RTT: Tern (tern-ping --serve / --connect) against plain libenet
# (enet-echo-server / enet-ping), same machine, same run, same options.
#
#   perf/pingpong.sh [BUILD_DIR]            BUILD_DIR defaults to build-release
#
# For each run (RUNS, default 5) and each delivery (reliable, unreliable) both implementations
# are measured, alternating which goes first so slow drift on a shared machine does not favour
# one. The server is pinned to CPU 0 and the client to CPU 1; the client does COUNT (20000)
# pings of SIZE (64) bytes, one outstanding, after its default warm-up. Prints the median of
# p50 and of p99 across runs and the ratio tern/enet (below 1: Tern is faster), and writes
# everything to perf/results/pingpong.json. Every process runs under `timeout`.
#
# Environment overrides: RUNS, COUNT, SIZE, CLIENT_TIMEOUT_S (default 120).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build-release}
[[ $build == /* ]] || build="$root/$build"
runs=${RUNS:-5}
count=${COUNT:-20000}
size=${SIZE:-64}
client_timeout=${CLIENT_TIMEOUT_S:-120}
server_timeout=$((client_timeout + 30))
deliveries=(reliable unreliable)

tern_ping="$build/apps/ping/tern-ping"
enet_server="$build/perf/reference/enet-echo-server"
enet_ping="$build/perf/reference/enet-ping"
for exe in "$tern_ping" "$enet_server" "$enet_ping"; do
  if [[ ! -x $exe ]]; then
    echo "pingpong: $exe not built (meson setup build-release --buildtype=release -Db_lto=true &&" \
      "ninja -C build-release)" >&2
    exit 2
  fi
done

# Pinning needs two CPUs we are allowed to run on; without them the comparison still runs,
# unpinned, and says so.
pin_server=(taskset -c 0)
pin_client=(taskset -c 1)
pinned=true
if ! taskset -c 0,1 true 2>/dev/null; then
  echo "pingpong: CPUs 0 and 1 not both available; running unpinned" >&2
  pin_server=()
  pin_client=()
  pinned=false
fi

results_dir="$root/perf/results"
mkdir -p "$results_dir"
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill -TERM "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Stops the server, waiting at most 5 s for it before `timeout`'s own kill takes over.
stop_server() {
  [[ -n $server_pid ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# measure IMPL DELIVERY RUN: appends "IMPL DELIVERY RUN <rtt line>" to $work/raw, or a FAILED
# record; never aborts the whole comparison.
failures=0
measure() {
  local impl=$1 delivery=$2 run=$3 port endpoint line
  port=$(free_port)
  endpoint="127.0.0.1:$port"
  local server_cmd client_cmd
  if [[ $impl == tern ]]; then
    server_cmd=("$tern_ping" --serve "$endpoint")
    client_cmd=("$tern_ping" --connect "$endpoint")
  else
    server_cmd=("$enet_server" --listen "$endpoint")
    client_cmd=("$enet_ping" --connect "$endpoint")
  fi
  client_cmd+=(--count "$count" --size "$size" "--$delivery")

  timeout -k 5 "$server_timeout" "${pin_server[@]}" "${server_cmd[@]}" \
    >"$work/server.log" 2>&1 &
  server_pid=$!
  # Both clients retransmit their connect for seconds, so this only avoids a first lost
  # handshake datagram skewing nothing but the warm-up.
  sleep 0.3
  if line=$(timeout -k 5 "$client_timeout" "${pin_client[@]}" "${client_cmd[@]}" \
    2>"$work/client.log" | grep '^rtt_us '); then
    echo "$impl $delivery $run $line" >>"$work/raw"
    printf '  run %d %-10s %-4s %s\n' "$run" "$delivery" "$impl" "$line"
  else
    failures=$((failures + 1))
    echo "$impl $delivery $run FAILED" >>"$work/raw"
    printf '  run %d %-10s %-4s FAILED:\n' "$run" "$delivery" "$impl"
    sed 's/^/    client: /' "$work/client.log" | tail -5
    sed 's/^/    server: /' "$work/server.log" | tail -5
  fi
  stop_server
}

echo "pingpong: $runs runs x {${deliveries[*]}} x {tern, enet}; --count $count --size $size;" \
  "server on CPU 0, client on CPU 1 (pinned=$pinned); build $build"
: >"$work/raw"
for run in $(seq "$runs"); do
  for delivery in "${deliveries[@]}"; do
    if ((run % 2 == 1)); then order=(tern enet); else order=(enet tern); fi
    for impl in "${order[@]}"; do
      measure "$impl" "$delivery" "$run"
    done
  done
done

git_rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$work/raw" "$results_dir/pingpong.json" "$count" "$size" "$runs" "$pinned" \
  "$git_rev" "$build" <<'PY'
import json, os, platform, statistics, sys, time

raw, out, count, size, runs, pinned, rev, build = sys.argv[1:9]
records = []
for line in open(raw):
    impl, delivery, run, rest = line.split(maxsplit=3)
    rec = {"impl": impl, "delivery": delivery, "run": int(run)}
    if rest.strip() == "FAILED":
        rec["failed"] = True
    else:
        for field in rest.split()[1:]:
            key, _, value = field.partition("=")
            try:
                rec[key] = float(value) if "." in value else int(value)
            except ValueError:
                rec[key] = value
    records.append(rec)

summary = {}
for delivery in ("reliable", "unreliable"):
    row = {}
    for impl in ("tern", "enet"):
        ok = [r for r in records if r["impl"] == impl and r["delivery"] == delivery
              and not r.get("failed")]
        row[impl] = {
            "runs": len(ok),
            "p50_us_median": statistics.median(r["p50"] for r in ok) if ok else None,
            "p99_us_median": statistics.median(r["p99"] for r in ok) if ok else None,
            "lost_total": sum(r.get("lost", 0) for r in ok),
        }
    for p in ("p50", "p99"):
        t, e = row["tern"][f"{p}_us_median"], row["enet"][f"{p}_us_median"]
        row[f"{p}_ratio_tern_over_enet"] = round(t / e, 3) if t and e else None
    summary[delivery] = row

def fmt(v, width, digits=1):
    return f"{v:>{width}.{digits}f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"

print()
print(f"RTT in microseconds, median over runs ({runs} runs, {count} pings of {size} B each)")
print(f"{'delivery':<11} {'tern p50':>9} {'enet p50':>9} {'ratio':>6}   "
      f"{'tern p99':>9} {'enet p99':>9} {'ratio':>6}   {'lost t/e':>9}")
for delivery, row in summary.items():
    t, e = row["tern"], row["enet"]
    print(f"{delivery:<11} {fmt(t['p50_us_median'], 9)} {fmt(e['p50_us_median'], 9)} "
          f"{fmt(row['p50_ratio_tern_over_enet'], 6, 2)}   "
          f"{fmt(t['p99_us_median'], 9)} {fmt(e['p99_us_median'], 9)} "
          f"{fmt(row['p99_ratio_tern_over_enet'], 6, 2)}   "
          f"{t['lost_total']:>4}/{e['lost_total']:<4}")
print("ratio = tern / enet: below 1.00 means Tern's round trip is shorter")

doc = {
    "benchmark": "pingpong",
    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "git_rev": rev,
    "build_dir": build,
    "host": {"machine": platform.machine(), "kernel": platform.release(),
             "cpus": os.cpu_count()},
    "config": {"runs": int(runs), "count": int(count), "size": int(size),
               "pinned": pinned == "true", "server_cpu": 0, "client_cpu": 1,
               "tern": "tern-ping --serve / --connect",
               "enet": "enet-echo-server / enet-ping (Debian libenet)"},
    "summary": summary,
    "runs": records,
}
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
print(f"wrote {out}")
PY

if ((failures > 0)); then
  echo "pingpong: $failures measurement(s) failed" >&2
  exit 1
fi

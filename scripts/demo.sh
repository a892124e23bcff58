#!/usr/bin/env bash
# The main job, end to end: a release build of tern-ping, a server on loopback, then 20,000
# reliable and 20,000 unreliable 64-byte ping-pongs against it. Every step is time-bounded.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

if [[ -d build-release ]]; then
  meson configure build-release -Dbuildtype=release
else
  meson setup build-release --buildtype=release
fi
timeout 900 ninja -C build-release apps/ping/tern-ping
ping_bin=build-release/apps/ping/tern-ping

# The first free UDP port from 17091 on, so a leftover server does not break the demo.
port=$(python3 - <<'PY'
import socket
for port in range(17091, 17191):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
PY
)
[[ -n $port ]] || { echo "demo: no free UDP port in 17091..17190" >&2; exit 1; }

# `timeout` bounds the server even if this script is killed without running its trap.
timeout 900 "$ping_bin" --serve "127.0.0.1:$port" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT

up=0
for _ in $(seq 100); do
  kill -0 "$server" 2>/dev/null || { echo "demo: server exited before it was up" >&2; exit 1; }
  if ss -Hlun "sport = :$port" 2>/dev/null | grep -q .; then up=1; break; fi
  sleep 0.1
done
((up)) || { echo "demo: server not listening on 127.0.0.1:$port after 10 s" >&2; exit 1; }
echo "demo: server up on 127.0.0.1:$port"

for mode in --reliable --unreliable; do
  echo "== tern-ping --connect 127.0.0.1:$port --count 20000 --size 64 $mode"
  timeout 300 "$ping_bin" --connect "127.0.0.1:$port" --count 20000 --size 64 "$mode"
done

#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the demo need. Idempotent: asks apt
# only for what dpkg does not already list as installed, and refreshes the package lists only
# then. Prints one line: what it installed, or that everything was present.
set -euo pipefail

packages=(
  build-essential g++ meson ninja-build pkg-config python3
  libenet-dev                                 # reference peer: interop tests, perf/reference
  libgtest-dev libgmock-dev googletest        # tests
  libbenchmark-dev                            # perf/micro
  clang libfuzzer-14-dev libclang-rt-14-dev   # tests/fuzz (libFuzzer needs clang)
  liburing-dev                                # drivers/uring
  libdpdk-dev dpdk ethtool                    # drivers/dpdk, tests/drivers/dpdk (veth offloads)
  dpdk-dev                                    # dpdk-testpmd: the memif ceiling in perf/dpdk_bench.py
  libtomlplusplus-dev                         # apps/relay configuration (TOML)
  libhyperscan-dev                            # engine/filter (payload rules)
  libsodium-dev                               # secure sessions: tokens, AEAD (engine/protocol/secure)
  iproute2 procps util-linux                  # ss, ps/pkill, taskset for demos and perf
  tshark                                      # tests/wireshark: the dissector under tshark
  libjs-chart.js                              # perf/report.py inlines its Chart.js
  chromium                                    # tests/report: the report rendered headless
  golang-go golang-github-xtaci-kcp-dev       # kcp-go: interop peer (tests/interop), perf/reference/kcp-loss-peer
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages already present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
# wireshark-common (pulled in by tshark) asks whether non-root users may capture; answer "no"
# beforehand so the install never stops at a prompt.
if [[ " ${missing[*]} " == *" tshark "* ]]; then
  echo "wireshark-common wireshark-common/install-setuid boolean false" |
    "${sudo[@]}" debconf-set-selections
fi
apt_opts=(-o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
if ! { "${sudo[@]}" apt-get "${apt_opts[@]}" update -q &&
       "${sudo[@]}" apt-get "${apt_opts[@]}" install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "setup: apt-get failed while installing: ${missing[*]}" >&2
  exit 1
fi
echo "setup: installed ${missing[*]}"

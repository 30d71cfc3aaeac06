#!/usr/bin/env bash
# The demo: on a fresh Debian 12 machine, as root, installs what it needs, builds upfd,
# upfctl and upfbench (the build of README and docs/operations.md, so theirs is then
# done already), then `upfbench capacity --profile quick`: brings up the lab of network
# namespaces, measures this machine's limits, starts upfd, establishes 4000 sessions
# over PFCP, runs saturation trials each beside its limits, the carrier capacity test,
# the application mix, a no-drop search and latency, a ping and iperf3 through upfd
# (from a UE of the gNB/UE emulator) and per-core scaling, prints the tables and where
# the report is (text, report.json and report.html, ping and iperf3 included), and
# removes the lab. The capacity test takes about 4 minutes on a 2-CPU machine (the whole
# demo, build included, about 8). Extra arguments go to `upfbench capacity` (see --help).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
if [[ "$(id -u)" != 0 ]]; then
  echo "demo: run as root (it builds network namespaces and loads XDP programs)" >&2
  exit 1
fi
scripts/deps.sh demo
export PATH="$HOME/.cargo/bin:$PATH"
echo "== building (release)"
cargo build --release --locked -p upfd -p upfctl -p upfbench
echo "== upfbench capacity --profile quick $* (about 4 minutes on a 2-CPU machine)"
exec target/release/upfbench capacity --profile quick "$@"

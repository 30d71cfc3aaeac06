#!/usr/bin/env bash
# The demo: on a fresh Debian 12 machine, as root, installs what it needs, builds upfd
# and upfbench, then `upfbench capacity --profile quick` (about a minute): brings up the
# lab of network namespaces, measures this machine's limits, starts upfd, establishes
# 4000 sessions over PFCP, runs the carrier capacity test, a no-drop search and latency,
# a ping and iperf3 through upfd (from a UE of the gNB/UE emulator), prints the tables
# and where the report is (text, report.json and report.html, ping and iperf3 included),
# and removes the lab. Extra arguments go to `upfbench capacity` (see --help).
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
cargo build --release --locked -p upfd -p upfbench
echo "== upfbench capacity --profile quick $*"
exec target/release/upfbench capacity --profile quick "$@"

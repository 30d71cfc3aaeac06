#!/usr/bin/env bash
# Per-packet cost of upfd's XDP programs against the bare forwarder's, in the same run:
# runs `upfbench capacity --profile PROFILE [ARGS...]` (default smoke; e.g.
# `scripts/xdp-cost.sh smoke --sessions 1000000`) with the kernel's BPF run-time
# statistics on (kernel.bpf_stats_enabled), samples every XDP program's run count and
# run time while it runs, and prints nanoseconds per packet for each program.
#
# The statistics add two clock reads per program run, so the capacity figures of this run
# are lower than without them: use it for the per-packet cost, not for throughput.
# Samples are taken every 0.3 s, so counts miss up to 0.3 s at the end of each program's
# life; the average per packet is what to read. Needs root and the release binaries.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
profile="${1:-smoke}"
shift || true
out="$(mktemp -d /tmp/xdp-cost.XXXXXX)"
before="$(sysctl -n kernel.bpf_stats_enabled)"
restore() { sysctl -q -w kernel.bpf_stats_enabled="$before"; }
trap restore EXIT

cargo build --release --locked -q -p upfd -p upfctl -p upfbench
sysctl -q -w kernel.bpf_stats_enabled=1
timeout 1800 target/release/upfbench capacity --profile "$profile" --no-check "$@" \
  --prefix xc- --out "$out/report" >"$out/capacity.log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  bpftool prog show -j 2>/dev/null || true
  echo
  sleep 0.3
done >"$out/samples.jsonl"
wait "$pid" || { echo "capacity run failed: $out/capacity.log" >&2; exit 1; }
restore

python3 - "$out/samples.jsonl" <<'PY'
import json, sys
last = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    try:
        progs = json.loads(line)
    except ValueError:
        continue
    for p in progs:
        if p.get("type") == "xdp" and "run_cnt" in p:
            last[p["id"]] = (p.get("name", "?"), p["run_cnt"], p["run_time_ns"])
agg = {}
for name, cnt, ns in last.values():
    a = agg.setdefault(name, [0, 0])
    a[0] += cnt
    a[1] += ns
print("program          packets   ns/packet")
for name, (cnt, ns) in sorted(agg.items()):
    if cnt:
        print(f"{name:<14} {cnt:>10}   {ns / cnt:9.1f}")
def per(n):
    c, t = agg.get(n, (0, 0))
    return t / c if c else None
for upf, bare in (("xdp_n3", "bare_n3"), ("xdp_n6", "bare_n6")):
    u, b = per(upf), per(bare)
    if u and b:
        print(f"{upf}: {u:.1f} ns per packet, {u / b:.2f} x the bare forwarder's {bare} ({b:.1f} ns)")
PY
echo "capacity log and report: $out"

#!/usr/bin/env bash
# Run the cargo-fuzz targets, seeded from the interop captures.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Default: 20 s per target (the smoke run of the test command). A crash fails the run and
# leaves the input under fuzz/artifacts/TARGET/; turn it into a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pfcp_decode gtpu_decode parse_emit_parse n4_sequences state_load)
pcaps=${UPF_INTEROP_PCAPS:-../shared/interop/pcaps}

seed() { # seed DIR DISPLAY_FILTER
  local dir=$1 filter=$2
  mkdir -p "$dir"
  if [ ! -d "$pcaps" ]; then
    echo "interop pcaps absent at $pcaps: fuzzing $dir from an empty corpus"
    return
  fi
  for f in "$pcaps"/*.pcap "$pcaps"/*.pcapng; do
    [ -e "$f" ] || continue
    tshark -r "$f" -d udp.port==8805,pfcp -Y "$filter" -T fields -e udp.payload 2>/dev/null
  done | sort -u | python3 -c '
import sys, hashlib, os
d = sys.argv[1]
for line in sys.stdin:
    for h in line.strip().replace(":", "").split(","):
        if h:
            b = bytes.fromhex(h)
            open(os.path.join(d, hashlib.sha1(b).hexdigest()), "wb").write(b)
' "$dir"
}

for t in "${targets[@]}"; do
  [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "no fuzz target $t"; exit 2; }
  corpus=fuzz/corpus/$t
  case $t in
    pfcp_decode|n4_sequences) seed "$corpus" "udp.port==8805" ;;
    gtpu_decode) seed "$corpus" "udp.port==2152" ;;
    parse_emit_parse) seed "$corpus" "udp.port==8805 || udp.port==2152" ;;
    state_load) mkdir -p "$corpus"
      UPF_STATE_SEEDS="$PWD/$corpus" cargo test -q -p upf --lib state::tests::write_fuzz_seeds -- --ignored >/dev/null ;;
  esac
  echo "fuzzing $t for ${secs}s ($(ls "$corpus" | wc -l) seeds)"
  (cd fuzz && cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -max_len=4096 -print_final_stats=1 2>&1 | tail -n 12)
done

#!/usr/bin/env bash
# Which test catches which bug (docs/testing.md): in a scratch worktree of HEAD, put one
# deliberate bug at a time into the compiler (crates/bpf/src/compile.rs), the generated
# ABI or the reference model, run the tests that guard that code, and print the tests
# that failed. A bug no test catches prints "NOT CAUGHT" and makes the script fail.
# Needs root (the data path's tests load BPF programs); about a minute per bug.
#
#   scripts/deliberate-bugs.sh            # every bug
#   scripts/deliberate-bugs.sh precedence # the bugs whose name contains "precedence"
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
only="${1:-}"
scratch="$(mktemp -d /tmp/deliberate-bugs.XXXXXX)"
git -C "$repo" worktree add --detach -q "$scratch" HEAD
cleanup() { git -C "$repo" worktree remove --force "$scratch"; }
trap cleanup EXIT
export CARGO_TARGET_DIR="$repo/target/deliberate-bugs"
# The differential test with a fixed seed and fewer frames: the same run every time.
export UPF_DIFF_CASES=30000 UPF_DIFF_SEED=7

# name % file % perl substitution (applied to the whole file) % tests (cargo test
# argument lists, separated by ;)
bugs=(
"precedence order reversed%crates/bpf/src/compile.rs%s/by_precedence.sort_by_key\(\|\(p, _\)\| \(p.precedence, p.id\)\);/by_precedence.sort_by_key(|(p, _)| std::cmp::Reverse((p.precedence, p.id)));/%-p upf-bpf --lib;-p upf-bpf --test differential"
"SDF port range one short%crates/bpf/src/compile.rs%s/\(m.remote.port_lo, m.remote.port_hi\) = \(r.lo, r.hi\);/(m.remote.port_lo, m.remote.port_hi) = (r.lo, r.hi.saturating_sub(1));/%-p upf-bpf --lib;-p upf-bpf --test differential"
"OHC flag IPv6 for an IPv4 tunnel%crates/bpf/src/compile.rs%s/v.ohc = abi::OHC_GTPU_V4 as u8;/v.ohc = abi::OHC_GTPU_V6 as u8;/%-p upf-bpf --lib;-p upf-bpf --test differential"
"N3 address as the source towards the core%crates/bpf/src/compile.rs%s/\(a.n9_v4.or\(a.n3_v4\), a.n9_v6.or\(a.n3_v6\)\)/(a.n3_v4, a.n3_v6)/%-p upf-bpf --lib;-p upf-bpf --test differential"
"BUFF encoded as DROP%crates/bpf/src/compile.rs%s/\(a.buff, abi::FAR_BUFF\)/(a.buff, abi::FAR_DROP)/%-p upf-bpf --lib;-p upf-bpf --test differential"
"Transport Level Marking's low octet as ToS%crates/bpf/src/compile.rs%s/v.tos = \(t >> 8\) as u8;/v.tos = t as u8;/%-p upf-bpf --lib;-p upf-bpf --test differential"
"PDI QFI dropped%crates/bpf/src/compile.rs%s/qfi: pdi.qfis.first\(\).copied\(\).unwrap_or\(abi::QFI_ANY as u8\),/qfi: abi::QFI_ANY as u8,/%-p upf-bpf --lib;-p upf-bpf --test differential"
"MBR burst halved%crates/bpf/src/compile.rs%s/\(cost, \(burst \* cost\) >> abi::QER_COST_SHIFT\)/(cost, (burst * cost) >> (abi::QER_COST_SHIFT + 1))/%-p upf-bpf --lib;-p upf-bpf --test differential;-p upf-bpf --test rate_limits"
"source check with the last UE address%crates/bpf/src/compile.rs%s/v4 = v4.or\(u.ipv4\);/v4 = u.ipv4.or(v4);/%-p upf-bpf --lib;-p upf-bpf --test differential"
"framed route key reaching narrower routes%crates/bpf/src/compile.rs%s/r.prefix_len\(\) <= n.prefix_len\(\)/r.prefix_len() >= n.prefix_len()/%-p upf-bpf --lib;-p upf-bpf --test differential"
"first FAR not copied into the rule set%crates/bpf/src/compile.rs%s/v.hot \|= abi::RS_HOT_FAR0;//%-p upf-bpf --lib;-p upf-bpf --test differential"
"second PDR of a key not written to the pdrs table%crates/bpf/src/compile.rs%s/flat_map\(\|k\| k.pdrs.iter\(\).skip\(1\).copied\(\)\)/flat_map(|k| k.pdrs.iter().skip(2).copied())/%-p upf-bpf --lib;-p upf-bpf --test differential"
"ABI generator miscounts implicit values%crates/upf/build.rs%s/\(item.trim\(\), prev.value \+ 1\)/(item.trim(), prev.value + 2)/%-p upf-bpf --test abi"
"Network Instance address from the other side%crates/bpf/src/compile.rs%s/.and_then\(\|x\| x.side\(access\)\);/.and_then(|x| x.side(!access));/%-p upf-bpf --lib;-p upf-bpf --test differential"
"dropped packet charged to the QERs before%bpf/upf.bpf.c%s/refund\(r, uplink, len\);/(void)r;/%-p upf-bpf --test rate_limits"
"model: dropped packet charged to the QERs before%crates/upf/src/model/pipeline.rs%s/\*tat -= c;/let _ = (tat, c);/%-p upf-bpf --test rate_limits"
"XDP lets PFCP through the tunnel%bpf/include/protect.h%s/ \|\| f->dport == PORT_PFCP\)/)/%-p upf-bpf --test differential"
"model: protected addresses not checked%crates/upf/src/model/pipeline.rs%s/ours\(&cfg.local\) \|\| ours\(&cfg.protected\)/ours(&cfg.local)/%-p upf-bpf --test differential"
"model: TTL decremented without the IPv4 checksum%crates/upf/src/model/encap.rs%s/ip\[10..12\].copy_from_slice\(&\(!\(sum as u16\)\).to_be_bytes\(\)\);//%-p upf --lib;-p upf-bpf --test differential"
)

status=0
for b in "${bugs[@]}"; do
  IFS='%' read -r name file subst tests <<<"$b"
  [[ -z "$only" || "$name" == *"$only"* ]] || continue
  git -C "$scratch" checkout -q -- .
  before="$(sha256sum "$scratch/$file")"
  perl -0pi -e "$subst" "$scratch/$file"
  if [[ "$(sha256sum "$scratch/$file")" == "$before" ]]; then
    echo "$name: the substitution no longer applies to $file"; status=1; continue
  fi
  failed=()
  IFS=';' read -ra runs <<<"$tests"
  for t in "${runs[@]}"; do
    # shellcheck disable=SC2086
    if ! (cd "$scratch" && cargo test -q $t >"$scratch/.log" 2>&1); then
      if grep -q '^error\[' "$scratch/.log" || grep -q 'could not compile' "$scratch/.log"; then
        failed+=("$t (does not build)")
      else
        # The names cargo lists under "failures:".
        names="$(grep -E '^    [A-Za-z0-9_:]+$' "$scratch/.log" | sed 's/^ *//' | sort -u | paste -sd, - || true)"
        failed+=("$t: $names")
      fi
    fi
  done
  if ((${#failed[@]})); then
    printf '%s: caught by\n' "$name"; printf '    %s\n' "${failed[@]}"
  else
    echo "$name: NOT CAUGHT"; status=1
  fi
done
exit "$status"

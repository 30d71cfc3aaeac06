#!/usr/bin/env bash
# Which test catches which bug (docs/testing.md): in a scratch worktree of HEAD, put one
# deliberate bug at a time into the compiler (crates/bpf/src/compile.rs), the XDP
# programs (bpf/), the generated ABI or the reference model, run the tests that guard
# that code, and print the tests that failed. Each test runs once without any bug
# first: what fails there catches nothing (and is printed). A bug no test catches prints
# "NOT CAUGHT" and makes the script fail, as does one that no longer applies or does
# not build. Needs root (the data path's tests load BPF programs); about a minute per
# bug.
#
#   scripts/deliberate-bugs.sh            # every bug
#   scripts/deliberate-bugs.sh precedence # the bugs whose name contains "precedence"
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
only="${1:-}"
export CARGO_TARGET_DIR="$repo/target/deliberate-bugs"
# One run at a time, in one scratch path: runs share the target directory, where one's
# build would replace the other's test binaries, and the build script's record of the
# bpf/ files it read names their absolute paths (another tree's, unchanged, would leave
# this tree's changed programs unbuilt).
mkdir -p "$CARGO_TARGET_DIR"
exec 9>"$CARGO_TARGET_DIR/.run-lock"
flock -n 9 || { echo "waiting for the other run of $0 to end"; flock 9; }
scratch="$CARGO_TARGET_DIR/scratch"
if [[ -e "$scratch" ]]; then
  git -C "$repo" worktree remove --force "$scratch" 2>/dev/null || rm -rf "$scratch"
  git -C "$repo" worktree prune
fi
git -C "$repo" worktree add --detach -q "$scratch" HEAD
cleanup() { git -C "$repo" worktree remove --force "$scratch"; }
trap cleanup EXIT
# The differential tests with a fixed seed and fewer frames: the same run every time.
export UPF_DIFF_CASES=30000 UPF_DIFF_SEED=7 UPF_APP_DIFF_CASES=30000 UPF_APP_DIFF_SEED=7

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
"hot PDR's FAR not copied into the record%crates/bpf/src/compile.rs%s/if let Some\(f\) = pdr.far_id.and_then\(\|id\| self.far\(id\)\) \{/if let Some(f) = pdr.far_id.and_then(|_| None::<&types::far>) {/%-p upf-bpf --lib;-p upf-bpf --test differential"
"second PDR of a key not written to the pdrs table%crates/bpf/src/compile.rs%s/for \(i, id\) in k.pdrs.iter\(\).enumerate\(\) \{/for (i, id) in k.pdrs.iter().enumerate().filter(|(i, _)| *i != 1) {/%-p upf-bpf --lib;-p upf-bpf --test differential"
"ABI generator miscounts implicit values%crates/upf/build.rs%s/\(item.trim\(\), prev.value \+ 1\)/(item.trim(), prev.value + 2)/%-p upf-bpf --test abi"
"Network Instance address from the other side%crates/bpf/src/compile.rs%s/.and_then\(\|x\| x.side\(access\)\);/.and_then(|x| x.side(!access));/%-p upf-bpf --lib;-p upf-bpf --test differential"
"dropped packet charged to the QERs before%bpf/upf.bpf.c%s/\t\t\tmbr_refund\(at.pool, at.lane, at.q, d, len, k->now\);/\t\t\t(void)at;/%-p upf-bpf --test rate_limits"
"model: dropped packet charged to the QERs before%crates/upf/src/model/pipeline.rs%s/lease::mbr_refund\(lay, pool, l, Some\(&mbr\), d, len, now\);/let _ = (pool, l, mbr);/%-p upf --lib;-p upf-bpf --test rate_limits"
"XDP lets PFCP through the tunnel%bpf/include/protect.h%s/ \|\| f->dport == PORT_PFCP\)/)/%-p upf-bpf --test differential"
"model: protected addresses not checked%crates/upf/src/model/pipeline.rs%s/ours\(&cfg.local\) \|\| ours\(&cfg.protected\)/ours(&cfg.local)/%-p upf-bpf --test differential"
"model: TTL decremented without the IPv4 checksum%crates/upf/src/model/encap.rs%s/ip\[10..12\].copy_from_slice\(&\(!\(sum as u16\)\).to_be_bytes\(\)\);//%-p upf --lib;-p upf-bpf --test differential"
"MBR lease spent twice%bpf/include/lease.h%s/\t\tl->mbr_credit\[d\] = c - len;\n\t\treturn 1;/\t\treturn 1;/%-p upf-bpf --test rate_limits;-p upf-bpf --test differential"
"model: MBR lease spent twice%crates/upf/src/model/lease.rs%s/        l.mbr_credit\[d\] = c - len;\n        return true;/        return true;/%-p upf --lib;-p upf-bpf --test rate_limits"
"quota lease taken without charging the pool%bpf/include/lease.h%s/__sync_val_compare_and_swap\(&pool->quota, q, q - take\) == q/__sync_val_compare_and_swap(&pool->quota, q, q) == q/%-p upf-bpf --test differential"
"model: quota lease taken without charging the pool%crates/upf/src/model/lease.rs%s/pool.quota = q - i64::from\(take\);/pool.quota = q;/%-p upf --lib;-p upf-bpf --test differential"
"egress stage not counting downlink packets%bpf/upf.bpf.c%s/\t\tlane_count\(at.lane, k->up, len, k->now\);/\t\tif (k->up)\n\t\t\tlane_count(at.lane, k->up, len, k->now);/%-p upf-bpf --test differential;-p upf-bpf --test app_differential;-p upf-bpf --test direct_slots"
"cpumap stages not counting in the URRs%bpf/upf.bpf.c%s/(void count_urrs\(const struct upf_config \*cfg, const struct pkt \*k\)\n\{\n)/\1\tif (k->cpumap)\n\t\treturn;\n/%-p upf-bpf --test spread"
"app stage tail-calling past the rules stage%bpf/upf.bpf.c%s/(int app_stage\(.*?bpf_tail_call\(ctx, calls_map, )CALL_RULES\)/\1CALL_EGRESS)/s%-p upf-bpf --test app;-p upf-bpf --test app_differential"
"arming a URR under the record's sequence lock%crates/bpf/src/datapath.rs%s/self.entries.set_record_urr\(slot, set, clear, epoch\)/{ let mut r = r; r.flags = (r.flags | set) \& !clear; r.epoch = epoch; self.entries.write_record(slot, \&r) }/%-p upf-bpf --test arming"
"redirect hands UDP to upfd%bpf/upf.bpf.c%s/if \(!k->up \|\| k->f.proto != 6\)/if (!k->up)/%-p upf-bpf --test differential"
"model: SDF direction in matches like out%crates/upf/src/sdf.rs%s/if self.inbound \|\| self.ip_version/if self.ip_version/%-p upf --lib"
"SDF direction in compiled as a matching entry%crates/bpf/src/compile.rs%s/base.ip_version = NO_IP_VERSION;/base.ip_version = 0;/%-p upf-bpf --lib"
"ICMPv6 checksum without the length%bpf/include/icmp.h%s/sum \+= rest \+ bpf_htons\(58\) \+ bpf_htons\(8 \+ quote\);/sum += rest + bpf_htons(58);/%-p upf-bpf --test differential"
"ICMP session budget not charged%bpf/include/icmp.h%s/if \(!gcra\(&pool_of\(r\)->icmp_tat, cost, \(burst - 1\) \* cost, k->now, 0\)\)/if (0)/%-p upf-bpf --test rate_limits"
"model: ICMP error reports the link's MTU, not what fits before the tunnel%crates/upf/src/model/pipeline.rs%s/let fits = mtu.saturating_sub\(header.len\(\)\);/let fits = mtu;/%-p upf-bpf --test differential;-p upf-bpf --test rate_limits"
"model: ICMP error for an ICMP error%crates/upf/src/model/icmp.rs%s/Some\(t\) => !\[3, 4, 5, 11, 12\].contains\(t\),/Some(_) => true,/%-p upf-bpf --test differential"
"model: QoS monitoring answer without a packet not handed to upfd%crates/upf/src/model/packet.rs%s/    if qmp && off >= udp_end \{/    if false \&\& qmp \&\& off >= udp_end {/%-p upf-bpf --test differential"
"QoS monitoring round trip with the gNB's turnaround in it%crates/upf/src/qos_monitoring.rs%s/round_trip: ms\(d\(t1, t4\) - d\(t2, t3\)\),/round_trip: ms(d(t1, t4)),/%-p upf --lib"
"QoS path delay as the whole Echo round trip%crates/upfd/src/path_qos.rs%s/as_micros\(\) \/ 2000\)/as_micros() \/ 1000)/%-p upfd --bin upfd path_qos"
)

# Runs `cargo test -q ARGS` in the scratch tree. Prints nothing if it passed, "does not
# build", "hangs" (a test still running after 15 minutes: a loop a bug never ends), or
# the names cargo lists under "failures:" (comma-separated).
run() {
  # shellcheck disable=SC2086
  if ! (cd "$scratch" && cargo test -q --no-run $1 >"$scratch/.log" 2>&1); then
    echo "does not build"
    return
  fi
  # shellcheck disable=SC2086
  if (cd "$scratch" && timeout -k 10 900 cargo test -q $1 >"$scratch/.log" 2>&1); then
    return
  elif (($? == 124)); then
    echo "hangs"
  else
    local names
    names="$(grep -E '^    [A-Za-z0-9_:]+$' "$scratch/.log" | sed 's/^ *//' | sort -u | paste -sd, - || true)"
    echo "${names:-failed}"
  fi
}

selected=()
for b in "${bugs[@]}"; do
  IFS='%' read -r name _ <<<"$b"
  [[ -z "$only" || "$name" == *"$only"* ]] && selected+=("$b")
done

# Each test run once without any bug: a failure there is no catch.
declare -A base=()
for b in "${selected[@]}"; do
  IFS='%' read -r _ _ _ tests <<<"$b"
  IFS=';' read -ra runs <<<"$tests"
  for t in "${runs[@]}"; do
    [[ -n "${base[$t]+x}" ]] && continue
    base[$t]="$(run "$t")"
    [[ -z "${base[$t]}" ]] || echo "without any bug, $t: ${base[$t]}"
  done
done

status=0
for b in "${selected[@]}"; do
  IFS='%' read -r name file subst tests <<<"$b"
  git -C "$scratch" checkout -q -- .
  before="$(sha256sum "$scratch/$file")"
  perl -0pi -e "$subst" "$scratch/$file"
  if [[ "$(sha256sum "$scratch/$file")" == "$before" ]]; then
    echo "$name: the substitution no longer applies to $file"; status=1; continue
  fi
  caught=() pending=()
  IFS=';' read -ra runs <<<"$tests"
  for t in "${runs[@]}"; do
    got="$(run "$t")"
    if [[ "${base[$t]}" == "does not build" ]]; then
      pending+=("$t (does not build without the bug either)")
    elif [[ "$got" == "does not build" ]]; then
      echo "$name: the bug does not build ($t)"; status=1; continue 2
    elif [[ -n "$got" ]]; then
      # Only the tests that pass without the bug.
      new="$(comm -23 <(tr , '\n' <<<"$got" | sort) <(tr , '\n' <<<"${base[$t]}" | sort) | paste -sd, -)"
      if [[ -n "$new" ]]; then
        caught+=("$t: $new")
      else
        pending+=("$t (fails without the bug too: ${base[$t]})")
      fi
    fi
  done
  if ((${#caught[@]})); then
    printf '%s: caught by\n' "$name"; printf '    %s\n' "${caught[@]}"
  else
    echo "$name: NOT CAUGHT"; status=1
  fi
  if ((${#pending[@]})); then
    printf '    not counted: %s\n' "${pending[@]}"
  fi
done
exit "$status"

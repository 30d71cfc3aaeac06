#!/usr/bin/env bash
# The test command: installs what it needs (scripts/deps.sh), then checks formatting and
# lints, runs every test of the workspace with the external oracles required (tshark,
# scapy, pfcpsim), and smoke-runs each fuzz target. Needs root for the lab tests.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
start=$(date +%s)

scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
export UPF_REQUIRE_ORACLES=1
if [[ ! -d ../shared/interop/pcaps && -z "${UPF_INTEROP_PCAPS:-}" ]]; then
  echo "NOTE: ../shared/interop/pcaps is absent: the tests that replay real captures will say so and skip"
fi

step() { echo; echo "== $* ($(( $(date +%s) - start ))s)"; }

step "format"
cargo fmt --all --check
step "lints"
cargo clippy --workspace --all-targets -- -D warnings
step "tests"
cargo test --workspace --no-fail-fast
step "fuzz smoke (${UPF_FUZZ_SECONDS:-20}s per target)"
scripts/fuzz.sh "${UPF_FUZZ_SECONDS:-20}"
step "all tests passed"

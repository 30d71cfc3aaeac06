#!/usr/bin/env bash
# Install everything building and testing this repository needs on Debian 12, idempotently:
# apt packages, a Rust toolchain (stable for the product, nightly for cargo-fuzz), pinned
# cargo-fuzz, the Python venv of the test oracles (scapy), pfcpsim (Go), Chromium (the
# report's screenshot test) and the deployment checkers (scripts/ops-tools.sh: helm,
# kubeconform, promtool, hadolint). Quick when everything is already there. Run as root
# (or with sudo available) on a fresh machine.
# `scripts/deps.sh demo`: only what the demo needs (apt packages and stable Rust).
set -euo pipefail
mode="${1:-all}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

APT_PACKAGES=(
  build-essential pkg-config m4 curl ca-certificates git
  clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool linux-libc-dev
  iproute2 iputils-ping iputils-tracepath iperf3 tshark ethtool procps
  dnsmasq-base bind9-dnsutils openssl  # the lab data network's DNS and HTTPS, dig (application detection)
  fonts-dejavu-core  # the text of upfbench's report charts
  python3 python3-venv python3-pip
)
if [[ "$mode" != demo ]]; then
  APT_PACKAGES+=(chromium)  # the report's screenshot test (headless)
fi
CARGO_FUZZ_VERSION=0.13.2

as_root() {
  if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi
}

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if (( ${#missing[@]} )); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | as_root debconf-set-selections
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Rust: rustup's stable toolchain (the product) and nightly (cargo-fuzz only).
if ! command -v cargo >/dev/null && [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v rustup >/dev/null; then
  echo "deps: installing rustup"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain stable
  export PATH="$HOME/.cargo/bin:$PATH"
fi
rustup component list --toolchain stable --installed 2>/dev/null | grep -q '^clippy' || rustup component add --toolchain stable clippy rustfmt
if [[ "$mode" == demo ]]; then
  echo "deps: ok (demo)"
  exit 0
fi
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# Test oracles.
"$repo/scripts/python-venv.sh"
if [[ -x "$repo/scripts/pfcpsim.sh" ]]; then
  "$repo/scripts/pfcpsim.sh"
fi
"$repo/scripts/ops-tools.sh"  # helm, kubeconform and schemas, promtool, hadolint (deploy/)
echo "deps: ok"

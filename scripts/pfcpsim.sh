#!/usr/bin/env bash
# Build pfcpsim and pfcpctl (github.com/omec-project/pfcpsim, an independent SMF emulator)
# at a pinned version into <repo>/.tools/bin/, for crates/upfd/tests/pfcpsim.rs.
#
# Idempotent: does nothing when both binaries are there and were built from the same
# version (stamp file .tools/bin/.pfcpsim-version); --force rebuilds.
#
# The source comes from the Go module proxy into a scratch module in a temporary
# directory; nothing of pfcpsim is written into the repository but the two binaries under
# the ignored .tools/.
#
# Go: pfcpsim v1.4.4 needs Go >= 1.25 (its go.mod). The script uses, in this order:
#   1. $GO, `go` on PATH, /usr/local/go/bin/go, <repo>/.tools/go/bin/go, /usr/lib/go-1.*/bin/go:
#      the first one >= 1.25 as it is; else the first one >= 1.21 with
#      GOTOOLCHAIN=go$GO_TOOLCHAIN, so that the go command fetches the official toolchain
#      as the module golang.org/toolchain from the Go module proxy (checked against the
#      checksum database).
#   2. No Go >= 1.21 at all: the official tarball go$GO_TOOLCHAIN (SHA-256 pinned below)
#      into <repo>/.tools/go.
#   3. If that download fails: Debian's packages. Debian 12's golang-go is 1.19, too old
#      to build pfcpsim and too old to fetch a toolchain, so on bookworm the script enables
#      bookworm-backports and installs the newest golang-1.NN-go there (1.23), which then
#      fetches go$GO_TOOLCHAIN as in 1.  Needs root (or sudo).
set -euo pipefail

PFCPSIM_VERSION=v1.4.4
PFCPSIM_MODULE=github.com/omec-project/pfcpsim
GO_MIN=1.25           # pfcpsim v1.4.4's go.mod: go 1.25.0
GO_TOOLCHAIN=1.26.1   # official release used when the local Go is older or absent
declare -A GO_TARBALL_SHA256=(
    [amd64]=031f088e5d955bab8657ede27ad4e3bc5b7c1ba281f05f245bcc304f327c987a
    [arm64]=a290581cfe4fe28ddd737dde3095f3dbeb7f2e4065cab4eae44dfc53b760c2f7
)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$repo/.tools/bin"
stamp="$bin/.pfcpsim-version"

say() { echo "pfcpsim.sh: $*" >&2; }
die() { say "$*"; exit 1; }

if [[ "${1:-}" != --force && -x "$bin/pfcpsim" && -x "$bin/pfcpctl" && -f "$stamp" \
    && "$(cat "$stamp")" == "$PFCPSIM_VERSION" ]]; then
    say "pfcpsim $PFCPSIM_VERSION already in $bin"
    exit 0
fi

# go_version, version_ge, pick_go (GO_BIN, GOTOOLCHAIN).
# shellcheck source=scripts/go-pick.sh
. "$repo/scripts/go-pick.sh"

arch() {
    case "$(uname -m)" in
        x86_64) echo amd64 ;;
        aarch64 | arm64) echo arm64 ;;
        *) uname -m ;;
    esac
}

as_root() {
    if [[ "$(id -u)" == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        return 1
    fi
}

install_go_tarball() {
    local a sum url tmp
    a="$(arch)"
    sum="${GO_TARBALL_SHA256[$a]:-}"
    [[ -n "$sum" ]] || { say "no pinned Go tarball for $a"; return 1; }
    command -v curl >/dev/null || { say "curl missing: cannot fetch the Go tarball"; return 1; }
    url="https://dl.google.com/go/go$GO_TOOLCHAIN.linux-$a.tar.gz"
    tmp="$(mktemp -d)"
    say "fetching $url"
    if ! curl -fsSL --connect-timeout 15 --max-time 600 -o "$tmp/go.tgz" "$url"; then
        rm -rf "$tmp"
        say "could not fetch $url"
        return 1
    fi
    if ! echo "$sum  $tmp/go.tgz" | sha256sum -c --quiet -; then
        rm -rf "$tmp"
        say "checksum mismatch for $url"
        return 1
    fi
    rm -rf "$repo/.tools/go"
    mkdir -p "$repo/.tools"
    tar -C "$repo/.tools" -xzf "$tmp/go.tgz"
    rm -rf "$tmp"
}

install_go_debian() {
    local codename pkg
    command -v apt-get >/dev/null || return 1
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    export DEBIAN_FRONTEND=noninteractive
    if [[ "$codename" == bookworm ]] \
        && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        say "enabling bookworm-backports for golang-1.23-go"
        echo "deb http://deb.debian.org/debian bookworm-backports main" \
            | as_root tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null || return 1
    fi
    as_root apt-get update -q >/dev/null || return 1
    pkg="$(apt-cache pkgnames golang-1. | grep -E '^golang-1\.[0-9]+-go$' | sort -V | tail -n1)"
    [[ -n "$pkg" ]] || return 1
    say "installing Debian's $pkg"
    as_root apt-get install -y -q "$pkg" >/dev/null || return 1
}

if ! pick_go; then
    say "no Go >= 1.21 found"
    if ! { install_go_tarball && pick_go; } && ! { install_go_debian && pick_go; }; then
        die "could not obtain Go >= 1.21: install Go $GO_MIN or newer (https://go.dev/dl) and rerun, or set GO=/path/to/go"
    fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
# Our own environment must not leak in: a GOFLAGS=-mod=vendor or a GOWORK would break the
# scratch module.
export GOFLAGS=-buildvcs=false GOWORK=off CGO_ENABLED=0
"$GO_BIN" mod init scratch
cat >tools.go <<EOF
//go:build tools

package tools

import (
	_ "$PFCPSIM_MODULE/cmd/pfcpctl"
	_ "$PFCPSIM_MODULE/cmd/pfcpsim"
)
EOF
"$GO_BIN" get "$PFCPSIM_MODULE@$PFCPSIM_VERSION"
# `go get MODULE@VERSION` records the module only; tidy adds the go.sum lines of the
# packages tools.go imports (at the versions pfcpsim's own go.mod requires).
"$GO_BIN" mod tidy
mkdir -p out
"$GO_BIN" build -trimpath -o out/ "$PFCPSIM_MODULE/cmd/pfcpsim" "$PFCPSIM_MODULE/cmd/pfcpctl"
mkdir -p "$bin"
mv -f out/pfcpsim out/pfcpctl "$bin/"
echo "$PFCPSIM_VERSION" >"$stamp"
say "built pfcpsim and pfcpctl $PFCPSIM_VERSION into $bin ($("$GO_BIN" version))"

# shellcheck shell=bash disable=SC2154,SC2153,SC2034  # repo, GO_MIN, GO_TOOLCHAIN are the caller's; GO_BIN is for it
# Sourced by scripts/pfcpsim.sh and scripts/ops-tools.sh: which Go builds their tools.
# The caller sets repo, GO_MIN (what the tools' go.mod files ask for), GO_TOOLCHAIN (the
# release fetched from the Go module proxy when the local Go is older) and say().
#
# pick_go sets GO_BIN and GOTOOLCHAIN from the Go installations present, in this order:
# $GO, `go` on PATH, /usr/local/go, <repo>/.tools/go, Debian's /usr/lib/go-1.*: the first
# one >= GO_MIN as it is, else the first one >= 1.21 with GOTOOLCHAIN=go$GO_TOOLCHAIN
# (the go command fetches it, checked against the checksum database). Returns 1 if none.

# "1.26.8" from "go1.26.8", "go1.25rc1", "go1.19"; empty if not a Go.
go_version() {
    local v
    v="$(GOTOOLCHAIN=local GOFLAGS="" "$1" env GOVERSION 2>/dev/null)" || return 0
    v="${v#go}"
    echo "${v%%[!0-9.]*}"
}

# version_ge A B: A >= B for dotted versions.
version_ge() {
    [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

go_candidates() {
    [[ -n "${GO:-}" ]] && echo "$GO"
    command -v go 2>/dev/null || true
    echo /usr/local/go/bin/go
    echo "$repo/.tools/go/bin/go"
    printf '%s\n' /usr/lib/go-1.*/bin/go | sort -rV
    echo /usr/lib/go/bin/go
}

pick_go() {
    local c v old=""
    while read -r c; do
        [[ -x "$c" ]] || continue
        v="$(go_version "$c")"
        [[ -n "$v" ]] || continue
        if version_ge "$v" "$GO_MIN"; then
            GO_BIN="$c"
            export GOTOOLCHAIN=local
            say "using $c (go$v)"
            return 0
        fi
        if [[ -z "$old" ]] && version_ge "$v" 1.21; then
            old="$c"
        fi
    done < <(go_candidates)
    if [[ -n "$old" ]]; then
        GO_BIN="$old"
        export GOTOOLCHAIN="go$GO_TOOLCHAIN"
        say "using $old (go$(go_version "$old")) with GOTOOLCHAIN=$GOTOOLCHAIN from the Go module proxy"
        return 0
    fi
    return 1
}

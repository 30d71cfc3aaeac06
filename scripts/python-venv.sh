#!/usr/bin/env bash
# Create or update the Python venv at <repo>/.venv with the pinned packages of
# tests/oracles/requirements.txt (scapy, used as an oracle by the codec tests).
#
# Idempotent: when the venv exists and was last installed from the same requirements file,
# it does nothing. Set PYTHON to choose the interpreter (default python3).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
req="$repo/tests/oracles/requirements.txt"
stamp="$venv/.requirements.sha256"
python="${PYTHON:-python3}"

want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python3" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
    && "$venv/bin/python3" -c 'import scapy' 2>/dev/null; then
    exit 0
fi

make_venv() {
    "$python" -m venv "$venv"
}

if [[ ! -x "$venv/bin/python3" ]] || ! "$venv/bin/python3" -m pip --version >/dev/null 2>&1; then
    rm -rf "$venv"
    if ! make_venv 2>/dev/null; then
        # Debian ships venv and ensurepip separately.
        rm -rf "$venv"
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
            echo "python-venv.sh: '$python -m venv' failed; installing python3-venv" >&2
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -q python3-venv python3-pip >/dev/null \
                || { apt-get update -q >/dev/null && apt-get install -y -q python3-venv python3-pip >/dev/null; }
            make_venv
        else
            echo "python-venv.sh: '$python -m venv' failed; install python3-venv (apt-get install python3-venv)" >&2
            exit 1
        fi
    fi
fi

"$venv/bin/python3" -m pip install --disable-pip-version-check -q -r "$req"
echo "$want" >"$stamp"
echo "python-venv.sh: $venv ready ($("$venv/bin/python3" -c 'import scapy; print("scapy", scapy.VERSION)'))"

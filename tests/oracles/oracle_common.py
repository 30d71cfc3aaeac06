"""Shared plumbing of the scapy oracles (pfcp_oracle.py, gtpu_oracle.py).

The Rust tests in crates/pfcp/tests/scapy.rs and crates/gtpu/tests/scapy.rs run these
scripts with the venv's python (scripts/python-venv.sh) in one of three modes:

  version   print {"scapy": "<version>"}; fails when scapy cannot be imported
  build     scapy builds messages; print one JSON line per message:
            {"name": ..., "hex": <octets>, "expect": {<the values scapy was given>}}
  dissect   read JSON lines {"name": ..., "hex": ...} on stdin, dissect each with scapy
            and print {"name": ..., "layers": [<layer>, ...]} (or {"name", "error"})

A dissected layer (or IE) is {"class": <scapy class>, "fields": {name: value},
"ies": [...]} where "ies" is present for the PacketListField IE_list of PFCP grouped IEs
and message bodies (and of GTP bodies). Values: integers as integers (enum fields give
their number, not the label), IP addresses as text, byte strings as lowercase hex.
Fields of a ConditionalField whose condition is false are left out. Every layer scapy
built is listed, so a "Raw" or "Padding" layer shows octets scapy did not understand.
"""

import json
import sys

try:
    import scapy
    from scapy.packet import NoPayload, Packet
except ImportError as e:  # the Rust side reports this as "scapy missing"
    print(f"scapy missing: {e}", file=sys.stderr)
    sys.exit(3)


def value(v):
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return v
    if isinstance(v, Packet):
        return node(v)
    if isinstance(v, list):
        return [value(x) for x in v]
    try:
        return int(v)  # FlagValue, EnumValue ...
    except (TypeError, ValueError):
        return str(v)


def node(p):
    """One layer or IE: its class, the fields it carries, and its IEs."""
    d = {"class": type(p).__name__, "fields": {}}
    for k, v in p.fields.items():
        if k == "IE_list":
            d["ies"] = [node(x) for x in (v or [])]
            continue
        v = value(v)
        if v is not None:
            d["fields"][k] = v
    return d


def layers(p):
    out = []
    while p is not None and not isinstance(p, NoPayload):
        out.append(node(p))
        p = p.payload
    return out


def emit(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")


def main(build, dissect):
    """Dispatch on argv[1]: version, build, dissect."""
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "version":
        emit({"scapy": scapy.VERSION})
    elif mode == "build":
        for name, pkt, expect in build():
            emit({"name": name, "hex": bytes(pkt).hex(), "expect": expect})
    elif mode == "dissect":
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            req = json.loads(line)
            try:
                emit({"name": req["name"], "layers": layers(dissect(bytes.fromhex(req["hex"])))})
            except Exception as e:  # report, let the Rust test fail with the name
                emit({"name": req["name"], "error": f"{type(e).__name__}: {e}"})
    else:
        print(f"usage: {sys.argv[0]} version|build|dissect", file=sys.stderr)
        sys.exit(2)

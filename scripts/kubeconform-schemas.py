#!/usr/bin/env python3
"""JSON schemas for kubeconform, made from registry packages (no access to GitHub needed).

    kubeconform-schemas.py k8s WHEEL K8S_VERSION OUTDIR
        The Kubernetes schemas of K8S_VERSION (e.g. 1.34.0) out of the PyPI wheel of
        kubernetes-validate (kubernetes_validate/kubernetes-json-schema/vX-local-strict/)
        into OUTDIR/vX-standalone-strict/, kubeconform's default layout
        ({kind}-{group}-{version}.json). The wheel's files refer to one another by absolute
        paths under https://kubernetes.io/api/ ("$ref": "/api/_definitions.json#/$defs/...",
        "$id": "https://kubernetes.io/api/..."), which kubeconform would try to download:
        the refs become relative to the file ("_definitions.json#/$defs/...") and the $ids
        are dropped, so that they resolve to the file beside it.

    kubeconform-schemas.py crd OUTDIR CRD.yaml...
        Every version of every CustomResourceDefinition in the files into
        OUTDIR/{group}/{kind}_{version}.json (lower case), as kubeconform's
        openapi2jsonschema.py does with its strict options: the version's openAPIV3Schema,
        apiVersion and kind pinned to the CRD's, "nullable" as a null type, and every object
        with properties closed (additionalProperties false) unless it preserves unknown
        fields or says otherwise, so that a misspelt key is an error.

Needs PyYAML for the crd command (scripts/ops-tools.sh runs this with its venv).
"""

import json
import os
import sys
import zipfile

PREFIX = "kubernetes_validate/kubernetes-json-schema/"


def k8s(wheel, version, outdir):
    version = version.lstrip("v")
    src = f"{PREFIX}v{version}-local-strict/"
    dst = os.path.join(outdir, f"v{version}-standalone-strict")
    os.makedirs(dst, exist_ok=True)
    n = 0
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if not name.startswith(src) or not name.endswith(".json"):
                continue
            text = z.read(name).decode()
            text = text.replace('"/api/_definitions.json#', '"_definitions.json#')
            doc = json.loads(text)
            doc.pop("$id", None)
            with open(os.path.join(dst, os.path.basename(name)), "w") as f:
                json.dump(doc, f)
            n += 1
    if n == 0:
        sys.exit(f"kubeconform-schemas.py: no {src} in {wheel}")
    leftover = []
    for name in os.listdir(dst):
        with open(os.path.join(dst, name)) as f:
            if '"/api/' in f.read():
                leftover.append(name)
    if leftover:
        sys.exit(f"kubeconform-schemas.py: absolute refs left in {leftover[:5]}")
    print(f"kubeconform-schemas.py: {n} schemas of Kubernetes {version} in {dst}")


def strict(node):
    """openapi2jsonschema's conversions on a schema node, in place, through its subschemas."""
    if not isinstance(node, dict):
        return
    for sub in (node.get("properties") or {}).values():
        strict(sub)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            strict(node[key])
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(key) or []:
            strict(sub)
    if node.pop("nullable", False) and "type" in node:
        t = node["type"]
        node["type"] = (t if isinstance(t, list) else [t]) + ["null"]
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        node["additionalProperties"] = False


def crd(outdir, files):
    import yaml

    n = 0
    for path in files:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for d in docs:
            if d.get("kind") != "CustomResourceDefinition":
                continue
            group = d["spec"]["group"]
            kind = d["spec"]["names"]["kind"]
            for v in d["spec"]["versions"]:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                if not schema:
                    continue
                schema = json.loads(json.dumps(schema))
                props = schema.setdefault("properties", {})
                props["apiVersion"] = {"type": "string", "enum": [f"{group}/{v['name']}"]}
                props["kind"] = {"type": "string", "enum": [kind]}
                props.setdefault("metadata", {"type": "object"})
                schema.setdefault("type", "object")
                strict(schema)
                # metadata is checked by Kubernetes' own ObjectMeta rules, not the CRD's.
                props["metadata"] = {"type": "object"}
                schema["$schema"] = "http://json-schema.org/draft-04/schema#"
                d_out = os.path.join(outdir, group)
                os.makedirs(d_out, exist_ok=True)
                out = os.path.join(d_out, f"{kind.lower()}_{v['name']}.json")
                with open(out, "w") as f:
                    json.dump(schema, f, indent=1)
                print(f"kubeconform-schemas.py: {out}")
                n += 1
    if n == 0:
        sys.exit(f"kubeconform-schemas.py: no CRD schema in {files}")


def main(argv):
    if len(argv) == 5 and argv[1] == "k8s":
        k8s(argv[2], argv[3], argv[4])
    elif len(argv) >= 4 and argv[1] == "crd":
        crd(argv[2], argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)

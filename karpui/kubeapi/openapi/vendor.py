"""Refresh the vendored schemas (a maintainer's tool; nothing runs it at serve time, nothing is downloaded then).

    python -m karpui.kubeapi.openapi.vendor --swagger swagger.json \\
        --crd karpenter.sh_nodepools.yaml --crd karpenter.sh_nodeclaims.yaml ... [--crd-version NAME=FILE ...]

`--swagger` is Kubernetes' api/openapi-spec/swagger.json of the release the API stands for; only the definitions
the served kinds reach are kept (kubernetes.json; with `--extend`, the definitions already there stay as they are
and only those a newly served kind reaches are added from this file), and their strategic-merge-patch and server-side-apply list rules
are written for the pure engine (provisioner/apimachinery/strategies.json, `patch_strategies`). `--crd` files are CustomResourceDefinitions whose versions are
kept with their schemas and printer columns (crds.json); `--crd-version v1beta1=FILE` takes one more version of a
CRD from another release's file (Karpenter stopped serving v1beta1 after v1.0). See NOTICE.md for the sources used.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
# The built-in kinds served (karpui.kinds.resources), their lists, and what the API answers with besides.
ROOTS = (
    "io.k8s.api.core.v1.Pod",
    "io.k8s.api.core.v1.Node",
    "io.k8s.api.core.v1.Namespace",
    "io.k8s.api.core.v1.Event",
    "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.apps.v1.ReplicaSet",
    "io.k8s.api.apps.v1.DaemonSet",
    "io.k8s.api.policy.v1.PodDisruptionBudget",
    "io.k8s.api.policy.v1.Eviction",
    "io.k8s.api.autoscaling.v1.Scale",
    "io.k8s.api.resource.v1.DeviceClass",
    "io.k8s.api.resource.v1.ResourceClaim",
    "io.k8s.api.resource.v1.ResourceClaimTemplate",
    "io.k8s.api.resource.v1.ResourceSlice",
    "io.k8s.api.coordination.v1.Lease",
    "io.k8s.api.core.v1.ServiceAccount",
    "io.k8s.api.rbac.v1.ClusterRole",
    "io.k8s.api.rbac.v1.ClusterRoleBinding",
    "io.k8s.api.core.v1.PersistentVolumeClaim",
    "io.k8s.api.core.v1.PersistentVolume",
    "io.k8s.api.storage.v1.StorageClass",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
)
_REF = re.compile(r'"\$ref":\s*"#/definitions/([^"]+)"')


def trim_definitions(swagger: dict[str, Any], have: dict[str, Any] | None = None) -> dict[str, Any]:
    """The definitions the roots (and their lists) reach through $ref, nothing else; with `have`, only those of
    the roots it lacks, and none that it has."""
    definitions = swagger["definitions"]
    have = have or {}
    wanted = [name for root in ROOTS for name in (root, f"{root}List") if name in definitions and root not in have]
    kept: dict[str, Any] = {}
    while wanted:
        name = wanted.pop()
        if name in kept or name in have:
            continue
        kept[name] = definitions[name]
        wanted.extend(_REF.findall(json.dumps(definitions[name])))
    return dict(sorted(kept.items()))


STRATEGIES = HERE.parent.parent.parent / "provisioner" / "apimachinery" / "strategies.json"


def _field_rule(prop: dict[str, Any]) -> list[str] | None:
    """[child type, container ("", "list" or "map"), patch strategy, merge key] of one property, or None for a
    scalar without a patch strategy (nothing a strategic merge needs to know)."""
    container, target = "", prop
    if prop.get("type") == "array":
        container, target = "list", prop.get("items") or {}
    elif isinstance(prop.get("additionalProperties"), dict):
        container, target = "map", prop["additionalProperties"]
    child = _REF.findall(json.dumps(target))
    child_type = child[0] if "$ref" in target and child else ""
    strategy = str(prop.get("x-kubernetes-patch-strategy", ""))
    key = str(prop.get("x-kubernetes-patch-merge-key", ""))
    if not child_type and not strategy:
        return None
    return [child_type, container, strategy, key]


def patch_strategies(definitions: dict[str, Any]) -> dict[str, Any]:
    """Each served built-in kind's root type, and for every type the fields a strategic merge patch walks into or
    merges specially (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`)."""
    roots: dict[str, str] = {}
    for name, schema in definitions.items():
        kinds = schema.get("x-kubernetes-group-version-kind") or []
        for gvk in kinds if len(kinds) == 1 else []:  # DeleteOptions, WatchEvent: in every group, never patched
            if name in ROOTS:
                api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                roots[f"{api_version}/{gvk['kind']}"] = name
                if gvk["group"] == "resource.k8s.io":  # served as v1beta1 too, with the same shape
                    roots[f"resource.k8s.io/v1beta1/{gvk['kind']}"] = name
    types: dict[str, dict[str, list[str]]] = {}
    for name, schema in definitions.items():
        rules = {}
        for field, prop in (schema.get("properties") or {}).items():
            rule = _field_rule(prop)
            if rule is not None:
                rules[field] = rule
        if rules:
            types[name] = rules
    return {"roots": dict(sorted(roots.items())), "types": types, "lists": list_types(definitions)}


def list_types(definitions: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """For every type, its list fields that server-side apply merges (`x-kubernetes-list-type` set, or map with its
    `x-kubernetes-list-map-keys`), as [list type, key...]; every other list is atomic, replaced whole."""
    lists: dict[str, dict[str, list[str]]] = {}
    for name, schema in definitions.items():
        rules = {
            field: [prop["x-kubernetes-list-type"], *prop.get("x-kubernetes-list-map-keys", [])]
            for field, prop in (schema.get("properties") or {}).items()
            if prop.get("type") == "array" and prop.get("x-kubernetes-list-type") in ("set", "map")
        }
        if rules:
            lists[name] = rules
    return lists


def crd_versions(crd: dict[str, Any], only: str | None = None) -> list[dict[str, Any]]:
    return [
        {
            "name": version["name"],
            "schema": version["schema"]["openAPIV3Schema"],
            "printerColumns": version.get("additionalPrinterColumns", []),
        }
        for version in crd["spec"]["versions"]
        if version.get("served", True) and (only is None or version["name"] == only)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--swagger", type=Path, help="regenerate kubernetes.json and the patch strategies from it")
    parser.add_argument(
        "--merge", action="store_true", help="update crds.json with the given CRDs' versions, keeping the others"
    )
    parser.add_argument("--crd", type=Path, action="append", default=[])
    parser.add_argument("--crd-version", action="append", default=[], help="VERSION=FILE: one more served version")
    parser.add_argument("--extend", action="store_true", help="keep kubernetes.json's definitions, add new ones")
    args = parser.parse_args()
    if args.swagger is not None:
        swagger = json.loads(args.swagger.read_text())
        if args.extend:
            kept = json.loads((HERE / "kubernetes.json").read_text())["definitions"]
            definitions = dict(sorted({**trim_definitions(swagger, kept), **kept}.items()))
        else:
            definitions = trim_definitions(swagger)
        (HERE / "kubernetes.json").write_text(
            json.dumps({"definitions": definitions}, separators=(",", ":"), sort_keys=True) + "\n"
        )
        STRATEGIES.write_text(json.dumps(patch_strategies(definitions), separators=(",", ":"), sort_keys=True) + "\n")
    crds: dict[str, dict[str, Any]] = json.loads((HERE / "crds.json").read_text()) if args.merge else {}
    for path in args.crd:
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        versions = crd_versions(crd)
        kept = [
            v
            for v in (crds.get(spec["names"]["kind"]) or {}).get("versions", [])
            if v["name"] not in {n["name"] for n in versions}
        ]
        crds[spec["names"]["kind"]] = {
            "group": spec["group"],
            "kind": spec["names"]["kind"],
            "plural": spec["names"]["plural"],
            "versions": versions + kept,
        }
    for item in args.crd_version:
        version, _, file = item.partition("=")
        crd = yaml.safe_load(Path(file).read_text())
        entry = crds[crd["spec"]["names"]["kind"]]
        if all(v["name"] != version for v in entry["versions"]):
            entry["versions"] += crd_versions(crd, only=version)
    (HERE / "crds.json").write_text(json.dumps(crds, separators=(",", ":"), sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

"""Writes provisioner/manifests/kubernetes_types.json: the field names and types of the Kubernetes objects `karp
apply` accepts, read from the official `kubernetes` client's models (generated from the API server's OpenAPI).

Run `python -m tests.security.kubernetes_types` after upgrading the `kubernetes` client; a test fails until the
committed file matches it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kubernetes.client import models

OUTPUT = Path(__file__).resolve().parents[2] / "provisioner" / "manifests" / "kubernetes_types.json"
# The kinds validated field by field, by (apiVersion, kind): the core workload kinds the lab runs, and volumes.
ROOTS = {
    "v1/Pod": "V1Pod",
    "v1/Namespace": "V1Namespace",
    "v1/Node": "V1Node",
    "apps/v1/Deployment": "V1Deployment",
    "apps/v1/ReplicaSet": "V1ReplicaSet",
    "apps/v1/DaemonSet": "V1DaemonSet",
    "policy/v1/PodDisruptionBudget": "V1PodDisruptionBudget",
    "v1/ServiceAccount": "V1ServiceAccount",
    "rbac.authorization.k8s.io/v1/ClusterRole": "V1ClusterRole",
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding": "V1ClusterRoleBinding",
    "v1/PersistentVolumeClaim": "V1PersistentVolumeClaim",
    "v1/PersistentVolume": "V1PersistentVolume",
    "storage.k8s.io/v1/StorageClass": "V1StorageClass",
}
_NESTED = re.compile(r"^(?:list\[(.+)\]|dict\(str, (.+)\))$")


def schema() -> dict[str, Any]:
    types: dict[str, dict[str, str]] = {}
    pending = list(ROOTS.values())
    while pending:
        name = pending.pop()
        if name in types:
            continue
        model = getattr(models, name)
        fields = {model.attribute_map[attr]: kind for attr, kind in sorted(model.openapi_types.items())}
        types[name] = dict(sorted(fields.items()))
        for kind in fields.values():
            inner = kind
            while match := _NESTED.match(inner):
                inner = match.group(1) or match.group(2)
            if hasattr(models, inner):
                pending.append(inner)
    return {"kinds": ROOTS, "types": dict(sorted(types.items()))}


def render() -> str:
    return json.dumps(schema(), indent=1, sort_keys=False) + "\n"


if __name__ == "__main__":
    OUTPUT.write_text(render())
    print(f"wrote {OUTPUT} ({len(schema()['types'])} types)")

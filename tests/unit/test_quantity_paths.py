"""canonical_quantities: every quantity a built-in kind holds, in canonical form, as kube-apiserver stores it; the
paths kept in step with the OpenAPI document the API serves (its resource.Quantity fields)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from karpui.kinds.resources import BY_KIND
from provisioner.quantity import QUANTITY_PATHS, canonical_quantities

OPENAPI = Path(__file__).resolve().parents[2] / "karpui" / "kubeapi" / "openapi" / "kubernetes.json"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def _quantity_paths(definitions: dict[str, Any], name: str, path: str = "", seen: frozenset[str] = frozenset()):
    if name == QUANTITY:
        yield path
        return
    if name in seen or name not in definitions:
        return
    for field, schema in (definitions[name].get("properties") or {}).items():
        here = f"{path}.{field}" if path else field
        for suffix, inner in (
            ("", schema),
            ("[]", schema.get("items") or {}),
            ("{}", schema.get("additionalProperties")),
        ):
            if suffix and schema.get("type") != ("array" if suffix == "[]" else "object"):
                continue
            ref = (inner or {}).get("$ref") or ((inner or {}).get("allOf") or [{}])[0].get("$ref")
            if ref:
                yield from _quantity_paths(definitions, ref.rsplit("/", 1)[1], here + suffix, seen | {name})
                break


def test_the_paths_are_every_quantity_field_of_every_built_in_kind_karpui_serves() -> None:
    definitions = json.loads(OPENAPI.read_text())["definitions"]
    by_kind = {
        gvk["kind"]: name
        for name, schema in definitions.items()
        for gvk in schema.get("x-kubernetes-group-version-kind", [])
        if (gvk["kind"], gvk["group"]) in {(kind, r.group) for kind, r in BY_KIND.items()}
        and gvk["version"] in BY_KIND[gvk["kind"]].versions
    }
    assert {"Pod", "Node", "Deployment", "ResourceSlice", "Namespace"} <= set(by_kind)
    from_openapi = {kind: sorted(_quantity_paths(definitions, name)) for kind, name in by_kind.items()}
    assert {kind: paths for kind, paths in from_openapi.items() if paths} == {
        kind: sorted(paths) for kind, paths in QUANTITY_PATHS.items()
    }


def deployment(resources: dict[str, Any], **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {"note": "1000m"}},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {"containers": [{"name": "web", "image": "nginx", "resources": resources}], **pod_spec}
            },
        },
    }


def test_a_deployments_pod_template_is_stored_with_canonical_quantities() -> None:
    given = deployment(
        {
            "requests": {"cpu": 0.5, "memory": "1.5Gi", "example.com/gpu": 1},
            "limits": {"cpu": "1000m", "memory": 2048 * 2**20},
        },
        volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "2048Mi"}}],
        initContainers=[
            {
                "name": "init",
                "env": [
                    {
                        "name": "MEM",
                        "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1024Ki"}},
                    }
                ],
            }
        ],
    )
    before = copy.deepcopy(given)
    stored = canonical_quantities(given)
    assert given == before  # a copy: what was written is left alone (the last-applied annotation keeps it)
    spec = stored["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1536Mi", "example.com/gpu": "1"},
        "limits": {"cpu": "1", "memory": "2147483648"},  # a JSON number is decimal: 2Gi in bytes, not "2Gi"
    }
    assert spec["volumes"][0]["emptyDir"]["sizeLimit"] == "2Gi"
    assert spec["initContainers"][0]["env"][0]["valueFrom"]["resourceFieldRef"]["divisor"] == "1Mi"
    assert stored["metadata"]["annotations"] == {"note": "1000m"}  # not a quantity field
    assert canonical_quantities(stored) == stored  # canonical already: nothing changes


def test_a_nodes_status_and_a_resource_slices_capacity_are_canonical() -> None:
    node = {"kind": "Node", "status": {"capacity": {"cpu": "4000m", "pods": 110}, "allocatable": {"memory": "8192Mi"}}}
    assert canonical_quantities(node)["status"] == {
        "capacity": {"cpu": "4", "pods": "110"},
        "allocatable": {"memory": "8Gi"},
    }
    slice_ = {
        "kind": "ResourceSlice",
        "spec": {
            "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "80Gi"}, "cores": {"value": 1000}}}],
            "sharedCounters": [{"name": "pool", "counters": {"memory": {"value": "1024Mi"}}}],
        },
    }
    stored = canonical_quantities(slice_)["spec"]
    assert stored["devices"][0]["capacity"] == {"memory": {"value": "80Gi"}, "cores": {"value": "1k"}}
    assert stored["sharedCounters"][0]["counters"]["memory"]["value"] == "1Gi"


@pytest.mark.parametrize(
    "obj",
    [
        # Custom resources keep what was written, as kube-apiserver keeps a CRD's fields.
        {"kind": "NodeClaim", "spec": {"resources": {"requests": {"cpu": "1000m"}}}},
        {"kind": "NodePool", "spec": {"limits": {"cpu": "1000"}}},
        # What is not a quantity, or not where one is, is left for validation to name.
        deployment({"requests": {"cpu": "lots", "memory": True, "pods": None}}),
        deployment({"requests": ["1"]}),
        {"kind": "Pod", "spec": {"containers": {"name": "not-a-list"}}},
        {"kind": "Pod", "spec": None},
        {"kind": "Pod"},
    ],
)
def test_what_is_not_a_built_in_quantity_is_left_as_it_is(obj: dict[str, Any]) -> None:
    assert canonical_quantities(obj) == obj

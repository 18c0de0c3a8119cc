"""A lab cluster in memory from manifests, for tests of controllers over the kwok catalog without the database."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from provisioner.catalog import InstanceType
from provisioner.catalog.kwok import kwok_catalog
from provisioner.lab import Lab, LabConfig
from provisioner.manifests.nodeclass import parse_nodeclass
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.options import KarpenterOptions

START = 1_800_000_000.0
KWOK_CLASS = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}
KWOK_REF = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}


def nodepool_doc(name: str = "default", *, generation: int = 1, **spec: Any) -> dict[str, Any]:
    """A v1 NodePool over the default KWOKNodeClass; `spec` fields replace the defaults (template.spec merges)."""
    template_spec = {"nodeClassRef": KWOK_REF, "requirements": [], **spec.pop("template_spec", {})}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "generation": generation},
        "spec": {"template": {"spec": template_spec}, **spec},
    }


def deployment(name: str = "inflate", replicas: int = 1, cpu: str = "1", **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                    **pod_spec,
                },
            },
        },
    }


def config_of(
    documents: list[dict[str, Any]],
    options: KarpenterOptions | None = None,
    types: list[InstanceType] | None = None,
) -> LabConfig:
    pools = [parse_nodepool(d) for d in documents if d["kind"] == "NodePool"]
    classes = [parse_nodeclass(d) for d in documents if d["kind"] in ("KWOKNodeClass", "EC2NodeClass")]
    return LabConfig(
        nodepools=pools,
        nodepool_uids={p.name: f"uid-{p.name}" for p in pools},
        nodeclasses={(c.kind, c.name): c for c in classes},
        catalogs={"KWOKNodeClass": list(kwok_catalog().instance_types) if types is None else list(types)},
        options=options or KarpenterOptions(),
    )


def lab(
    *documents: Mapping[str, Any] | str,
    options: KarpenterOptions | None = None,
    now: float = START,
    types: list[InstanceType] | None = None,
) -> Lab:
    """A lab holding the documents (YAML text or dicts): NodePools and node classes become its configuration (a
    KWOKNodeClass `default` is added when none is given), everything else is created in its store. Its node class
    offers `types` (the kwok catalog by default)."""
    docs: list[dict[str, Any]] = []
    for document in documents:
        docs.extend(yaml.safe_load_all(document) if isinstance(document, str) else [dict(document)])
    if not any(d["kind"] == "KWOKNodeClass" for d in docs):
        docs.append(KWOK_CLASS)
    made = Lab([], config_of(docs, options, types), {}, now=now)
    for doc in docs:
        if doc["kind"] not in ("NodePool", "KWOKNodeClass", "EC2NodeClass"):
            made.store.create(doc)
    return made


def reconfigure(
    made: Lab,
    *documents: Mapping[str, Any],
    options: KarpenterOptions | None = None,
    types: list[InstanceType] | None = None,
) -> None:
    """Give a running lab new NodePools and node classes (as an apply of them would)."""
    docs = [dict(d) for d in documents]
    if not any(d["kind"] == "KWOKNodeClass" for d in docs):
        docs.append(KWOK_CLASS)
    current = made.ctx.catalogs.get("KWOKNodeClass")
    made.reconfigure(config_of(docs, options or made.ctx.options, types if types is not None else current))


def condition(obj: Mapping[str, Any], kind: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of a condition, or None."""
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item["type"] == kind:
            return item["status"], item.get("reason", ""), item.get("message", "")
    return None

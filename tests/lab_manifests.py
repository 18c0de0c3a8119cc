"""Manifests for lab scenarios as YAML text (what `karp apply -f -` reads): a kwok NodePool with its node class, a
Deployment of pause pods, a PodDisruptionBudget. Tests say only what differs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

NODE_CLASS = """
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
"""

ON_DEMAND_AMD64 = (
    ("kubernetes.io/arch", ("amd64",)),
    ("karpenter.sh/capacity-type", ("on-demand",)),
)


def nodepool(
    name: str = "default",
    *,
    requirements: Sequence[tuple[str, Sequence[str]]] = ON_DEMAND_AMD64,
    annotations: Mapping[str, str] | None = None,
    consolidate_after: str = "10s",
    consolidation_policy: str = "WhenEmptyOrUnderutilized",
    limits: Mapping[str, str] | None = None,
    budgets: Sequence[Mapping[str, object]] | None = None,
    weight: int | None = None,
    node_class: bool = True,
) -> str:
    """A kwok NodePool (with the default KWOKNodeClass before it unless `node_class` is False)."""
    spec: dict[str, object] = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": key, "operator": "In", "values": list(values)} for key, values in requirements
                ],
            }
        },
        "disruption": {
            "consolidationPolicy": consolidation_policy,
            "consolidateAfter": consolidate_after,
            **({"budgets": list(budgets)} if budgets is not None else {}),
        },
        **({"limits": dict(limits)} if limits else {}),
        **({"weight": weight} if weight is not None else {}),
    }
    metadata = {"name": name, **({"annotations": dict(annotations)} if annotations else {})}
    body = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": metadata, "spec": spec}
    return (NODE_CLASS + "---\n" if node_class else "") + json.dumps(body) + "\n"


def deployment(
    name: str,
    replicas: int,
    cpu: str = "1",
    *,
    memory: str | None = None,
    nodepool: str | None = None,
    annotations: Mapping[str, str] | None = None,
    volumes: Sequence[str] = (),
) -> str:
    """A Deployment of `replicas` pause pods labelled app=NAME, each requesting `cpu` (and `memory`), optionally
    held to one NodePool and given emptyDir volumes."""
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    pod_spec: dict[str, object] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": "pause", "resources": {"requests": requests}}],
        **({"nodeSelector": {"karpenter.sh/nodepool": nodepool}} if nodepool else {}),
        **({"volumes": [{"name": v, "emptyDir": {}} for v in volumes]} if volumes else {}),
    }
    template_meta = {"labels": {"app": name}, **({"annotations": dict(annotations)} if annotations else {})}
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }
    return json.dumps(body) + "\n"


def pdb(app: str, *, max_unavailable: int | str | None = None, min_available: int | str | None = None) -> str:
    """A PodDisruptionBudget named after the app it covers (pods labelled app=APP)."""
    spec: dict[str, object] = {"selector": {"matchLabels": {"app": app}}}
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if min_available is not None:
        spec["minAvailable"] = min_available
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": app}, "spec": spec}
    return json.dumps(body) + "\n"


def documents(*texts: str) -> str:
    """Several manifests as one multi-document stream."""
    return "---\n".join(texts)

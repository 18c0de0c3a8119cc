"""Manifests for lab scenarios as YAML text (what `karp apply -f -` reads): a kwok NodePool with its node class, a
Deployment of pause pods, a DaemonSet of agents, a PodDisruptionBudget. Tests say only what differs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

NODE_CLASS = """
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
"""

ON_DEMAND = (("karpenter.sh/capacity-type", ("on-demand",)),)
ON_DEMAND_AMD64 = (("kubernetes.io/arch", ("amd64",)), *ON_DEMAND)


def nodepool(
    name: str = "default",
    *,
    requirements: Sequence[tuple[str, Sequence[str]]] = ON_DEMAND_AMD64,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    expire_after: str | None = None,
    consolidate_after: str | None = "10s",
    consolidation_policy: str | None = "WhenEmptyOrUnderutilized",
    limits: Mapping[str, str] | None = None,
    budgets: Sequence[Mapping[str, object]] | None = None,
    weight: int | None = None,
    node_class: bool = True,
) -> str:
    """A kwok NodePool (with the default KWOKNodeClass before it unless `node_class` is False). An option given as
    None is not written (nor the disruption block when nothing is left in it), as in a manifest that leaves it out."""
    disruption = {
        **({"consolidationPolicy": consolidation_policy} if consolidation_policy is not None else {}),
        **({"consolidateAfter": consolidate_after} if consolidate_after is not None else {}),
        **({"budgets": list(budgets)} if budgets is not None else {}),
    }
    spec: dict[str, object] = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": key, "operator": "In", "values": list(values)} for key, values in requirements
                ],
                **({"taints": [dict(t) for t in taints]} if taints else {}),
                **({"expireAfter": expire_after} if expire_after is not None else {}),
            }
        },
        **({"disruption": disruption} if disruption else {}),
        **({"limits": dict(limits)} if limits else {}),
        **({"weight": weight} if weight is not None else {}),
    }
    metadata = {"name": name, **({"annotations": dict(annotations)} if annotations else {})}
    body = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": metadata, "spec": spec}
    return (NODE_CLASS + "---\n" if node_class else "") + json.dumps(body) + "\n"


def deployment(
    name: str,
    replicas: int,
    cpu: str | None = "1",
    *,
    memory: str | None = None,
    nodepool: str | None = None,
    annotations: Mapping[str, str] | None = None,
    volumes: Sequence[str] = (),
    grace_period: int | None = 0,
) -> str:
    """A Deployment of `replicas` pause pods labelled app=NAME, each requesting `cpu` (and `memory`; neither: no
    requests at all), optionally held to one NodePool and given emptyDir volumes. The pods' grace period is
    `grace_period` seconds; None leaves it out (Kubernetes' 30 s, which the lab's termination honours)."""
    requests = {**({"cpu": cpu} if cpu is not None else {}), **({"memory": memory} if memory else {})}
    container: dict[str, object] = {"name": "app", "image": "pause"}
    if requests:
        container["resources"] = {"requests": requests}
    pod_spec: dict[str, object] = {
        **({"terminationGracePeriodSeconds": grace_period} if grace_period is not None else {}),
        "containers": [container],
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


def daemonset(
    name: str,
    cpu: str,
    *,
    memory: str | None = None,
    image: str | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
) -> str:
    """A DaemonSet of agent pods labelled app=NAME, one container named NAME running `image` (NAME unless given) and
    requesting `cpu` (and `memory`), optionally tolerating taints."""
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    pod_spec: dict[str, object] = {
        **({"tolerations": [dict(t) for t in tolerations]} if tolerations else {}),
        "containers": [{"name": name, "image": image or name, "resources": {"requests": requests}}],
    }
    body = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
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

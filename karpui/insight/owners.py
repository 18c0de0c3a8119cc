"""Who owns a pod, as a person would name it: the Deployment behind its ReplicaSet, else its Job, ReplicaSet,
StatefulSet or DaemonSet; pods of no controller share one owner per namespace."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models.fields.json import KeyTransform

from karpui import models

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, order=True)
class Owner:
    kind: str  # "" for pods of no controller
    namespace: str
    name: str

    @property
    def key(self) -> str:
        """How a URL names it: `Deployment/default/inflate`, or `/default/` for bare pods."""
        return f"{self.kind}/{self.namespace}/{self.name}"

    @property
    def label(self) -> str:
        return (
            f"{self.kind} {self.namespace}/{self.name}" if self.kind else f"pods of no controller in {self.namespace}"
        )


def controller(references: Any) -> Mapping[str, Any] | None:
    """The owner reference marked controller (Kubernetes allows one), else the first, else None."""
    if not isinstance(references, list) or not references:
        return None
    return next((r for r in references if isinstance(r, dict) and r.get("controller")), references[0])


def pod_owners(cluster: models.Cluster, pods: Iterable[tuple[str, Any]]) -> list[Owner]:
    """The owner of each (namespace, ownerReferences) pair, in order; one query for the ReplicaSets' owners."""
    pods = list(pods)
    direct = [(namespace, controller(refs)) for namespace, refs in pods]
    replicasets = {(ns, ref.get("name", "")) for ns, ref in direct if ref and ref.get("kind") == "ReplicaSet"}
    deployments: dict[Key, str] = {}
    # Queried even for no ReplicaSet ("" matches none), so a page's query count does not depend on its pods.
    rows = models.KubeObject.objects.filter(
        cluster=cluster,
        kind="ReplicaSet",
        namespace__in={ns for ns, _ in replicasets} or {""},
        name__in={name for _, name in replicasets} or {""},
    ).values_list("namespace", "name", KeyTransform("ownerReferences", KeyTransform("metadata", "body")))
    for namespace, name, refs in rows:
        ref = controller(refs)
        if ref and ref.get("kind") == "Deployment" and (namespace, name) in replicasets:
            deployments[namespace, name] = str(ref.get("name", ""))
    owners = []
    for namespace, ref in direct:
        if ref is None:
            owners.append(Owner("", namespace, ""))
            continue
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind == "ReplicaSet" and (namespace, name) in deployments:
            kind, name = "Deployment", deployments[namespace, name]
        owners.append(Owner(kind, namespace, name))
    return owners

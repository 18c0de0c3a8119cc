"""The cluster's CapacityBuffers for the pending view: each buffer's virtual pods (how many, of what shape, from
where), whether they fit on existing capacity or need new nodes, and which nodes hold them now."""

from __future__ import annotations

from typing import Any

from karpui import models
from karpui.clusters.karpenter_options import cluster_options
from karpui.clusters.storage import list_manifests
from karpui.insight.drilldown import object_url
from karpui.kinds.resources import BY_KIND
from provisioner import capacitybuffers as cb
from provisioner.options import CAPACITY_BUFFER
from provisioner.quantity import format_resources


def capacity_buffers(cluster: models.Cluster) -> dict[str, Any]:
    """{"gate": whether CapacityBuffer is on, "buffers": a row per buffer}."""
    rows = []
    for body in list_manifests(cluster, BY_KIND["CapacityBuffer"]):
        meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
        namespace = meta.get("namespace") or "default"
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        if spec.get("podTemplateRef"):
            source_kind, source = "PodTemplate", spec["podTemplateRef"].get("name", "")
        else:
            source_kind, source = (
                (spec.get("scalableRef") or {}).get("kind", ""),
                (spec.get("scalableRef") or {}).get("name", ""),
            )
        shape = ""
        template = _template(cluster, source_kind, namespace, source)
        if template is not None:
            try:
                shape = ", ".join(
                    f"{k} {v}" for k, v in format_resources(cb.template_pod(template, namespace).requests).items()
                )
            except cb.Unresolved as unresolved:
                shape = str(unresolved)
        rows.append(
            {
                "namespace": namespace,
                "name": meta["name"],
                "url": object_url(cluster, "CapacityBuffer", namespace, meta["name"]),
                "source": f"{source_kind} {source}".strip(),
                "source_url": object_url(cluster, source_kind, namespace, source) if source_kind in BY_KIND else "",
                "replicas": status.get("replicas"),
                "shape": shape,
                "ready": conditions.get(cb.READY_FOR_PROVISIONING) or {},
                "provisioning": conditions.get(cb.PROVISIONING) or {},
            }
        )
    holding = ((cluster.lab_state or {}).get("buffer_nodes")) or {}
    return {
        "buffer_gate": cluster_options(cluster).gate(CAPACITY_BUFFER),
        "buffers": rows,
        "buffer_nodes": [
            {"name": node, "pods": count, "url": object_url(cluster, "Node", "", node)}
            for node, count in sorted(holding.items())
        ],
    }


def _template(cluster: models.Cluster, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod template of a buffer's source, as stored in the lab (None when it is not there)."""
    if kind not in ("PodTemplate", *cb.SCALABLE_KINDS):
        return None
    row = models.KubeObject.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name=name).first()
    if row is None:
        return None
    body = row.body
    template = body.get("template") if kind == "PodTemplate" else (body.get("spec") or {}).get("template")
    return template if isinstance(template, dict) else None

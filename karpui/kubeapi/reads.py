"""What the API's reads and writes both need of a request: the object it names (a 404 as kube-apiserver words it
when there is none), its label and field selectors, and the Scale subresource of a workload."""

from __future__ import annotations

from django.http import HttpRequest

from karpui.clusters import storage
from karpui.kinds.resources import Resource
from karpui.kubeapi.errors import bad_request, not_found
from karpui.kubeapi.requests import Context, Target
from karpui.kubeapi.selectors import FieldSelector, parse_field_selector
from provisioner.cluster.objects import Obj
from provisioner.selectors import LabelSelector, SelectorError


def must_get(ctx: Context, at: Target) -> Obj:
    resource = at.resource
    obj = storage.get_object(ctx.cluster, resource, at.name or "", at.namespace or "")
    if obj is None:
        raise not_found(resource.qualified, at.name or "", resource.group, resource.plural)
    return obj


def scale_of(obj: Obj) -> Obj:
    """The autoscaling/v1 Scale of a Deployment or ReplicaSet, or of a NodePool (its CRD's scale subresource:
    specReplicasPath .spec.replicas, statusReplicasPath .status.nodes, no label selector)."""
    meta = obj["metadata"]
    if obj.get("kind") == "NodePool":
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion", "creationTimestamp") if k in meta},
            "spec": {"replicas": int((obj.get("spec") or {}).get("replicas") or 0)},
            "status": {"replicas": int((obj.get("status") or {}).get("nodes") or 0)},
        }
    selector = LabelSelector.from_spec((obj.get("spec") or {}).get("selector"))
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
        },
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 1))},
        "status": {
            "replicas": int((obj.get("status") or {}).get("replicas", 0)),
            "selector": ",".join(
                f"{t.key}={next(iter(t.values))}" if t.operator == "In" and len(t.values) == 1 else t.key
                for t in (selector.terms if selector else ())
            ),
        },
    }


def selectors(request: HttpRequest, resource: Resource) -> tuple[LabelSelector, FieldSelector]:
    try:
        labels = LabelSelector.parse(request.GET.get("labelSelector", ""))
    except SelectorError as error:
        raise bad_request(str(error)) from None
    return labels, parse_field_selector(request.GET.get("fieldSelector", ""), resource.kind)

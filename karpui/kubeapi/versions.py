"""Serving a stored object at the version a client asked for: NodePools are stored as karpenter.sh/v1 and served as
v1beta1 too, converted as Karpenter's conversion webhook does; other kinds differ between versions only in name."""

from __future__ import annotations

import copy
import json

from provisioner.cluster.objects import Obj
from provisioner.manifests.nodepool import KUBELET_ANNOTATION, NODECLASS_ANNOTATION

# The version a v1 nodeClassRef's group is served at, for a v1beta1 nodeClassRef's apiVersion.
_NODECLASS_VERSIONS = {"karpenter.kwok.sh": "v1alpha1", "karpenter.k8s.aws": "v1beta1"}


def nodepool_v1beta1(nodepool: Obj) -> Obj:
    """A karpenter.sh/v1 NodePool as karpenter.sh/v1beta1: the nodeClassRef and kubelet the v1beta1 manifest had
    (kept in Karpenter's compatibility annotations), expireAfter back under disruption, WhenEmptyOrUnderutilized
    as WhenUnderutilized, and no terminationGracePeriod or budget reasons (v1beta1 has neither)."""
    converted = copy.deepcopy(nodepool)
    converted["apiVersion"] = "karpenter.sh/v1beta1"
    annotations = converted["metadata"].get("annotations") or {}
    spec = converted.setdefault("spec", {})
    template_spec = spec.setdefault("template", {}).setdefault("spec", {})
    ref = template_spec.get("nodeClassRef") or {}
    kept_ref = annotations.pop(NODECLASS_ANNOTATION, None)
    if kept_ref:
        template_spec["nodeClassRef"] = json.loads(kept_ref)
    else:
        group = ref.get("group", "")
        template_spec["nodeClassRef"] = {
            "apiVersion": f"{group}/{_NODECLASS_VERSIONS.get(group, 'v1')}",
            "kind": ref.get("kind", ""),
            "name": ref.get("name", ""),
        }
    kubelet = annotations.pop(KUBELET_ANNOTATION, None)
    if kubelet:
        template_spec["kubelet"] = json.loads(kubelet)
    if not annotations:
        converted["metadata"].pop("annotations", None)
    disruption = spec.setdefault("disruption", {})
    if "expireAfter" in template_spec:
        disruption["expireAfter"] = template_spec.pop("expireAfter")
    template_spec.pop("terminationGracePeriod", None)
    if disruption.get("consolidationPolicy") == "WhenEmptyOrUnderutilized":
        disruption["consolidationPolicy"] = "WhenUnderutilized"
        disruption.pop("consolidateAfter", None)
    for budget in disruption.get("budgets") or []:
        budget.pop("reasons", None)
    return converted


def at_version(body: Obj, group: str, version: str, *, namespaced: bool) -> Obj:
    """`body` as served at group/version: its apiVersion says so, and cluster-scoped kinds carry no namespace."""
    if body.get("kind") == "NodePool" and version == "v1beta1":
        return nodepool_v1beta1(body)
    api_version = f"{group}/{version}" if group else version
    if body.get("apiVersion") == api_version and (namespaced or "namespace" not in body.get("metadata", {})):
        return body
    body = {**body, "apiVersion": api_version}
    if not namespaced and "namespace" in body.get("metadata", {}):
        body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "namespace"}
    return body

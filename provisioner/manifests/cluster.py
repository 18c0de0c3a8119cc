"""Validation of the cluster objects the lab stores (Pods, workloads, Nodes, PDBs, volumes, ...): errors name the
field."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from provisioner.capacitybuffers import API_VERSION as CAPACITY_BUFFER_API_VERSION
from provisioner.dra.claims import device_class_from_manifest, dra_config_pools, validate_claim, validate_claim_template
from provisioner.manifests import fields as f
from provisioner.manifests import rbac, storage
from provisioner.manifests.apivalidation import validate_api_object
from provisioner.manifests.capacitybuffer import validate_capacitybuffer, validate_podtemplate
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.kubernetes import check_fields
from provisioner.manifests.nodeoverlay import parse_nodeoverlay
from provisioner.manifests.pod import pod_from_spec
from provisioner.selectors import LabelSelector, SelectorError
from provisioner.taints import EFFECTS

_INT_OR_PERCENT = re.compile(r"^([0-9]+%?)$")
TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")
# What one workload and one apply may ask for: the lab holds every pod in memory, and the warm engine is measured
# at 20,000 pods (bench/warm.py); 1,000,000 replicas once ran the worker out of memory while it held the lock.
MAX_REPLICAS = 5000
MAX_PODS_PER_APPLY = 20000
# The lab names a Deployment's ReplicaSet `<deployment>-<10 characters>` and a pod `<owner>-<5 characters>`;
# these keep every generated name within Kubernetes' 253.
_MAX_WORKLOAD_NAME = {"Deployment": 253 - 17, "ReplicaSet": 253 - 6, "DaemonSet": 253 - 6}


def _pod(doc: dict[str, Any]) -> None:
    f.mapping(doc, "", allowed=TOP_LEVEL)
    meta = f.metadata(doc)
    pod_from_spec(
        f.mapping(doc.get("spec"), "spec", required=True),
        "spec",
        namespace=meta.get("namespace", "default"),
        labels=meta.get("labels") or {},
    )


def _workload(doc: dict[str, Any]) -> None:
    f.mapping(doc, "", allowed=TOP_LEVEL)
    f.metadata(doc, max_name=_MAX_WORKLOAD_NAME[doc["kind"]])
    spec = f.mapping(doc.get("spec"), "spec", required=True)
    if doc["kind"] != "DaemonSet":
        f.integer(spec.get("replicas", 1), "spec.replicas", minimum=0, maximum=MAX_REPLICAS)
    template = f.mapping(spec.get("template"), "spec.template", required=True)
    template_meta = f.mapping(template.get("metadata"), "spec.template.metadata")
    labels = f.label_map(template_meta.get("labels"), "spec.template.metadata.labels")
    f.annotation_map(template_meta.get("annotations"), "spec.template.metadata.annotations")
    try:
        selector = LabelSelector.from_spec(f.mapping(spec.get("selector"), "spec.selector", required=True))
    except SelectorError as error:
        raise ManifestError(str(error), field="spec.selector") from None
    if selector is None or not selector.terms:
        raise ManifestError("empty selector is invalid for a workload", field="spec.selector")
    if not selector.matches(labels):
        raise ManifestError("`selector` does not match template `labels`", field="spec.template.metadata.labels")
    pod_from_spec(
        f.mapping(template.get("spec"), "spec.template.spec", required=True),
        "spec.template.spec",
        namespace="",
        labels=labels,
    )


def _node(doc: dict[str, Any]) -> None:
    f.mapping(doc, "", allowed=TOP_LEVEL)
    f.metadata(doc)
    spec = f.mapping(doc.get("spec"), "spec")
    for index, taint in enumerate(f.sequence(spec.get("taints"), "spec.taints")):
        taint = f.mapping(
            taint, f"spec.taints[{index}]", allowed=("key", "value", "effect", "timeAdded"), required=True
        )
        f.string(taint.get("key"), f"spec.taints[{index}].key", required=True)
        if taint.get("effect") not in EFFECTS:
            raise ManifestError(
                f'Unsupported value: "{taint.get("effect")}": supported values: {", ".join(EFFECTS)}',
                field=f"spec.taints[{index}].effect",
            )
    status = f.mapping(doc.get("status"), "status")
    for section in ("capacity", "allocatable"):
        f.resources(status.get(section), f"status.{section}")


def _pdb(doc: dict[str, Any]) -> None:
    f.mapping(doc, "", allowed=TOP_LEVEL)
    f.metadata(doc)
    spec = f.mapping(
        doc.get("spec"),
        "spec",
        required=True,
        allowed=("minAvailable", "maxUnavailable", "selector", "unhealthyPodEvictionPolicy"),
    )
    if ("minAvailable" in spec) == ("maxUnavailable" in spec):
        raise ManifestError("exactly one of minAvailable and maxUnavailable must be set", field="spec.minAvailable")
    for name in ("minAvailable", "maxUnavailable"):
        if name in spec and not _INT_OR_PERCENT.match(str(spec[name])):
            raise ManifestError(f"must be an integer or a percentage, got {spec[name]!r}", field=f"spec.{name}")
    try:
        LabelSelector.from_spec(f.mapping(spec.get("selector"), "spec.selector"))
    except SelectorError as error:
        raise ManifestError(str(error), field="spec.selector") from None


def _namespace(doc: dict[str, Any]) -> None:
    f.mapping(doc, "", allowed=TOP_LEVEL)
    f.metadata(doc)
    f.dns_label(doc["metadata"]["name"], "metadata.name", what="namespace name")


def _opaque(doc: dict[str, Any]) -> None:
    """Kinds stored as given for now (DRA objects): identity and shape are checked, fields are kept."""
    f.mapping(doc, "", allowed=(*TOP_LEVEL, "driver", "pools"))
    f.metadata(doc)


def _device_class(doc: dict[str, Any]) -> None:
    device_class_from_manifest(doc)  # compiles every CEL selector; errors name the field


def _dra_config(doc: dict[str, Any]) -> None:
    dra_config_pools(doc)


def _nodeoverlay(doc: dict[str, Any]) -> None:
    parse_nodeoverlay(doc)


def _top_level(validate: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """`validate`, after refusing fields no Kubernetes object has at its top level."""

    def checked(doc: dict[str, Any]) -> None:
        f.mapping(doc, "", allowed=TOP_LEVEL)
        validate(doc)

    return checked


VALIDATORS: dict[str, tuple[tuple[str, ...], Callable[[dict[str, Any]], None]]] = {
    "Pod": (("v1",), _pod),
    "Namespace": (("v1",), _namespace),
    "Node": (("v1",), _node),
    "Deployment": (("apps/v1",), _workload),
    "ReplicaSet": (("apps/v1",), _workload),
    "DaemonSet": (("apps/v1",), _workload),
    "PodDisruptionBudget": (("policy/v1",), _pdb),
    "DeviceClass": (("resource.k8s.io/v1", "resource.k8s.io/v1beta1"), _device_class),
    "ResourceClaim": (("resource.k8s.io/v1", "resource.k8s.io/v1beta1"), _top_level(validate_claim)),
    "ResourceClaimTemplate": (("resource.k8s.io/v1", "resource.k8s.io/v1beta1"), _top_level(validate_claim_template)),
    "ResourceSlice": (("resource.k8s.io/v1", "resource.k8s.io/v1beta1"), _opaque),
    "DRAConfig": (("test.karpenter.sh/v1alpha1",), _dra_config),
    "NodeOverlay": (("karpenter.sh/v1alpha1",), _nodeoverlay),
    "CapacityBuffer": ((CAPACITY_BUFFER_API_VERSION,), validate_capacitybuffer),
    "PodTemplate": (("v1",), validate_podtemplate),
    # Field by field against their API types (check_fields), then as kube-apiserver's validation.
    "ServiceAccount": (("v1",), rbac.service_account),
    "ClusterRole": ((f"{rbac.RBAC_GROUP}/v1",), rbac.cluster_role),
    "ClusterRoleBinding": ((f"{rbac.RBAC_GROUP}/v1",), rbac.cluster_role_binding),
    "PersistentVolumeClaim": (("v1",), _top_level(storage.persistent_volume_claim)),
    "PersistentVolume": (("v1",), _top_level(storage.persistent_volume)),
    "StorageClass": (("storage.k8s.io/v1",), storage.storage_class),
    # Written by a node's kubelet on a real cluster; in the lab, by hand, to give a node volume attachment limits.
    "CSINode": (("storage.k8s.io/v1",), _opaque),
}


def validate_cluster_object(doc: dict[str, Any]) -> dict[str, Any]:
    """Check a cluster object's manifest; the manifest itself is what gets stored."""
    kind = doc.get("kind")
    versions, validate = VALIDATORS[str(kind)]
    if doc.get("apiVersion") not in versions:
        raise ManifestError(f'no matches for kind "{kind}" in version "{doc.get("apiVersion")}"', field="apiVersion")
    check_fields(doc)
    validate(doc)
    validate_api_object(doc)
    return doc


def pods_requested(bodies: list[dict[str, Any]]) -> int:
    """Pods a set of manifests asks for at once: bare Pods plus Deployments' and ReplicaSets' replicas."""
    total = 0
    for body in bodies:
        if body.get("kind") == "Pod":
            total += 1
        elif body.get("kind") in ("Deployment", "ReplicaSet") and isinstance(body.get("spec"), dict):
            replicas = body["spec"].get("replicas", 1)
            total += replicas if isinstance(replicas, int) else 0
    return total


def check_pods_per_apply(bodies: list[dict[str, Any]]) -> None:
    total = pods_requested(bodies)
    if total > MAX_PODS_PER_APPLY:
        raise ManifestError(
            f"the manifests ask for {total} pods (Pods plus replicas); one apply may ask for at most {MAX_PODS_PER_APPLY}"
        )

"""CapacityBuffer (autoscaling.x-k8s.io/v1beta1) and PodTemplate (v1) manifests, checked as the v1.14.1 CRD's schema
and CEL rules and kube-apiserver check them."""

from __future__ import annotations

from typing import Any

from provisioner.capacitybuffers import ACTIVE_CAPACITY, API_VERSION, KIND
from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.kubernetes import check_type
from provisioner.manifests.pod import pod_from_spec

SPEC_FIELDS = ("provisioningStrategy", "podTemplateRef", "scalableRef", "replicas", "percentage", "limits")
INT32_MAX = 2**31 - 1


def validate_capacitybuffer(doc: dict[str, Any]) -> None:
    if doc.get("apiVersion") != API_VERSION:
        raise ManifestError(
            f'no matches for kind "{KIND}" in version "{doc.get("apiVersion")}" (use {API_VERSION})', field="apiVersion"
        )
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "spec", "status"))
    f.metadata(doc)
    if doc.get("spec") is None:
        raise ManifestError("Required value", field="spec")
    spec = f.mapping(doc.get("spec"), "spec", allowed=SPEC_FIELDS)
    f.string(spec.get("provisioningStrategy"), "spec.provisioningStrategy")
    # The CRD's default, which the API server writes into the stored object (kubectl get cb prints it).
    doc["spec"].setdefault("provisioningStrategy", ACTIVE_CAPACITY)
    if spec.get("podTemplateRef") is not None:
        ref = f.mapping(spec["podTemplateRef"], "spec.podTemplateRef", allowed=("name",))
        _non_empty(ref, "name", "spec.podTemplateRef")
    if spec.get("scalableRef") is not None:
        ref = f.mapping(spec["scalableRef"], "spec.scalableRef", allowed=("apiGroup", "kind", "name"))
        f.string(ref.get("apiGroup"), "spec.scalableRef.apiGroup")
        _non_empty(ref, "kind", "spec.scalableRef")
        _non_empty(ref, "name", "spec.scalableRef")
    f.integer(spec.get("replicas"), "spec.replicas", minimum=0, maximum=INT32_MAX)
    f.integer(spec.get("percentage"), "spec.percentage", minimum=0, maximum=INT32_MAX)
    f.resources(spec.get("limits"), "spec.limits", numbers=False)
    # The CRD's x-kubernetes-validations on spec, in its order and words.
    has = {name: spec.get(name) is not None for name in SPEC_FIELDS}
    if has["podTemplateRef"] and not (has["replicas"] or has["limits"]):
        raise ManifestError("If podTemplateRef is set, replicas or limits must also be set", field="spec")
    if has["podTemplateRef"] and has["scalableRef"]:
        raise ManifestError("You must define either PodTemplateRef or ScalableRef, but not both", field="spec")


def _non_empty(ref: dict[str, Any], name: str, path: str) -> None:
    if ref.get(name) is None:
        raise ManifestError("Required value", field=f"{path}.{name}")
    f.string(ref[name], f"{path}.{name}")
    if not ref[name]:
        raise ManifestError("should be at least 1 chars long", field=f"{path}.{name}")


def validate_podtemplate(doc: dict[str, Any]) -> None:
    """A PodTemplate: its template is a PodTemplateSpec whose spec must be a pod's."""
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "template"))
    meta = f.metadata(doc)
    template = f.mapping(doc.get("template"), "template")
    check_type(template, "V1PodTemplateSpec", "template")
    template_meta = f.mapping(template.get("metadata"), "template.metadata")
    f.label_map(template_meta.get("labels"), "template.metadata.labels")
    f.annotation_map(template_meta.get("annotations"), "template.metadata.annotations")
    pod_from_spec(
        f.mapping(template.get("spec"), "template.spec", required=True),
        "template.spec",
        namespace=meta.get("namespace", "default"),
        labels=template_meta.get("labels") or {},
    )

"""Validation of ServiceAccounts, ClusterRoles and ClusterRoleBindings as kube-apiserver's (pkg/apis/rbac/validation,
pkg/apis/core/validation) checks them; the lab stores them for Karpenter's install and users' manifests (a DRA
ClusterRole and its binding), it does not authorise with them."""

from __future__ import annotations

from typing import Any

from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError

RBAC_GROUP = "rbac.authorization.k8s.io"
_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _path_segment_name(doc: dict[str, Any]) -> None:
    """RBAC objects' names are path segments (`system:aggregate-to-edit` is one), not DNS subdomains."""
    meta = f.mapping(doc.get("metadata"), "metadata", allowed=f.METADATA_FIELDS, required=True)
    name = f.string(meta.get("name"), "metadata.name", required=True)
    assert name is not None
    if name in (".", ".."):
        raise ManifestError(f"Invalid value: {name!r}: may not be '.' or '..'", field="metadata.name")
    for bad in ("/", "%"):
        if bad in name:
            raise ManifestError(f"Invalid value: {name!r}: may not contain '{bad}'", field="metadata.name")
    if len(name) > 253:
        raise ManifestError(f"must be no more than 253 characters, got {len(name)}", field="metadata.name")
    f.label_map(meta.get("labels"), "metadata.labels")
    f.annotation_map(meta.get("annotations"), "metadata.annotations")


def _strings(value: Any, path: str) -> list[str]:
    items = f.sequence(value, path)
    for index, item in enumerate(items):
        f.string(item, f.join(path, index))
    return items


def cluster_role(doc: dict[str, Any]) -> None:
    _path_segment_name(doc)
    for index, rule in enumerate(f.sequence(doc.get("rules"), "rules")):
        path = f"rules[{index}]"
        rule = f.mapping(rule, path, required=True)
        if not _strings(rule.get("verbs"), f"{path}.verbs"):
            raise ManifestError("Required value: verbs must contain at least one value", field=f"{path}.verbs")
        urls = _strings(rule.get("nonResourceURLs"), f"{path}.nonResourceURLs")
        groups = _strings(rule.get("apiGroups"), f"{path}.apiGroups")
        resources = _strings(rule.get("resources"), f"{path}.resources")
        _strings(rule.get("resourceNames"), f"{path}.resourceNames")
        if urls:
            if groups or resources:
                raise ManifestError(
                    "Invalid value: rules cannot apply to both regular resources and non-resource URLs",
                    field=f"{path}.nonResourceURLs",
                )
            continue
        if not groups:
            raise ManifestError(
                "Required value: resource rules must supply at least one api group", field=f"{path}.apiGroups"
            )
        if not resources:
            raise ManifestError(
                "Required value: resource rules must supply at least one resource", field=f"{path}.resources"
            )


def cluster_role_binding(doc: dict[str, Any]) -> None:
    _path_segment_name(doc)
    ref = f.mapping(doc.get("roleRef"), "roleRef", required=True)
    if ref.get("apiGroup") != RBAC_GROUP:
        raise ManifestError(
            f'Unsupported value: "{ref.get("apiGroup")}": supported values: "{RBAC_GROUP}"', field="roleRef.apiGroup"
        )
    if ref.get("kind") != "ClusterRole":
        raise ManifestError(
            f'Unsupported value: "{ref.get("kind")}": supported values: "ClusterRole"', field="roleRef.kind"
        )
    if not f.string(ref.get("name"), "roleRef.name"):
        raise ManifestError("Required value", field="roleRef.name")
    for index, subject in enumerate(f.sequence(doc.get("subjects"), "subjects")):
        path = f"subjects[{index}]"
        subject = f.mapping(subject, path, required=True)
        kind = subject.get("kind")
        if kind not in _SUBJECT_KINDS:
            raise ManifestError(
                f'Unsupported value: "{kind}": supported values: "ServiceAccount", "User", "Group"',
                field=f"{path}.kind",
            )
        if not f.string(subject.get("name"), f"{path}.name"):
            raise ManifestError("Required value", field=f"{path}.name")
        group = subject.get("apiGroup") or ""
        if kind == "ServiceAccount":
            if group:
                raise ManifestError(f'Unsupported value: "{group}": supported values: ""', field=f"{path}.apiGroup")
            if not subject.get("namespace"):
                raise ManifestError("Required value", field=f"{path}.namespace")
            f.dns_label(subject["namespace"], f"{path}.namespace", what="namespace")
        elif group != RBAC_GROUP:
            raise ManifestError(
                f'Unsupported value: "{group}": supported values: "{RBAC_GROUP}"', field=f"{path}.apiGroup"
            )


def service_account(doc: dict[str, Any]) -> None:
    f.metadata(doc)

"""What every write checks first, as kube-apiserver does: the kind is served for the verb, the actor may write it, the
object is valid at a served version, and its namespace (and the DeviceClasses its claims name) exist."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from karpui.clusters import karpenter_options
from karpui.kinds.resources import BY_KIND, DECLARATIONS, LAB, NODECLASSES, NODEPOOLS, Resource
from karpui.people.audit import Actor
from provisioner.apimachinery.apply import last_applied
from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import (
    NotFound,
    Obj,
)
from provisioner.manifests import ManifestError
from provisioner.manifests.cluster import VALIDATORS, validate_cluster_object
from provisioner.manifests.fields import metadata as check_metadata
from provisioner.manifests.nodeclaim import API_V1 as NODECLAIM_V1
from provisioner.manifests.nodeclaim import validate_nodeclaim

# kube-apiserver makes these at start (system_namespaces_ensure, here).
SYSTEM_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


# Those of them its NamespaceLifecycle admission never lets be deleted (kube-node-lease may be). As they always
# exist, a write into them needs no look-up, even in a cluster whose Namespace rows were never made.
IMMORTAL_NAMESPACES = ("default", "kube-public", "kube-system")


_MODEL = {LAB: "kubeobject", NODEPOOLS: "nodepool", NODECLASSES: "nodeclass", DECLARATIONS: "devicedeclaration"}


_ACTION = {"create": "add", "update": "change", "patch": "change", "delete": "delete"}


def resource_of(kind: str) -> Resource:
    resource = BY_KIND.get(kind)
    if resource is None:
        raise ManifestError(f'no matches for kind "{kind}"', field="kind")
    return resource


def authorize(actor: Actor, verb: str, resource: Resource) -> None:
    """Refuse a user the write unless their permissions allow it (the operator, with no user, may do anything)."""
    if verb not in resource.verbs:
        raise PermissionDenied(f"{resource.qualified} cannot be written: {verb} is not served for it")
    user = actor.user
    if user is None:
        return
    permission = f"karpui.{_ACTION[verb]}_{_MODEL[resource.store]}"
    if not user.is_active or not user.has_perm(permission):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not {verb} {resource.qualified}")


def validate(obj: Obj, resource: Resource, *, status: bool = False) -> None:
    """The checks `karp apply` makes of a lab object, on what a write would store: its status too when `status`
    (a Node registers with its status, as kubelet posts it), else status aside (the cluster's to write). Errors
    name the field."""
    body = obj if status else {key: value for key, value in obj.items() if key != "status"}
    if obj.get("kind") in VALIDATORS:
        validate_cluster_object(body)
    else:
        check_metadata(body)
    if obj.get("kind") == "NodeClaim" and obj.get("apiVersion") == NODECLAIM_V1:
        validate_nodeclaim(body)  # Karpenter's CRD, as kube-apiserver checks a NodeClaim someone writes
    last_applied(body)  # apply's record must stay readable by the next apply (bounded, a JSON object)
    karpenter_options.check(body)  # Karpenter's options, on its controller Deployments
    if obj.get("apiVersion") not in resource_versions(resource):
        raise ManifestError(f'no matches for kind "{obj.get("kind")}" in version "{obj.get("apiVersion")}"')


def resource_versions(resource: Resource) -> set[str]:
    return {f"{resource.group}/{v}" if resource.group else v for v in resource.versions}


def namespace_of(obj: Obj, resource: Resource) -> str:
    return str(obj["metadata"].get("namespace") or "default") if resource.namespaced else ""


def namespace_exists(api: ClusterAPI, resource: Resource, obj: Obj) -> None:
    if not resource.namespaced:
        return
    namespace = namespace_of(obj, resource)
    obj["metadata"]["namespace"] = namespace
    if namespace in IMMORTAL_NAMESPACES:
        return
    found = api.get("Namespace", namespace)
    if found is None or found["metadata"].get("deletionTimestamp"):
        raise NotFound(f'namespaces "{namespace}" not found')


def device_classes_exist(api: ClusterAPI, obj: Obj) -> None:
    """A claim or template must name a DeviceClass that exists."""
    if obj["kind"] not in ("ResourceClaim", "ResourceClaimTemplate"):
        return
    spec, path = (
        ((obj.get("spec") or {}).get("spec") or {}, "spec.spec")
        if obj["kind"] == "ResourceClaimTemplate"
        else (obj.get("spec") or {}, "spec")
    )
    for index, request in enumerate((spec.get("devices") or {}).get("requests") or []):
        exact = request.get("exactly") or (request.get("firstAvailable") or [{}])[0]
        name = exact.get("deviceClassName")
        if api.get("DeviceClass", str(name)) is None:
            raise ManifestError(
                f'DeviceClass "{name}" not found', field=f"{path}.devices.requests[{index}].exactly.deviceClassName"
            )

"""The lab half of the write path: a lab cluster's objects written through its API server store (one lock, one
save), created, replaced and deleted as kube-apiserver would, the system namespaces it makes at start, and what kind
and Karpenter's chart install in every lab."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from karpui import models
from karpui.clusters import karpenter_options, lab
from karpui.kinds.resources import BY_KIND, LAB, Resource
from karpui.kinds.versions import nodeclaim_v1
from karpui.people.audit import Actor
from karpui.writes.checks import (
    SYSTEM_NAMESPACES,
    device_classes_exist,
    namespace_exists,
    namespace_of,
    resource_versions,
    validate,
)
from karpui.writes.managed import Owner, given_managed_fields
from provisioner.apimachinery.defaults import set_defaults
from provisioner.cluster import storageclasses
from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import (
    OWNER_KINDS,
    PROPAGATION_FINALIZERS,
    Conflict,
    NotFound,
    Obj,
    desired,
)
from provisioner.quantity import canonical_quantities
from provisioner.sim import karpenter as sim_karpenter

# Kinds whose status a write to the main resource keeps as stored (they have a status subresource).
STATUS_KEPT = {r.kind for r in BY_KIND.values() if "status" in r.subresources}


# What a create keeps of a given status: a Node's is how it registers (kubelet posts it); others start empty.
STATUS_ON_CREATE = frozenset({"Node", "Namespace", "DRAConfig", "ResourceSlice"})


@contextmanager
def lab_write(cluster: models.Cluster, actor: Actor | None = None) -> Iterator[ClusterAPI]:
    """Where a cluster's objects are written: the lab's store; a kwok cluster's API server itself (its engine's
    informers bring the change back); never an observed cluster, which is Karpenter's. A lab write that changes
    Karpenter's options (its controller Deployments' environment) is made on every release and audited as `actor`'s."""
    if cluster.mode == models.Cluster.Mode.OBSERVE:
        raise PermissionDenied(
            f"cluster {cluster.name} is observed: karpui writes nothing there but the NodeClaim deletions of approved "
            "commands (write with kubectl, or let Karpenter)"
        )
    if cluster.mode == models.Cluster.Mode.KWOK:
        from karpui.clusters import remote
        from provisioner.adapters.direct import UncachedCluster

        with transaction.atomic():
            yield UncachedCluster(remote.transport(cluster))
        return
    with transaction.atomic(), lab.writing(cluster.name) as api:
        options_before = karpenter_options.option_env(api)
        yield api
        karpenter_options.options_written(cluster, api, options_before, actor)


def stored_version(cluster: models.Cluster, api: ClusterAPI, obj: Obj, resource: Resource) -> Obj:
    """A lab object written at another version it is served at, as stored: a v1beta1 NodeClaim converted to v1
    (what v1beta1 cannot say kept as stored, or for a new one taken from its NodePool, as Karpenter's webhook
    does); other kinds only differ in name between versions."""
    if obj.get("apiVersion") == resource.api_version or obj.get("apiVersion") not in resource_versions(resource):
        return obj  # a version not served is refused by validation, naming it
    if resource.kind != "NodeClaim":
        return {**obj, "apiVersion": resource.api_version}
    meta = obj.get("metadata") or {}
    stored = api.get("NodeClaim", str(meta.get("name", "")))
    nodepool = models.NodePool.objects.filter(
        cluster=cluster, name=(meta.get("labels") or {}).get("karpenter.sh/nodepool", "")
    ).first()
    template = ((nodepool.spec.get("template") or {}).get("spec") or {}) if nodepool else {}
    return nodeclaim_v1(
        obj,
        stored=stored,
        nodepool_expire_after=template.get("expireAfter"),
        nodepool_ref=template.get("nodeClassRef"),
    )


def copied(obj: Obj) -> Obj:
    """What a write answers: the object as written, not as the cluster's components change it right after."""
    return copy.deepcopy(obj)


def _prepared_for_create(obj: Obj) -> Obj:
    obj = canonical_quantities(obj)  # a copy, its quantities as kube-apiserver stores them ("0.5" is "500m")
    meta = obj.setdefault("metadata", {})
    for server_field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
        meta.pop(server_field, None)
    if meta.get("managedFields") == [{}]:
        meta.pop("managedFields")  # the reset sign, on a new object: none
    if obj["kind"] == "Namespace":
        obj["status"] = {"phase": "Active"}
    elif obj["kind"] in ("Pod", "PersistentVolumeClaim", "PersistentVolume"):
        # As kube-apiserver starts each: the kubelet reports the rest of a pod, the PV controller binds the volumes.
        obj["status"] = {"phase": "Pending"}
    elif obj["kind"] not in STATUS_ON_CREATE:
        obj.pop("status", None)
    return set_defaults(obj)  # what kube-apiserver defaults (a Deployment's strategy, a DaemonSet's updateStrategy)


def create_in(api: ClusterAPI, obj: Obj, resource: Resource, owner: Owner | None = None) -> Obj:
    karpenter_options.check(obj)
    obj = _prepared_for_create(obj)
    namespace_exists(api, resource, obj)
    device_classes_exist(api, obj)
    if obj["kind"] == "PersistentVolumeClaim" and not storageclasses.has_class(obj):
        # kube-apiserver's DefaultStorageClass admission: a claim that names no class gets the cluster's default.
        default = storageclasses.default_class(api.list("StorageClass"))
        if default is not None and isinstance(obj.get("spec"), dict):
            obj["spec"]["storageClassName"] = default
    if owner is not None:
        # kube-apiserver's creation owns every field to its creator: managedFields a POST sends are not kept.
        owner.created(obj, resource)
    return api.create(obj)


def stored_in(api: ClusterAPI, resource: Resource, name: str, namespace: str) -> Obj:
    """The object as `api` stores it (`namespace` ignored for a cluster-scoped kind); NotFound if there is none."""
    current = api.get(resource.kind, name, namespace if resource.namespaced else "")
    if current is None:
        raise NotFound(f'{resource.qualified} "{name}" not found')
    return current


def replace_in(api: ClusterAPI, obj: Obj, resource: Resource, subresource: str, owner: Owner | None = None) -> Obj:
    """PUT: the stored object becomes `obj`, but for what the server owns; a stale resourceVersion is a Conflict."""
    meta = obj.get("metadata") or {}
    namespace = namespace_of(obj, resource)
    stored = api.get(resource.kind, str(meta.get("name", "")), namespace)
    if stored is None:
        raise NotFound(f'{resource.qualified} "{meta.get("name")}" not found')
    given = str(meta.get("resourceVersion") or "")
    if given and given != stored["metadata"].get("resourceVersion"):
        raise Conflict(f'{resource.qualified} "{meta.get("name")}": the object has been modified')
    if subresource == "status":
        new = {**copy.deepcopy(stored), "status": copy.deepcopy(obj.get("status") or {})}
        if resource.kind in STATUS_ON_CREATE:
            validate(new, resource, status=True)  # a Node's allocatable is what the scheduler packs against
    else:
        # Defaulted and canonical as on create, before the comparison with the stored object: "0.5" over "500m"
        # changes nothing, as on kube-apiserver.
        new = set_defaults(canonical_quantities(obj))
        new["metadata"] = {
            **new.get("metadata", {}),
            **{
                key: stored["metadata"][key]
                for key in ("uid", "creationTimestamp", "deletionTimestamp", "generation", "namespace")
                if key in stored["metadata"]
            },
        }
        if resource.kind in STATUS_KEPT:
            if "status" in stored:
                new["status"] = copy.deepcopy(stored["status"])
            else:
                new.pop("status", None)
        validate(new, resource)
        device_classes_exist(api, new)
    new["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
    if given_managed_fields(new["metadata"], stored["metadata"]) and owner is not None:
        owner.track(stored, new, resource, subresource)
    if new == stored:
        return stored  # kube-apiserver writes nothing (and keeps the version) when an update changes nothing
    written = api.update(new, spec_changed=desired(new) != desired(stored))
    if written["metadata"].get("deletionTimestamp") and not written["metadata"].get("finalizers"):
        api.delete(resource.kind, written["metadata"]["name"], namespace)  # the last finalizer went
    return written


def delete_in(api: ClusterAPI, resource: Resource, name: str, namespace: str, propagation: str) -> Obj:
    obj = api.get(resource.kind, name, namespace)
    if obj is None:
        raise NotFound(f'{resource.qualified} "{name}" not found')
    finalizer = PROPAGATION_FINALIZERS.get(propagation)
    meta = obj["metadata"]
    finalizers = meta.get("finalizers") or []
    if finalizer and resource.kind in OWNER_KINDS and not meta.get("deletionTimestamp") and finalizer not in finalizers:
        # As kube-apiserver does: the owner stays, marked, until the garbage collector has orphaned its dependents
        # (Orphan) or deleted them (Foreground), and then removes the finalizer.
        meta["finalizers"] = [*finalizers, finalizer]
        api.update(obj)
    if resource.kind == "Namespace":  # the namespace controller empties it, then the namespace goes
        for kind, other in BY_KIND.items():
            if other.namespaced and other.store == LAB:
                for item in api.list(kind, namespace=name):
                    api.delete(kind, item["metadata"]["name"], name)
    return copied(api.delete(resource.kind, name, namespace))


def system_namespaces_ensure(cluster: models.Cluster) -> None:
    """Make the namespaces kube-apiserver keeps in every cluster, where missing (a new cluster, an older lab)."""
    present = models.KubeObject.objects.filter(cluster=cluster, kind="Namespace", name__in=SYSTEM_NAMESPACES).count()
    if present == len(SYSTEM_NAMESPACES):
        return
    with lab_write(cluster) as api:
        for name in SYSTEM_NAMESPACES:
            if api.get("Namespace", name) is None:
                api.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "status": {"phase": "Active"}}
                )


def lab_install_ensure(cluster: models.Cluster) -> None:
    """What `kind create cluster` and `helm install karpenter` leave in a lab, where missing (a new cluster, an older
    lab, a reset one): the system namespaces, kind's control-plane node `<cluster>-control-plane`, and Karpenter's
    install (provisioner.sim.karpenter: its Deployment in kube-system and in `karpenter`), whose controller pods then
    run on that node. A lab standing in for a real cluster (lab_components other than "all") has no Karpenter of its
    own: karpui drives it from outside, as it drives a kwok cluster; with KARPUI_LAB_INSTALL false no lab has. Each
    object is owned by who made it in kind: the node by the kubelet, the chart's objects by helm."""
    system_namespaces_ensure(cluster)
    if not settings.KARPUI_LAB_INSTALL:
        return
    if cluster.mode != models.Cluster.Mode.LAB or cluster.lab_components != models.Cluster.LabComponents.ALL:
        return
    node = sim_karpenter.control_plane_node(cluster.name, cluster.clock.strftime("%Y-%m-%dT%H:%M:%SZ"))
    # Rendered with the deployment's policies, as a chart is with the values it was given: the lab reads the
    # Deployment's environment over the settings, and the chart always sets these two.
    chart = sim_karpenter.install(settings.KARPUI_PREFERENCE_POLICY, settings.KARPUI_MIN_VALUES_POLICY)
    wanted = [(node, "kubelet"), *((obj, "helm") for obj in chart)]
    keys = {(obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]) for obj, _ in wanted}
    present = set(
        models.KubeObject.objects.filter(
            cluster=cluster, kind__in={kind for kind, _, _ in keys}, name__in={name for _, _, name in keys}
        ).values_list("kind", "namespace", "name")
    )
    if keys <= present:
        return
    with lab_write(cluster) as api:
        for obj, manager in wanted:
            meta = obj["metadata"]
            if api.get(obj["kind"], meta["name"], meta.get("namespace", "")) is None:
                create_in(api, obj, BY_KIND[obj["kind"]], Owner(cluster, manager))

"""The configuration tables' writes: NodePools, node classes and DeviceDeclarations validated, mirrored to a kwok cluster, stored and audited."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from karpui import models
from karpui.clusters import configuration, store
from karpui.people.audit import Actor, audit_event_create
from provisioner import nodeclasses
from provisioner.apimachinery import fieldmanager
from provisioner.apimachinery.strategic import root_type
from provisioner.dra.declarations import DeviceDeclaration, parse_declaration
from provisioner.labels import APPROVAL_MODE, APPROVAL_THRESHOLD
from provisioner.manifests import Document, ManifestError
from provisioner.manifests.cluster import VALIDATORS, validate_cluster_object
from provisioner.manifests.nodeclass import NODE_CLASS_KINDS, nodeclass_to_manifest, parse_nodeclass
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool, update_problem
from provisioner.objects import NodeClass, NodePool
from provisioner.scheduling.satisfiable import Unsatisfiable, unsatisfiable


@dataclass(frozen=True)
class ApplyResult:
    """One line of `karp apply` output: `nodepool.karpenter.sh/default configured`."""

    resource: str
    name: str
    outcome: str  # created, configured, unchanged

    def __str__(self) -> str:
        return f"{self.resource}/{self.name} {self.outcome}"


# Approval modes in which a command runs without a person: taking a NodePool there from manual is itself a decision.
UNATTENDED_MODES = ("auto", "auto-below")


class ApprovalModeDecision(PermissionDenied):
    """A write that would take a NodePool's approval mode away from manual without an approver's decision: refused
    whoever writes it (karp, the editor, the admin, the Kubernetes API), in these words, and nothing is written."""


def approval_mode_loosened(before: Mapping[str, str] | None, after: Mapping[str, str]) -> str | None:
    """The unattended mode `after` takes a NodePool to from manual (no annotation is Karpenter's "auto"), or None."""
    if before is None or before.get(APPROVAL_MODE) != "manual":
        return None
    mode = after.get(APPROVAL_MODE, "auto")
    return mode if mode in UNATTENDED_MODES else None


def approval_mode_refusal(
    *,
    name: str,
    before: Mapping[str, str] | None,
    after: Mapping[str, str],
    actor: Actor,
    decided: models.ApprovalModeRequest | None = None,
) -> str | None:
    """Why writing `after` over `before` may not take NodePool `name`'s approval mode from manual to an unattended
    mode (None: it is no such change, or it was decided: `decided` is the request an approver approved, or the writer
    is an approver and four eyes are off)."""
    mode = approval_mode_loosened(before, after)
    if mode is None or (decided is not None and decided.nodepool == name and decided.mode == mode):
        return None
    if _decides_alone(actor):
        return None
    who = "someone other than who asks (four eyes)" if settings.KARPUI_FOUR_EYES else "an approver"
    return (
        f'nodepools.karpenter.sh "{name}": taking {APPROVAL_MODE} from manual to {mode} lets commands run without a '
        f"person, so it is a decision for {who}: ask for it on the Disruption page or with `karp approval-mode {name} "
        f"{mode} --as USER --reason TEXT`, and an approver approves it; nothing was written"
    )


def _decides_alone(actor: Actor) -> bool:
    user = actor.user
    approver = bool(user is not None and user.is_active and user.has_perm("karpui.approve_disruption"))  # type: ignore[attr-defined]
    return approver and not settings.KARPUI_FOUR_EYES


def approval_mode_guard(
    *,
    cluster: models.Cluster,
    name: str,
    before: Mapping[str, str] | None,
    after: Mapping[str, str],
    actor: Actor,
    decided: models.ApprovalModeRequest | None = None,
) -> None:
    """Refuse (ApprovalModeDecision) what approval_mode_refusal refuses; a loosening an approver writes alone (four
    eyes off) is their decision, audited as such."""
    refusal = approval_mode_refusal(name=name, before=before, after=after, actor=actor, decided=decided)
    if refusal is not None:
        raise ApprovalModeDecision(refusal)
    mode = approval_mode_loosened(before, after)
    if mode is not None and decided is None:
        audit_event_create(
            actor,
            "approve-mode-change",
            "NodePool",
            name,
            {APPROVAL_MODE: "manual"},
            {APPROVAL_MODE: mode},
            "written by an approver, who decides alone while four eyes are off",
            cluster=cluster,
        )


def in_cluster(cluster: models.Cluster, manifest: dict[str, Any]) -> None:
    """A kwok cluster's NodePools and node classes are its own objects: write there first (the row is the mirror
    the engine keeps). An observed cluster's are Karpenter's, which karpui never writes."""
    if cluster.mode == models.Cluster.Mode.OBSERVE:
        raise PermissionDenied(f"cluster {cluster.name} is observed: its {manifest['kind']}s are Karpenter's to write")
    if cluster.mode == models.Cluster.Mode.KWOK:
        from karpui.clusters import remote

        with _cluster_answering(cluster):
            remote.apply_object(cluster, manifest)


GATE_ANNOTATIONS = (APPROVAL_MODE, APPROVAL_THRESHOLD)  # what karpui writes in an observed cluster's NodePool


def gate_in_cluster(cluster: models.Cluster, nodepool: str, annotations: dict[str, str]) -> None:
    """An observed cluster's NodePool is Karpenter's, but its approval mode is the switch of karpui's gate over it
    (README, "The gate over a real Karpenter"): only karpui's approval annotations are written there (none for
    auto), the rest of the NodePool left as its owner has it. A NodePool changed meanwhile (409) is the writer's to try again."""
    from karpui.clusters import remote

    client = remote.api(cluster)
    with _cluster_answering(cluster):
        current = client.get("NodePool", nodepool)
        if current is None:
            raise ValidationError(f'NodePool "{nodepool}" is no longer in cluster {cluster.name}')
        kept = {k: v for k, v in (current["metadata"].get("annotations") or {}).items() if k not in GATE_ANNOTATIONS}
        # auto is the default: the gate turned off leaves no annotation of karpui's behind.
        mine = {k: v for k, v in annotations.items() if k in GATE_ANNOTATIONS and (k, v) != (APPROVAL_MODE, "auto")}
        client.update({**current, "metadata": {**current["metadata"], "annotations": {**kept, **mine}}})


@contextlib.contextmanager
def _cluster_answering(cluster: models.Cluster) -> Iterator[None]:
    """Turn a kwok cluster's failure to take a write into ClusterUnavailable, which says so in words and is the
    writer's 409, never a 500: the cluster's state, not karpui's fault nor the request's."""
    from provisioner.cluster.objects import APIError, NotFound

    try:
        yield
    except NotFound:
        raise
    except APIError as error:
        raise ClusterUnavailable(
            f"cluster {cluster.name}'s API server did not take the write ({type(error).__name__}: "
            f"{str(error)[:300]}): nothing was saved; try again when it answers"
        ) from None


def nodepool_check(*, cluster: models.Cluster, nodepool: NodePool) -> None:
    """Refuse a NodePool that no instance type of its node class's catalog can satisfy, naming the requirement."""
    types = configuration.lab_config(cluster).catalogs.get(nodepool.node_class_ref.kind, [])
    problem = unsatisfiable(nodepool, types)
    if problem is not None:
        raise ManifestError(problem.message, field=problem.field)


def nodepool_resolve(*, cluster: models.Cluster, nodepool: NodePool) -> NodePool:
    """The NodePool with a v1beta1 nodeClassRef that names no kind resolved to the node class it names among those
    that exist now (provisioner.nodeclasses); refused, naming the requirement, when neither kind could serve it.
    Any other NodePool as it is."""
    if not nodeclasses.kindless(nodepool):
        return nodepool
    existing = models.NodeClass.objects.filter(cluster=cluster, name=nodepool.node_class_ref.name)
    resolution = nodeclasses.resolve(
        nodepool, set(existing.values_list("kind", flat=True)), configuration.catalogs_by_node_class()
    )
    if isinstance(resolution, Unsatisfiable):
        raise ManifestError(resolution.message, field=resolution.field)
    return replace(nodepool, node_class_ref=resolution.ref)


def _nodepools_follow(cluster: models.Cluster, name: str, actor: Actor) -> None:
    """A node class named `name` came or went: each NodePool whose kind-less v1beta1 reference names it takes the
    node class the rule now names, written as the change it is (generation, resourceVersion, audit row). When the
    last node class of that name went, a NodePool keeps its kind and waits for it, not Ready."""
    if cluster.mode != models.Cluster.Mode.LAB:
        return  # a kwok cluster's NodePools are its own objects, stored at v1
    if not models.NodeClass.objects.filter(cluster=cluster, name=name).exists():
        return
    for row in models.NodePool.objects.select_for_update().filter(cluster=cluster).order_by("name"):
        try:
            nodepool = store.nodepool_domain(row)
        except ManifestError:
            continue  # left out of the lab until fixed (configuration.lab_config says why)
        if not nodeclasses.kindless(nodepool) or nodepool.node_class_ref.name != name:
            continue
        try:
            resolved = nodepool_resolve(cluster=cluster, nodepool=nodepool)
        except ManifestError:
            continue  # the catalogs changed since it was written: it keeps its node class
        if resolved.node_class_ref != nodepool.node_class_ref:
            manifest = nodepool_to_manifest(resolved)
            fields = {
                "labels": manifest["metadata"].get("labels", {}),
                "annotations": manifest["metadata"].get("annotations", {}),
                "spec": manifest["spec"],
                "weight": resolved.weight,
            }
            _update(row, fields, actor, "NodePool", "nodepool.karpenter.sh", store.nodepool_manifest)


def _nodepools_await(cluster: models.Cluster, kind: str, name: str) -> None:
    """The NodePools of a node class that went: their stored status said Ready; until the NodePool controller runs
    again (the next tick, or the next lab write), it says they await reconciliation, never Ready."""
    for row in models.NodePool.objects.filter(cluster=cluster).order_by("name"):
        ref = ((row.spec.get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
        if (ref.get("kind"), ref.get("name")) == (kind, name) and row.status:
            row.status = {}
            row.save(update_fields=["status"])


class Conflict(Exception):
    """The object changed since the version the writer read: nothing was written (Kubernetes' 409 Conflict)."""


class ClusterUnavailable(Conflict):
    """A kwok cluster's API server did not take a write (down, failing, or refusing it): nothing was saved. A
    Conflict, so every writer answers it as one (the editor's 409 page, the API's 409 Status)."""


def managed_fields_track(
    row: models.NodePool | models.NodeClass,
    before: dict[str, Any] | None,
    manifest: Callable[[Any], dict[str, Any]],
    actor: Actor,
) -> None:
    """Record the write that made `row` what it is now in its managedFields, as kube-apiserver does for every
    create and update: a new object's fields are its creator's; an update's changed fields become the writer's and
    no longer anyone else's. `before` is the object before the update (None: just created); one with no
    managedFields (stored before they were kept) stays without, as kube-apiserver never starts tracking on an
    update. Saved at once."""
    current = manifest(row)
    root = root_type(current["apiVersion"], current["kind"])
    after = {k: v for k, v in current.items() if k != "status"}
    time = row.cluster.clock.strftime("%Y-%m-%dT%H:%M:%SZ")
    if before is None:
        managed = fieldmanager.created(after, manager=actor.field_manager, root_type=root, time=time)
    elif not before["metadata"].get("managedFields"):
        return
    else:
        before = {k: v for k, v in before.items() if k != "status"}
        managed = fieldmanager.updated(before, after, manager=actor.field_manager, root_type=root, time=time)
    encoded = [entry.to_json() for entry in managed]
    if encoded != row.managed_fields:
        type(row).objects.filter(pk=row.pk).update(managed_fields=encoded)
        row.managed_fields = encoded


@transaction.atomic
def nodepool_apply(
    *,
    cluster: models.Cluster,
    nodepool: NodePool,
    actor: Actor,
    resource_version: int | None = None,
    decided: models.ApprovalModeRequest | None = None,
) -> ApplyResult:
    """Create or update a NodePool from its validated domain value (refused, writing nothing, if unsatisfiable).
    With `resource_version` (the version an editor was opened at), a NodePool changed since is a Conflict, as an
    update carrying metadata.resourceVersion is on a Kubernetes API server: nobody's change is lost unseen. Taking
    its approval mode from manual to an unattended one needs a decision (approval_mode_guard; `decided`)."""
    kindless = nodeclasses.kindless(nodepool)
    nodepool = nodepool_resolve(cluster=cluster, nodepool=nodepool)
    nodepool_check(cluster=cluster, nodepool=nodepool)
    stored = models.NodePool.objects.filter(cluster=cluster, name=nodepool.name).values_list("spec", flat=True).first()
    if stored is not None:
        # The CRD's transition rules: static or dynamic for its whole life, and the node class's group and kind kept
        # (but for a kind-less v1beta1 reference, whose kind karpui chose and may choose again).
        problem = update_problem(stored, nodepool, keep_ref=not kindless)
        if problem is not None:
            raise problem
    manifest = nodepool_to_manifest(nodepool)
    if resource_version is not None:
        now = (
            models.NodePool.objects.select_for_update()
            .filter(cluster=cluster, name=nodepool.name)
            .values_list("resource_version", flat=True)
            .first()
        )
        if now != resource_version:
            raise Conflict(
                f'Operation cannot be fulfilled on nodepools.karpenter.sh "{nodepool.name}": the object has been '
                f"modified (resourceVersion {resource_version} when opened, {now if now is not None else 'deleted'} "
                "now); nothing was saved"
            )
    fields = {
        "labels": manifest["metadata"].get("labels", {}),
        "annotations": manifest["metadata"].get("annotations", {}),
        "spec": manifest["spec"],
        "weight": nodepool.weight,
    }
    row = models.NodePool.objects.select_for_update().filter(cluster=cluster, name=nodepool.name).first()
    approval_mode_guard(
        cluster=cluster,
        name=nodepool.name,
        before=dict(row.annotations or {}) if row is not None else None,
        after=fields["annotations"],
        actor=actor,
        decided=decided,
    )
    in_cluster(cluster, manifest)
    if row is None:
        row = models.NodePool.objects.create(cluster=cluster, name=nodepool.name, **fields)
        managed_fields_track(row, None, store.nodepool_manifest, actor)
        audit_event_create(actor, "create", "NodePool", row.name, None, store.nodepool_manifest(row), cluster=cluster)
        return ApplyResult("nodepool.karpenter.sh", row.name, "created")
    return _update(row, fields, actor, "NodePool", "nodepool.karpenter.sh", store.nodepool_manifest)


def _update(
    row: Any, fields: dict[str, Any], actor: Actor, kind: str, resource: str, manifest: Callable[[Any], dict[str, Any]]
) -> ApplyResult:
    """Write changed fields as the API server would: resourceVersion always, generation when the spec changed."""
    if all(getattr(row, key) == value for key, value in fields.items() if key != "weight"):
        return ApplyResult(resource, row.name, "unchanged")
    before = manifest(row)
    if row.spec != fields["spec"]:
        row.generation += 1
    for key, value in fields.items():
        setattr(row, key, value)
    row.resource_version += 1
    row.save()
    managed_fields_track(row, before, manifest, actor)
    audit_event_create(actor, "update", kind, row.name, before, manifest(row), cluster=row.cluster)
    return ApplyResult(resource, row.name, "configured")


@transaction.atomic
def nodeclass_apply(*, cluster: models.Cluster, nodeclass: NodeClass, actor: Actor) -> ApplyResult:
    resource = f"{nodeclass.kind.lower()}.{nodeclass.group}"
    in_cluster(cluster, nodeclass_to_manifest(nodeclass))
    row = (
        models.NodeClass.objects.select_for_update()
        .filter(cluster=cluster, kind=nodeclass.kind, name=nodeclass.name)
        .first()
    )
    fields = {
        "api_version": nodeclass.api_version,
        "labels": nodeclass.labels,
        "annotations": nodeclass.annotations,
        "spec": nodeclass.spec,
    }
    if row is None:
        row = models.NodeClass.objects.create(cluster=cluster, kind=nodeclass.kind, name=nodeclass.name, **fields)
        managed_fields_track(row, None, store.nodeclass_manifest, actor)
        audit_event_create(
            actor, "create", nodeclass.kind, row.name, None, store.nodeclass_manifest(row), cluster=cluster
        )
        _nodepools_follow(cluster, nodeclass.name, actor)
        return ApplyResult(resource, row.name, "created")
    return _update(row, fields, actor, nodeclass.kind, resource, store.nodeclass_manifest)


@transaction.atomic
def device_declaration_apply(*, declaration: DeviceDeclaration, actor: Actor) -> ApplyResult:
    row = models.DeviceDeclaration.objects.select_for_update().filter(name=declaration.name).first()
    spec = dict(declaration.spec or {})
    if row is None:
        models.DeviceDeclaration.objects.create(name=declaration.name, spec=spec)
        audit_event_create(actor, "create", "DeviceDeclaration", declaration.name, None, spec, cluster=None)
        return ApplyResult("devicedeclaration.karpui.dev", declaration.name, "created")
    if row.spec == spec:
        return ApplyResult("devicedeclaration.karpui.dev", declaration.name, "unchanged")
    before, row.spec = row.spec, spec
    row.save()
    audit_event_create(actor, "update", "DeviceDeclaration", declaration.name, before, spec, cluster=None)
    return ApplyResult("devicedeclaration.karpui.dev", declaration.name, "configured")


# kind -> (parse a document into a domain value, store it). Later kinds register here.
Applier = Callable[[models.Cluster, Any, Actor], ApplyResult]


APPLIERS: dict[str, tuple[Callable[[dict[str, Any]], Any], Applier]] = {
    "NodePool": (parse_nodepool, lambda c, v, a: nodepool_apply(cluster=c, nodepool=v, actor=a)),
    "DeviceDeclaration": (parse_declaration, lambda c, v, a: device_declaration_apply(declaration=v, actor=a)),
    **{
        kind: (parse_nodeclass, lambda c, v, a: nodeclass_apply(cluster=c, nodeclass=v, actor=a))
        for kind in NODE_CLASS_KINDS
    },
}


def parse_document(document: Document) -> Any:
    """Validate one document into its domain value; errors carry the document's position and identity."""
    entry = APPLIERS.get(document.kind)
    try:
        if entry is not None:
            return entry[0](document.body)
        if document.kind in VALIDATORS:
            return validate_cluster_object(document.body)
        raise ManifestError(f'no matches for kind "{document.kind}" in version "{document.api_version}"', field="kind")
    except ManifestError as error:
        raise error.located(document=document.index, kind=document.kind, name=document.name) from None


def resource_name(kind: str, api_version: str) -> str:
    """kubectl's `deployment.apps` style: lowercase kind, then the API group if there is one."""
    group = api_version.split("/")[0] if "/" in api_version else ""
    return f"{kind.lower()}.{group}" if group else kind.lower()


def config_delete(*, cluster: models.Cluster, kind: str, name: str, actor: Actor) -> str:
    """Delete a NodePool or node class by kind and name; raises LookupError when it does not exist."""
    with transaction.atomic():
        if kind == "DeviceDeclaration":
            declaration = models.DeviceDeclaration.objects.filter(name=name).first()
            if declaration is None:
                raise LookupError(f'devicedeclaration.karpui.dev "{name}" not found')
            audit_event_create(actor, "delete", kind, name, declaration.spec, None, cluster=None)
            declaration.delete()
            return f'devicedeclaration.karpui.dev "{name}" deleted'
        if kind == "NodePool":
            row: models.NodePool | models.NodeClass | None = models.NodePool.objects.filter(
                cluster=cluster, name=name
            ).first()
            before = store.nodepool_manifest(row) if row else None
            resource = "nodepool.karpenter.sh"
        else:
            row = models.NodeClass.objects.filter(cluster=cluster, kind=kind, name=name).first()
            before = store.nodeclass_manifest(row) if row else None
            resource = f"{kind.lower()}.{row.api_version.split('/')[0]}" if row else kind.lower()
        if row is None:
            raise LookupError(f'{resource} "{name}" not found')
        if cluster.mode == models.Cluster.Mode.OBSERVE:
            raise PermissionDenied(f"cluster {cluster.name} is observed: its {kind}s are Karpenter's to delete")
        if cluster.mode == models.Cluster.Mode.KWOK:
            from karpui.clusters import remote

            with _cluster_answering(cluster):
                remote.delete_object(cluster, kind, name)
        row.delete()
        audit_event_create(actor, "delete", kind, name, before, None, cluster=cluster)
        if kind in NODE_CLASS_KINDS and cluster.mode == models.Cluster.Mode.LAB:
            _nodepools_follow(cluster, name, actor)
            _nodepools_await(cluster, kind, name)
    return f'{resource} "{name}" deleted'

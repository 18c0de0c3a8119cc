"""Configuration models: clusters, NodePools, node classes, instance catalogs, and the audit trail."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone

if TYPE_CHECKING:
    from provisioner.pods import Pod


class Cluster(models.Model):
    """A cluster karpui manages: the simulated lab, a kwok cluster, or an observed Karpenter cluster."""

    class Mode(models.TextChoices):
        LAB = "lab", "lab (simulated)"
        KWOK = "kwok", "kwok (real API server)"
        OBSERVE = "observe", "observe (real Karpenter)"

    IN_CLUSTER = "in-cluster"

    class LabComponents(models.TextChoices):
        ALL = "all", "the simulated cluster side and karpui's controllers"
        CLUSTER = "cluster", "the simulated cluster side only (karpui drives it over its API, as a real cluster)"
        NONE = "none", "nothing: a bare API server"

    name = models.SlugField(max_length=63, unique=True)
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.LAB)
    # How a kwok or observe cluster is reached: a kubeconfig file (empty: $KUBECONFIG or ~/.kube/config) and one of
    # its contexts (empty: its current one), or IN_CLUSTER: the service account of the pod karpui runs in.
    kubeconfig = models.CharField(max_length=1024, blank=True)
    kube_context = models.CharField(max_length=253, blank=True)
    clock = models.DateTimeField(default=timezone.now, help_text="The cluster's current time (virtual in the lab).")
    ticked_at = models.DateTimeField(null=True, blank=True, help_text="Wall time of the last periodic tick.")
    created_at = models.DateTimeField(auto_now_add=True)
    lab_state = models.JSONField(default=dict, blank=True, help_text="The lab's controller state (batcher, RNG).")
    # Changed by every full run of the lab's engine: a process that kept the lab in memory after its own run may
    # go on from memory only while this is still the token it wrote (karpui.clusters.lab's warm engine).
    engine_token = models.CharField(max_length=32, blank=True)
    # A lab run as a stand-in for a real cluster (served over the Kubernetes API to a kwok- or observe-mode engine)
    # runs only its cluster side: kube-scheduler, kubelets, workload controllers, kwok nodes, DRA driver.
    lab_components = models.CharField(max_length=16, choices=LabComponents.choices, default=LabComponents.ALL)
    # The lease that keeps two workers from reconciling this cluster at once (DB mode; Redis has its own lock).
    lease_holder = models.CharField(max_length=128, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_epoch = models.PositiveBigIntegerField(default=0, help_text="Fencing token: bumped on every acquisition.")
    # A kwok or observe cluster's engines lead by a Kubernetes Lease; each that begins to lead bumps this, and its
    # records commit only while it is still theirs, so a former leader waking mid-step cannot commit over its successor.
    engine_term = models.PositiveBigIntegerField(
        default=0, help_text="Fencing token of the engine leading this cluster: bumped each time one begins to lead."
    )
    paused_until = models.DateTimeField(null=True, blank=True, help_text="Voluntary disruption is paused until then.")
    pause_reason = models.TextField(blank=True)
    paused_by = models.CharField(max_length=150, blank=True)
    cost_state = models.JSONField(
        default=dict,
        blank=True,
        help_text="NodeClaim counts as of the last run, and the last cost sample per NodePool (karpui.costs).",
    )
    # The Kubernetes API's resourceVersion sequence: every write of one of the cluster's objects, NodePools or
    # node classes takes the next value, under this row's lock, so versions are in commit order.
    resource_version = models.PositiveBigIntegerField(default=0)
    compacted_resource_version = models.PositiveBigIntegerField(
        default=0,
        help_text="The change log holds every change after this resourceVersion; watching from before it is 410 Gone.",
    )

    class Meta:
        permissions = [
            ("approve_disruption", "Can approve or deny disruption commands"),
            ("pause_disruption", "Can pause and resume voluntary disruption"),
            ("request_disruption", "Can ask for a node to be disrupted"),
        ]

    def __str__(self) -> str:
        return self.name

    def is_paused(self, now: datetime) -> bool:
        return self.paused_until is not None and self.paused_until > now


class KubeObjectMixin(models.Model):
    """Fields every stored Kubernetes-shaped object has."""

    uid = models.UUIDField(default=uuid.uuid4, editable=False, unique=True)
    labels = models.JSONField(default=dict, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    spec = models.JSONField(default=dict)
    generation = models.PositiveBigIntegerField(default=1)
    resource_version = models.PositiveBigIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    # metadata.managedFields: who owns which fields, once a server-side apply has written the object.
    managed_fields = models.JSONField(default=list, blank=True)

    class Meta:
        abstract = True

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": self.name,
            "uid": str(self.uid),
            "resourceVersion": str(self.resource_version),
            "generation": self.generation,
            "creationTimestamp": self.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if self.labels:
            meta["labels"] = dict(self.labels)
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        if self.managed_fields:
            meta["managedFields"] = list(self.managed_fields)
        return meta


class NodeClass(KubeObjectMixin):
    """A KWOKNodeClass or EC2NodeClass; its spec is stored as given."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="node_classes")
    api_version = models.CharField(max_length=128)
    kind = models.CharField(max_length=64)
    name = models.CharField(max_length=253)

    class Meta:
        verbose_name = "node class"
        verbose_name_plural = "node classes"
        constraints = [models.UniqueConstraint(fields=["cluster", "kind", "name"], name="nodeclass_unique_name")]
        ordering = ["kind", "name"]

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


class NodePool(KubeObjectMixin):
    """A karpenter.sh/v1 NodePool; `spec` holds the validated, defaulted v1 spec."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodepools")
    name = models.CharField(max_length=253)
    # Denormalised from spec for ordering and listing; services keep it in step.
    weight = models.PositiveSmallIntegerField(null=True, blank=True)
    status = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = "NodePool"
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="nodepool_unique_name")]
        # Karpenter's OrderByWeight: the heaviest first, no weight counting as 0 (PostgreSQL puts NULLs first in
        # a descending order, SQLite last), then by name, later in the alphabet first.
        ordering = [Coalesce("weight", 0).desc(), "-name"]

    def __str__(self) -> str:
        return self.name


class KubeObject(models.Model):
    """A Kubernetes object of a lab cluster (Pod, Node, NodeClaim, Deployment, ...), stored as its manifest."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="kube_objects")
    kind = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64)
    resource_version = models.PositiveBigIntegerField(default=0)
    body = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)
    # Summaries the dashboard aggregates in SQL instead of reading every body (filled for pods on save).
    phase = models.CharField(max_length=32, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    unschedulable = models.BooleanField(default=False)
    cpu_millis = models.BigIntegerField(default=0)
    memory_bytes = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "kind", "namespace", "name"], name="kubeobject_unique_name")
        ]
        # (cluster, kind, namespace) lookups use the unique constraint's index: its leading columns.
        indexes = [
            models.Index(fields=["cluster", "kind", "node_name"]),
            models.Index(fields=["cluster", "kind", "unschedulable"]),
        ]
        ordering = ["kind", "namespace", "name"]

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace + '/' if self.namespace else ''}{self.name}"

    SUMMARY_FIELDS = ("phase", "node_name", "unschedulable", "cpu_millis", "memory_bytes")

    @staticmethod
    def summary(body: dict[str, Any], pod: Pod | None = None) -> dict[str, Any]:
        """The summary columns for an object: pods, a DisruptionCommand's phase, the node an Event is about; other
        kinds keep the defaults. `pod`: a Pod's view already parsed (the engine's, cached per version)."""
        if body.get("kind") == "DisruptionCommand":
            return {"phase": (body.get("status") or {}).get("phase") or ""}
        if body.get("kind") == "Event":
            # So a node's page finds its events without reading every body (Events expire after an hour, so
            # rows from before this column was filled need no backfill).
            involved = body.get("involvedObject") or {}
            return {"node_name": involved.get("name", "") if involved.get("kind") in ("Node", "NodeClaim") else ""}
        if body.get("kind") != "Pod":
            return {}
        if pod is None:
            from provisioner.manifests.pod import pod_from_manifest

            pod = pod_from_manifest(body)
        status = body.get("status") or {}
        return {
            "phase": status.get("phase") or "Pending",
            "node_name": (body.get("spec") or {}).get("nodeName") or "",
            "unschedulable": pod.unschedulable and not pod.node_name,
            "cpu_millis": pod.requests.get("cpu", 0),
            "memory_bytes": pod.requests.get("memory", 0) // 1000,
        }


class OrderedJSONField(models.JSONField):  # type: ignore[type-arg]
    """A JSON object whose keys keep the order they were written in: PostgreSQL's json, not jsonb, which sorts keys
    (a log record's fields read as the controller logged them, on every database)."""

    def db_type(self, connection: Any) -> str | None:
        return "json" if connection.vendor == "postgresql" else super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        from psycopg.types.json import Json  # psycopg only where PostgreSQL is: Django sends Jsonb, sorted on the way

        return Json(value if prepared else self.get_prep_value(value), dumps=lambda v: json.dumps(v, cls=self.encoder))

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        # psycopg decodes json itself (Django has it hand jsonb over as text only).
        return (
            value
            if value is None or not isinstance(value, str)
            else super().from_db_value(value, expression, connection)
        )


class LogEntry(models.Model):
    """A controller log record (Karpenter's message names and fields) at the cluster's time."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="log_entries")
    time = models.DateTimeField(db_index=True)
    level = models.CharField(max_length=8)
    logger = models.CharField(max_length=128)
    message = models.CharField(max_length=255, db_index=True)  # whole, or its first 255 characters (indexed)
    # The whole message when it is longer than `message` holds ("Consolidation rejected: " and a command's text,
    # v0.37's "disrupting via ..." naming each node): nothing a controller said is cut short.
    full_message = models.TextField(blank=True, default="")
    fields = OrderedJSONField(default=dict)

    class Meta:
        ordering = ["time", "id"]
        verbose_name_plural = "log entries"

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%dT%H:%M:%SZ} {self.text}"

    @property
    def text(self) -> str:
        """The whole message."""
        return self.full_message or self.message

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "level": self.level,
            "logger": self.logger,
            "message": self.text,
            **self.fields,
        }


class Catalog(models.Model):
    """A set of instance types, used by the NodePools whose node class kind is listed."""

    name = models.SlugField(max_length=63, unique=True)
    description = models.TextField(blank=True)
    node_class_kinds = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class InstanceType(models.Model):
    """One instance type of a catalog; capacity and overhead are canonical quantity strings."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="instance_types")
    name = models.CharField(max_length=253)
    labels = models.JSONField(default=dict, blank=True)
    capacity = models.JSONField(default=dict)
    overhead = models.JSONField(default=dict, blank=True)
    devices = models.JSONField(default=list, blank=True, help_text="DRA device declarations.")
    # Denormalised for filtering and sorting in the catalog views.
    cpu_millis = models.BigIntegerField(default=0)
    memory_bytes = models.BigIntegerField(default=0)
    pods = models.IntegerField(default=0)
    arch = models.CharField(max_length=32, blank=True)
    os = models.CharField(max_length=32, blank=True)
    family = models.CharField(max_length=64, blank=True)
    position = models.PositiveIntegerField(default=0, help_text="Order within the catalog file.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "name"], name="instancetype_unique_name")]
        ordering = ["catalog", "position"]
        indexes = [models.Index(fields=["family", "arch", "os"]), models.Index(fields=["cpu_millis", "memory_bytes"])]

    def __str__(self) -> str:
        return self.name


class Offering(models.Model):
    instance_type = models.ForeignKey(InstanceType, on_delete=models.CASCADE, related_name="offerings")
    zone = models.CharField(max_length=63)
    capacity_type = models.CharField(max_length=32)
    price = models.FloatField(help_text="US dollars per hour.")
    available = models.BooleanField(default=True)
    # A reserved offering's capacity reservation: its id, its type (default or capacity-block) and how many
    # instances it holds; empty and 0 for on-demand and spot.
    reservation_id = models.CharField(max_length=63, blank=True, default="")
    reservation_type = models.CharField(max_length=32, blank=True, default="")
    reservation_capacity = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["instance_type", "zone", "capacity_type", "reservation_id"], name="offering_unique"
            )
        ]
        ordering = ["instance_type", "id"]

    def __str__(self) -> str:
        return f"{self.instance_type.name} {self.zone} {self.capacity_type} ${self.price:.6f}/h"


class DeviceDeclaration(models.Model):
    """Devices a driver will publish on nodes of the instance types a label selector picks (DRA)."""

    name = models.SlugField(max_length=253, unique=True)
    spec = models.JSONField(help_text="The validated spec: instanceTypeSelector, driver, pool, devices, catalog.")
    updated_at = models.DateTimeField(auto_now=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Declarations apply to every cluster, so a write advances every cluster's sequence to one common value.
    resource_version = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ApprovalModeRequest(models.Model):
    """A request to take a NodePool's approval mode away from manual (to auto or auto-below, where commands run
    without a person): a decision an approver makes, and under four eyes someone other than who asked. Approving it
    applies the change, in the same transaction as its audit row."""

    class Decision(models.TextChoices):
        PENDING = "", "pending"
        APPLIED = "applied", "approved and applied"
        DENIED = "denied", "denied"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="approval_mode_requests")
    nodepool = models.CharField(max_length=253)
    mode = models.CharField(max_length=32)
    threshold = models.CharField(max_length=32, blank=True, help_text="$/h for auto-below, as stored.")
    requested_by = models.CharField(max_length=150)
    requested_at = models.DateTimeField(default=timezone.now)
    reason = models.TextField(blank=True)
    decision = models.CharField(max_length=16, blank=True, choices=Decision.choices, default=Decision.PENDING)
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        indexes = [models.Index(fields=["cluster", "nodepool", "decision"], name="modereq_cluster_pool")]

    def __str__(self) -> str:
        return f"{self.nodepool}: manual → {self.mode} ({self.get_decision_display()})"


class AuditEvent(models.Model):
    """An append-only record of a human change or decision, written in the same transaction as the change."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The cluster the change or decision was about; empty for what every cluster shares (catalogs, device
    # declarations). Kept when the cluster is deleted: the trail outlives what it is about, as the actor's name does.
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events", db_index=False
    )
    cluster_name = models.CharField(max_length=63, blank=True, help_text="The cluster's name, kept if it is deleted.")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_name = models.CharField(max_length=150, help_text="Who acted, kept if the user is deleted.")
    impersonator = models.CharField(
        max_length=150, blank=True, help_text="Who acted as actor_name (kubectl --as), if anyone."
    )
    via = models.CharField(max_length=32, help_text="cli, admin, web or api.")
    action = models.CharField(max_length=64)
    target_kind = models.CharField(max_length=64)
    target_name = models.CharField(max_length=253)
    reason = models.TextField(blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # A cluster's trail, newest first, and one object's history within it (a command's or a NodePool's page).
        indexes = [
            models.Index(fields=["cluster", "-created_at"], name="auditevent_cluster_time"),
            models.Index(fields=["cluster", "target_kind", "target_name"], name="auditevent_cluster_target"),
        ]

    def __str__(self) -> str:
        where = f"[{self.cluster_name}] " if self.cluster_name else ""
        actor = f"{self.actor_name} (impersonated by {self.impersonator})" if self.impersonator else self.actor_name
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {where}{actor} {self.action} {self.target_kind}/{self.target_name}"


class CostSample(models.Model):
    """A NodePool's cost from `time` (cluster time, to the minute) until its next sample: written on change only."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="cost_samples")
    time = models.DateTimeField()
    nodepool = models.CharField(max_length=253)
    cost_per_hour = models.FloatField(help_text="Sum of the NodePool's NodeClaim offering prices, $/h.")
    nodeclaims = models.PositiveIntegerField()
    saved_per_hour = models.FloatField(
        help_text="Savings of the consolidation commands executed so far, $/h: the baseline is cost + this."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "nodepool", "time"], name="costsample_unique_minute")]
        indexes = [models.Index(fields=["cluster", "time"])]
        ordering = ["time", "nodepool"]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M} {self.nodepool} ${self.cost_per_hour:.4f}/h"


class ChangeLogEntry(models.Model):
    """One change of one object of a cluster at its resourceVersion: the history a Kubernetes watch replays.

    Written in the transaction that makes the change; kept for a retention window (karpui.clusters.changelog).
    """

    class Type(models.TextChoices):
        ADDED = "ADDED"
        MODIFIED = "MODIFIED"
        DELETED = "DELETED"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="changes")
    resource_version = models.PositiveBigIntegerField()
    type = models.CharField(max_length=8, choices=Type.choices)
    kind = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253)
    body = models.JSONField(help_text="The object after the change (its last state, for DELETED).")
    created_at = models.DateTimeField(default=timezone.now, help_text="Wall time, for the retention window.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "resource_version"], name="changelogentry_unique_version")
        ]
        indexes = [
            models.Index(fields=["cluster", "kind", "resource_version"]),
            models.Index(fields=["cluster", "created_at"]),
        ]
        ordering = ["resource_version"]
        verbose_name_plural = "change log entries"

    def __str__(self) -> str:
        return f"{self.resource_version} {self.type} {self.kind}/{self.name}"


class ApiToken(models.Model):
    """A bearer token for the Kubernetes API, acting as its user; only the token's SHA-256 digest is kept."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    digest = models.CharField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    cluster = models.CharField(
        max_length=63,
        blank=True,
        help_text="The cluster the kubeconfig was made for: the one its requests at the server's root reach.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; empty: never.")
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="To the minute.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} {self.description or self.digest[:8]}"


class TrendSample(models.Model):
    """A gauge of a cluster from `time` (cluster time, to the minute) until its next sample, written on change only
    (karpui.history.trends): a minute the gauge changed in holds its time-weighted average, the next minute the value it went
    on at. `series` "pending" (pods waiting for a node, `key` empty) or "nodes" (the Nodes of NodePool `key`; empty
    for nodes of no NodePool)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="trend_samples")
    time = models.DateTimeField()
    series = models.CharField(max_length=32)
    key = models.CharField(max_length=253, blank=True)
    value = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "series", "key", "time"], name="trendsample_unique_minute")
        ]
        indexes = [models.Index(fields=["cluster", "time"])]
        ordering = ["time", "series", "key"]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M} {self.series} {self.key} {self.value:g}"


class ActivitySample(models.Model):
    """What happened in one minute of a cluster (cluster time): the pods that started running, each one's seconds
    from creation to running counted in `latency` ({"seconds": pods}), and the nodes disruption took, by reason.
    Only minutes in which something happened have a row (karpui.history.trends)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="activity_samples")
    time = models.DateTimeField()
    started = models.PositiveIntegerField(default=0, help_text="Pods that went from created to Running.")
    latency = models.JSONField(default=dict, blank=True, help_text="Pods per whole second from creation to Running.")
    disrupted = models.JSONField(default=dict, blank=True, help_text="Nodes disrupted, by reason.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "time"], name="activitysample_unique_minute")]
        ordering = ["time"]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M} started {self.started} disrupted {sum(self.disrupted.values())}"


class TrendHour(models.Model):
    """One whole hour of a cluster's trends rolled up from its TrendSamples and ActivitySamples (karpui.history.trends), so
    a month's chart reads 720 rows, not 43,200 minutes per gauge: each gauge's time-weighted average over the hour
    (`gauges`, {"series/key": average}, every gauge that had a value then, zeros included), and the hour's pods
    started, their latencies ({"seconds": pods}) and nodes disrupted by reason. Written once the hour is over."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="trend_hours")
    time = models.DateTimeField()
    gauges = models.JSONField(default=dict, blank=True)
    started = models.PositiveIntegerField(default=0)
    latency = models.JSONField(default=dict, blank=True)
    disrupted = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "time"], name="trendhour_unique_hour")]
        ordering = ["time"]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:00} started {self.started} disrupted {sum(self.disrupted.values())}"

"""The kwok cloud provider, as Karpenter's kwok provider: launching picks the cheapest compatible offering, and the
instance is a Node object (named `kwok-<nodeclaim>-<random name>-<number>`, annotated `kwok.x-k8s.io/node: fake`)
created after the KWOKNodeClass's registration delay, which kwok then keeps Ready. In the lab the Node is created in the lab's own API server; in kwok mode in a
real cluster's."""

from __future__ import annotations

import builtins
import random
import zlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.cloudprovider.randomname import random_name
from provisioner.cloudprovider.types import (
    REGISTRATION_TIMEOUT,
    CloudProviderError,
    InsufficientCapacityError,
    Launched,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    RepairPolicy,
)
from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.conditions import healthy_node_conditions, is_true, node_info, transition_time
from provisioner.cluster.objects import AlreadyExists, Obj, parse_timestamp, timestamp
from provisioner.cluster.views import is_ready
from provisioner.manifests.nodeclass import node_registration_delay_seconds
from provisioner.objects import NodeClass, NodePool
from provisioner.quantity import format_resources, parse_resources
from provisioner.requirements import Requirements
from provisioner.scheduling.launch import cheapest_launch
from provisioner.scheduling.results import InstanceTypeOption, NodeClaimPlan
from provisioner.taints import UNREGISTERED

PROVIDER_ID_PREFIX = "kwok://"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# kwok/cloudprovider/cloudprovider.go:197 (v1.15): Ready=False is the set's default fallback; both drain forcefully
# (bound 0). The simulated KWOKUnhealthy/KWOKRebootRequired faults are left out: karpui's kwok raises neither.
KWOK_REPAIR_POLICIES = (
    RepairPolicy("Ready", "False", 10 * 60.0, termination_grace_period_seconds=0.0),
    RepairPolicy("Ready", "Unknown", 10 * 60.0, reason_regex=".*", termination_grace_period_seconds=0.0),
)


class KwokCloudProvider:
    """Instances are Nodes in the cluster the provider writes to; types come from the catalogs by node class kind."""

    name = "kwok"

    def __init__(
        self,
        api: ClusterAPI,
        nodeclasses: Mapping[tuple[str, str], NodeClass],
        catalogs: Mapping[str, list[InstanceType]],
        rng: random.Random,
        names_made: int = 0,
    ) -> None:
        self.api = api
        self.nodeclasses = nodeclasses
        self.catalogs = catalogs
        self.rng = rng
        # RandomName's sequence number: how many node names this provider has made (Karpenter's counts for its
        # process; the lab's and an engine's are kept in the cluster's state, so names stay reproducible).
        self.names_made = names_made
        self._seen: int | None = None  # the NodeClaim version at the last reconcile
        self._ran_at = float("-inf")
        self._dues_version: int | None = None
        self._due_times: builtins.list[float] = []
        # Karpenter's ReservedCapacity gate: off, reserved offerings are not offered at all (as providers leave
        # them out); on, each reservation offers what its running instances leave of it.
        self.reserved_capacity = True
        self._reserved: dict[tuple[int, bool], tuple[Any, builtins.list[InstanceType]]] = {}
        self._any_reserved: dict[int, tuple[builtins.list[InstanceType], bool]] = {}  # id -> (types, any reserved)

    def instance_types(self, nodepool: NodePool) -> builtins.list[InstanceType] | None:
        ref = nodepool.node_class_ref
        if (ref.kind, ref.name) not in self.nodeclasses:
            return None
        return self._with_reservations(self.catalogs.get(ref.kind, []))

    def _with_reservations(self, types: builtins.list[InstanceType]) -> builtins.list[InstanceType]:
        """The types with each reserved offering's capacity less the instances running in its reservation (an
        exhausted one is unavailable), or without reserved offerings when the gate is off. The same list object
        comes back while nothing changed, so what is keyed on it stays warm."""
        known = self._any_reserved.get(id(types))
        if known is None or known[0] is not types:
            # Looked at once per list (the catalogs' lists are kept from step to step): every simulation asks.
            known = self._any_reserved[id(types)] = (types, any(o.reserved for it in types for o in it.offerings))
        if not known[1]:
            return types
        key = (id(types), self.reserved_capacity)
        in_use = self._in_use() if self.reserved_capacity else {}
        cached = self._reserved.get(key)
        if cached is not None and cached[0] == (types, in_use):
            return cached[1]
        result = [reserve_offerings(it, in_use, self.reserved_capacity) for it in types]
        self._reserved[key] = ((types, in_use), result)
        return result

    def _in_use(self) -> dict[str, int]:
        """Instances per capacity reservation: the NodeClaims launched into it and not yet gone."""
        version = self.api.kind_version("NodeClaim")
        if self._in_use_at is None or self._in_use_at[0] != version:
            counts: dict[str, int] = {}
            for claim in self.api.list("NodeClaim"):
                reservation = (claim["metadata"].get("labels") or {}).get(wk.RESERVATION_ID)
                if reservation and is_true(claim, "Launched"):
                    counts[reservation] = counts.get(reservation, 0) + 1
            self._in_use_at = (version, counts)
        return self._in_use_at[1]

    _in_use_at: tuple[int, dict[str, int]] | None = None

    def create(self, nodeclaim: Obj) -> Launched:
        # Karpenter's toNode names the Node before anything can fail, so a failed launch uses up a name too.
        node_name = self.new_node_name(nodeclaim["metadata"]["name"])
        ref = nodeclaim["spec"]["nodeClassRef"]
        if (ref["kind"], ref["name"]) not in self.nodeclasses:
            raise NodeClassNotReadyError(f"node class {ref['name']} not found")
        types = {it.name: it for it in self._with_reservations(self.catalogs.get(ref["kind"], []))}
        return launch(nodeclaim, types, self.rng, node_name)

    def new_node_name(self, nodeclaim_name: str) -> str:
        """Karpenter's kwok toNode: `kwok-<nodeclaim>-<RandomName()>-<rand.Uint32()>`, drawn from the lab's RNG."""
        self.names_made += 1
        return f"kwok-{nodeclaim_name}-{random_name(self.rng, self.names_made)}-{self.rng.getrandbits(32)}"

    def delete(self, nodeclaim: Obj) -> None:
        node = self.api.get("Node", _node_name(nodeclaim))
        if node is None:
            raise NodeClaimNotFoundError(f"instance {nodeclaim['metadata']['name']} is already gone")
        self.api.delete("Node", node["metadata"]["name"])

    def get(self, provider_id: str) -> Launched | None:
        node = self.api.get("Node", provider_id.removeprefix(PROVIDER_ID_PREFIX))
        return _launched_from_node(node) if node is not None and _is_kwok(node) else None

    def list(self) -> list[Launched]:
        return [_launched_from_node(node) for node in self.api.list("Node") if _is_kwok(node)]

    def registered_by(self, nodeclaim: Obj) -> float | None:
        """Launch time plus the KWOKNodeClass's `nodeRegistrationDelay`, for a launched, unregistered NodeClaim."""
        launched = transition_time(nodeclaim, "Launched")
        if launched is None or is_true(nodeclaim, "Registered") or not is_true(nodeclaim, "Launched"):
            return None
        ref = nodeclaim["spec"]["nodeClassRef"]
        nodeclass = self.nodeclasses.get((ref["kind"], ref["name"]))
        delay = node_registration_delay_seconds(nodeclass) if nodeclass is not None else 0
        return parse_timestamp(launched) + delay

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """kwok's (kwok/cloudprovider RepairPolicies): a kubelet not Ready, or silent, for 10 minutes."""
        return KWOK_REPAIR_POLICIES

    def reconfigure(
        self, nodeclasses: Mapping[tuple[str, str], NodeClass], catalogs: Mapping[str, builtins.list[InstanceType]]
    ) -> None:
        """New node classes or catalogs: a changed registration delay moves every pending Node's due time."""
        self.nodeclasses, self.catalogs = nodeclasses, catalogs
        self._seen = self._dues_version = None

    def reconcile(self, now: float) -> bool:
        """Create the Node of each launched NodeClaim whose registration delay has passed (kwok runs it from then).
        Runs only when NodeClaims changed or a registration fell due since the last run."""
        dues = self._dues()
        if self._seen == self.api.kind_version("NodeClaim") and not any(self._ran_at < t <= now for t in dues):
            return False
        changed = False
        for claim in self.api.list("NodeClaim"):
            if claim["metadata"].get("deletionTimestamp"):
                continue
            if is_true(claim, "Registered") and not is_true(claim, "Initialized"):
                changed |= self._lift_startup_taints(claim)
                continue
            due = self.registered_by(claim)
            if due is None or now < due or now >= due + REGISTRATION_TIMEOUT:
                continue
            if self.api.get("Node", _node_name(claim)) is None:
                try:
                    self.api.create(node_for(claim, now))
                except AlreadyExists:
                    # Named in its NodeClaim's providerID, so a taken name is this Node: created by a POST whose
                    # answer was lost, and not yet in a real cluster's informer cache.
                    continue
                changed = True
        self._seen, self._ran_at = self.api.kind_version("NodeClaim"), now
        return changed

    def _lift_startup_taints(self, claim: Obj) -> bool:
        """Play the agent (a CNI, a device plugin) that takes a registered Node's startup taints off once it is Ready:
        Karpenter waits for that before it initializes the NodeClaim, and nothing else in a kwok cluster does it."""
        startup = {(t.get("key"), t.get("effect")) for t in claim["spec"].get("startupTaints") or []}
        node = self.api.get("Node", _node_name(claim)) if startup else None
        if node is None or not is_ready(node):
            return False
        taints = node["spec"].get("taints") or []
        kept = [t for t in taints if (t.get("key"), t.get("effect")) not in startup]
        if len(kept) == len(taints):
            return False
        node["spec"]["taints"] = kept
        self.api.update(node)
        return True

    def next_due(self, now: float) -> float | None:
        future = [t for t in self._dues() if t > now]
        return min(future) if future else None

    def _dues(self) -> builtins.list[float]:
        """When each launched, unregistered NodeClaim's Node is due, recomputed only after NodeClaims change."""
        version = self.api.kind_version("NodeClaim")
        if version != self._dues_version:
            claims = self.api.list("NodeClaim")
            self._due_times = [t for claim in claims if (t := self.registered_by(claim)) is not None]
            self._dues_version = version
        return self._due_times


def _node_name(nodeclaim: Obj) -> str:
    """The NodeClaim's Node: the one it registered, else the one its providerID names ("" before its launch)."""
    status = nodeclaim.get("status") or {}
    return str(status.get("nodeName") or str(status.get("providerID") or "").removeprefix(PROVIDER_ID_PREFIX))


def _is_kwok(node: Obj) -> bool:
    return KWOK_ANNOTATION in (node["metadata"].get("annotations") or {})


def _launched_from_node(node: Obj) -> Launched:
    labels = node["metadata"].get("labels") or {}
    status = node.get("status") or {}
    return Launched(
        provider_id=str((node.get("spec") or {}).get("providerID") or PROVIDER_ID_PREFIX + node["metadata"]["name"]),
        instance_type=labels.get(wk.INSTANCE_TYPE, ""),
        zone=labels.get(wk.ZONE, ""),
        capacity_type=labels.get(wk.CAPACITY_TYPE, ""),
        price=float(labels.get("eks-node-viewer/instance-price", 0) or 0),
        labels=dict(labels),
        capacity=dict(status.get("capacity") or {}),
        allocatable=dict(status.get("allocatable") or {}),
        image_id="kwok",
    )


def reserve_offerings(instance_type: InstanceType, in_use: Mapping[str, int], enabled: bool) -> InstanceType:
    """A type as the provider offers it now: reserved offerings without the gate dropped, with it their capacity less
    the instances in use (available while some is left)."""
    if not any(o.reserved for o in instance_type.offerings):
        return instance_type
    offerings = []
    for offering in instance_type.offerings:
        if not offering.reserved:
            offerings.append(offering)
        elif enabled:
            left = max(offering.reservation_capacity - in_use.get(offering.reservation_id, 0), 0)
            offerings.append(replace(offering, reservation_capacity=left, available=offering.available and left > 0))
    return replace(instance_type, offerings=tuple(offerings))


def launch(nodeclaim: Obj, instance_types: dict[str, InstanceType], rng: random.Random, node_name: str) -> Launched:
    """Choose the type and offering for a NodeClaim: the cheapest compatible available offering, on the instance
    (the Node) named `node_name`."""
    requirements = Requirements.from_specs(nodeclaim["spec"].get("requirements") or [])
    names = requirements.get(wk.INSTANCE_TYPE)
    if names is None:
        # Karpenter's kwok toNode: a static NodePool's NodeClaim carries only its template's requirements, which
        # must name the instance types (an error, retried until the launch times out, not a capacity failure).
        raise CloudProviderError("translating nodeclaim to node, instance type requirement not found")
    options = []
    for name in sorted(names.values if names is not None else ()):
        it = instance_types.get(name)
        if it is not None:
            price = it.cheapest_price(requirements)
            if price is not None:
                options.append(InstanceTypeOption(it, price))
    if not options:
        raise InsufficientCapacityError("all requested instance types were unavailable during launch")
    plan = NodeClaimPlan(
        nodepool="",
        pods=(),
        requests={},
        requirements=requirements,
        options=tuple(options),
        labels={},
        taints=(),
        startup_taints=(),
    )
    chosen = cheapest_launch(plan, rng)
    it, offering = chosen.instance_type, chosen.offering
    labels = {
        **(nodeclaim["metadata"].get("labels") or {}),
        **{k: v.any_value() for k, v in requirements.items() if v.operator == "In" and len(v.values) == 1},
        wk.INSTANCE_TYPE: it.name,
        **it.labels,
        **offering.labels(),
    }
    # kwok nodes get what their NodeClaim requested: a resource the catalog type lacks (one a NodeOverlay's capacity
    # gave it, such as an extended resource) is on the node as requested.
    requested = parse_resources(((nodeclaim.get("spec") or {}).get("resources") or {}).get("requests") or {})
    extra = {name: amount for name, amount in requested.items() if name not in it.capacity}
    return Launched(
        provider_id=PROVIDER_ID_PREFIX + node_name,
        instance_type=it.name,
        zone=offering.zone,
        capacity_type=offering.capacity_type,
        price=offering.price,
        labels=labels,
        capacity=format_resources({**it.capacity, **extra}),
        allocatable=format_resources({**it.allocatable, **extra}),
        image_id="kwok",
    )


# What kwok's node stages report for a fake kubelet (kwok's kustomize/stage/node/fast): a healthy node's
# conditions, a kubelet version and an address, as `kubectl describe node` expects to read them.
KWOK_VERSION = "kwok-v0.6.1"


def node_for(nodeclaim: Obj, now: float) -> Obj:
    """The Node kwok creates for a launched NodeClaim (named in its providerID; hostname label = NodeClaim name, as
    Karpenter's kwok provider labels it), its conditions as of `now`."""
    status = nodeclaim["status"]
    name = str(status["providerID"]).removeprefix(PROVIDER_ID_PREFIX)
    labels = {
        **(nodeclaim["metadata"].get("labels") or {}),
        wk.HOSTNAME: nodeclaim["metadata"]["name"],
        "eks-node-viewer/instance-price": f"{float(nodeclaim['metadata']['annotations'].get(wk.PRICE, 0)):f}",
        "kwok-partition": "a",
        KWOK_ANNOTATION: "fake",
    }
    stamp = timestamp(now)
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {KWOK_ANNOTATION: "fake"},
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {
            "providerID": status["providerID"],
            "taints": [{"key": UNREGISTERED, "effect": "NoExecute"}],
        },
        "status": {
            "capacity": dict(status.get("capacity") or {}),
            "allocatable": dict(status.get("allocatable") or {}),
            "phase": "Running",
            "conditions": healthy_node_conditions(stamp),
            "addresses": [{"type": "InternalIP", "address": _internal_ip(name)}, {"type": "Hostname", "address": name}],
            "nodeInfo": node_info(labels.get(wk.ARCH, ""), labels.get(wk.OS, ""), KWOK_VERSION, KWOK_VERSION),
        },
    }
    return node


def _internal_ip(name: str) -> str:
    """A stable address in 10.0.0.0/8 from the node's name (kwok hands them out from a pool; the lab has none)."""
    digest = zlib.crc32(name.encode())
    return f"10.{(digest >> 16) & 0xFF}.{(digest >> 8) & 0xFF}.{digest & 0xFF or 1}"

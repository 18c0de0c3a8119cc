"""The lab's kube-scheduler: binds pending pods to feasible nodes, scoring like the default scheduler.

Filters: node readiness and unschedulable flag, taints (NoSchedule/NoExecute), node selector and required node
affinity, resources, host ports, required pod (anti-)affinity (including other pods' anti-affinity), and
DoNotSchedule topology spread. Score: LeastAllocated over CPU and memory (with the default scheduler's non-zero
request defaults), ties broken by node name. Pods that fit nowhere get PodScheduled=False/Unschedulable.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.cluster import dra as cluster_dra
from provisioner.cluster.conditions import set_condition
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Obj
from provisioner.cluster.views import Views, is_ready
from provisioner.labels import NODE_NAME_FIELD
from provisioner.pods import DO_NOT_SCHEDULE, Pod, PodAffinityTerm
from provisioner.quantity import Resources, add, fits, parse_resources
from provisioner.requirements import Requirements
from provisioner.scheduling.poddata import PodState
from provisioner.sim import dra
from provisioner.sim.workloads import Burst
from provisioner.taints import NO_EXECUTE, NO_SCHEDULE, Taint, untolerated

DEFAULT_CPU = 100  # milli-CPU assumed for scoring a container without a CPU request
DEFAULT_MEMORY = 200 * 2**20 * 1000


@dataclass
class _NodeState:
    name: str
    labels: dict[str, str]
    allocatable: Resources
    taints: list[Taint]
    ready: bool
    unschedulable: bool
    pods: list[Pod] = field(default_factory=list)
    requested: Resources = field(default_factory=dict)
    # CPU and memory as LeastAllocated counts them (a request of 0 counts as the default), kept as pods bind.
    scored: dict[str, int] = field(default_factory=dict)
    requirements: Requirements = field(default_factory=lambda: Requirements([]))  # the labels, parsed once
    version: int = 0  # bumped on every bind, so per-class queues know their entry for this node is stale

    def bind(self, pod: Pod) -> None:
        self.version += 1
        self.pods.append(pod)
        self.requested = add(self.requested, _requests(pod))
        for resource, amount in _scored(pod).items():
            self.scored[resource] = self.scored.get(resource, 0) + amount


class KubeScheduler:
    """kube-scheduler's queue. Pending pods are taken by priority, then arrival: the order the scheduler first saw
    them, which is their creation order (a pod not yet seen has only its creation write, so its resourceVersion
    is when it was created). A pass runs only when something it depends on (nodes, pods, devices) was written
    since the last one; otherwise unschedulable pods wait, as in the unschedulable queue that a cluster event
    moves back to the active queue."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.seen: tuple[int, ...] | None = None
        self.arrivals: dict[str, int] = dict((state or {}).get("arrivals") or {})  # pending pod uid -> arrival
        self.node_states: NodeStates = {}

    def to_state(self) -> dict[str, Any]:
        return {"arrivals": self.arrivals}

    def schedule(self, store: ObjectStore, views: Views, now: float, burst: Burst | None = None) -> bool:
        versions = tuple(store.kind_version(kind) for kind in ("Node", "Pod", "ResourceClaim", "ResourceSlice"))
        if versions == self.seen:
            return False
        pending = [
            p for p in store.list("Pod", fields={"spec.nodeName": ""}) if not p["metadata"].get("deletionTimestamp")
        ]
        # Pods seen for the first time arrive in write order (the ones already queued keep their arrival).
        fresh = [p for p in pending if p["metadata"]["uid"] not in self.arrivals]
        for pod in sorted(fresh, key=lambda p: int(p["metadata"].get("resourceVersion") or 0)):
            self.arrivals[pod["metadata"]["uid"]] = int(pod["metadata"].get("resourceVersion") or 0)
        waiting = {p["metadata"]["uid"] for p in pending}
        self.arrivals = {uid: seq for uid, seq in self.arrivals.items() if uid in waiting}
        pending.sort(
            key=lambda p: (
                -int(p["spec"].get("priority") or 0),
                self.arrivals[p["metadata"]["uid"]],
                p["metadata"]["name"],
            )
        )
        changed = schedule_pending(store, views, now, pending, self.node_states, burst)
        # A pass cut short by its burst has pods left to look at, whatever was written.
        self.seen = (
            None
            if burst is not None and burst.cut
            else tuple(store.kind_version(kind) for kind in ("Node", "Pod", "ResourceClaim", "ResourceSlice"))
        )
        return changed


def schedule_pending(
    store: ObjectStore,
    views: Views,
    now: float,
    pending: list[Obj],
    cache: NodeStates | None = None,
    burst: Burst | None = None,
) -> bool:
    """Bind each of `pending` (in queue order) to its best feasible node, or mark it Unschedulable, writing at
    most `burst` pods (the rest wait for the next pass). `cache` keeps node states between passes (see
    `_node_states`). A pod that cannot be read is left as it is (the manager reports it on the pod)."""
    pending = [obj for obj, _ in views.readable(pending)]
    if not pending:
        return False
    nodes = _node_states(store, views, {} if cache is None else cache)
    changed = False
    classes = cluster_dra.device_classes(store) if any(p["spec"].get("resourceClaims") for p in pending) else {}
    taken = cluster_dra.allocated(store) if classes else set()
    devices = cluster_dra.published(store) if classes else {}
    # Bound pods' anti-affinity terms, gathered once per pass and extended as pods bind (most pods have none).
    anti_terms = [(n.labels, p, term) for n in nodes for p in n.pods for term in p.anti_affinity]
    # Without anti-affinity anywhere (none bound, none pending, so none binds in this pass) a pod's labels and
    # namespace play no part in any filter or score, so pods that differ only in those (one Deployment's pods and
    # another's) share one queue.
    labelled = bool(anti_terms) or any(views.pod(p).anti_affinity for p in pending)
    queues: dict[tuple[object, ...], _ClassQueue] = {}
    burst = burst or Burst()
    binds = 0  # pods bound so far in this pass: until the next, no node changed
    for obj in pending:
        if burst.exhausted():
            break
        pod = views.pod(obj)
        best: _NodeState | None = None
        reasons: Counter[str] = Counter()
        if _simple(pod) and not obj["spec"].get("resourceClaims"):
            key = _class_key(pod, labelled=labelled)
            queue = queues.get(key)
            if queue is None:
                queue = queues[key] = _ClassQueue(pod, nodes, anti_terms)
            best = queue.best(pod)
            if best is None:
                reasons = queue.reasons(pod, binds)
        else:
            feasible, reasons = _feasible(pod, nodes, anti_terms)
            if obj["spec"].get("resourceClaims"):
                # kube-scheduler's DynamicResources plugin: the node must have free devices for every claim.
                with_devices = []
                for node in feasible:
                    problem = dra.can_allocate(store, obj, node.name, classes, taken, devices)
                    if problem is None:
                        with_devices.append(node)
                    else:
                        reasons["cannot allocate all claims"] += 1
                feasible = with_devices
            if feasible:
                best = max(feasible, key=lambda n: (_score(pod, n), [-ord(c) for c in n.name]))
        if best is not None:
            if obj["spec"].get("resourceClaims"):
                dra.allocate_on(store, obj, best.name, classes)
                taken = cluster_dra.allocated(store)
            obj["spec"]["nodeName"] = best.name
            obj.setdefault("status", {})["phase"] = "Pending"
            set_condition(obj, "PodScheduled", "True", now)
            store.update(obj)
            bound = views.pod(obj)
            best.bind(bound)
            binds += 1
            anti_terms.extend((best.labels, bound, term) for term in bound.anti_affinity)
            burst.spend()
            changed = True
        else:
            message = _message(len(nodes), reasons)
            if set_condition(obj, "PodScheduled", "False", now, "Unschedulable", message):
                store.update(obj)
                burst.spend()
                changed = True
    return changed


def _simple(pod: Pod) -> bool:
    """A pod whose own constraints do not depend on other pods: feasibility only ever shrinks during a pass."""
    return not (pod.affinity or pod.anti_affinity or pod.spread)


def _class_key(pod: Pod, *, labelled: bool = True) -> tuple[object, ...]:
    """Pods that every filter and the score treat alike (a Deployment's pods, typically); with `labelled` False
    (no anti-affinity in play) regardless of their namespace and labels."""
    return (
        (pod.namespace, tuple(sorted(pod.labels.items()))) if labelled else None,
        tuple(sorted(pod.node_selector.items())),
        pod.required_terms,
        pod.tolerations,
        tuple(sorted(pod.requests.items())),
        pod.host_ports,
    )


class _ClassQueue:
    """The feasible nodes of one pod class, best score first, for one pass.

    Binding a pod only ever lowers a node's LeastAllocated score and only ever makes a node less able to take a
    pod of a simple class (resources, ports and other pods' anti-affinity only grow). So an entry recorded for a
    node that changed since is re-checked when it reaches the top (re-pushed with its lower score, or dropped for
    good), and the first current entry on top is exactly the node a full scan would pick: the highest score, ties
    to the smallest name.
    """

    def __init__(self, pod: Pod, nodes: Sequence[_NodeState], anti_terms: Sequence[AntiTerm]) -> None:
        self.nodes = nodes
        self.anti_terms = anti_terms
        state = PodState.of(pod)
        selector = Requirements.from_labels(pod.node_selector)
        self.terms = [selector.merged(t) for t in state.required_terms] or [selector]
        self.heap: list[tuple[float, str, int, int]] = []
        self._reasons: tuple[int, Counter[str]] | None = None
        for index, node in enumerate(nodes):
            if _filter(pod, node, self.terms, nodes, anti_terms) is None:
                self.heap.append((-_score(pod, node), node.name, index, node.version))
        heapq.heapify(self.heap)

    def best(self, pod: Pod) -> _NodeState | None:
        while self.heap:
            _, name, index, version = self.heap[0]
            node = self.nodes[index]
            if version == node.version:
                return node
            heapq.heappop(self.heap)
            if _filter(pod, node, self.terms, self.nodes, self.anti_terms) is None:
                heapq.heappush(self.heap, (-_score(pod, node), name, index, node.version))
        return None

    def reasons(self, pod: Pod, binds: int) -> Counter[str]:
        """Why no node can take the pod (computed only when none can), the same for every pod of the class while
        nothing binds (`binds`, the pass's count so far): 1,000 pods of a full cluster filtered every node each,
        1.8 million filters, 39 s of one step at 20,000 pods."""
        if self._reasons is not None and self._reasons[0] == binds:
            return self._reasons[1]
        reasons: Counter[str] = Counter()
        for node in self.nodes:
            reason = _filter(pod, node, self.terms, self.nodes, self.anti_terms)
            if reason is not None:
                reasons[reason] += 1
        self._reasons = (binds, reasons)
        return reasons


# node name -> (the Node's resourceVersion and its pods' index bucket version, the state built from them)
NodeStates = dict[str, tuple[tuple[object, int, int], _NodeState]]


def _node_states(store: ObjectStore, views: Views, cache: NodeStates) -> list[_NodeState]:
    """Every node that is not being deleted, with its pods. A node whose object and pods were not written since its
    state was built keeps that state (binding a pod writes the pod, so a state a pass changed is always rebuilt):
    a pass costs the nodes and pods that changed, not every pod in the cluster."""
    states = []
    names = set()
    for node in store.list("Node"):
        if node["metadata"].get("deletionTimestamp"):
            continue
        name = node["metadata"]["name"]
        names.add(name)
        key = (
            node["metadata"].get("resourceVersion"),
            store.cache_epoch,
            store.bucket_version("Pod", "spec.nodeName", name),
        )
        cached = cache.get(name)
        if cached is not None and cached[0] == key:
            states.append(cached[1])
            continue
        bound = (pod for _, pod in views.readable(store.list("Pod", fields={"spec.nodeName": name})))
        pods = [p for p in bound if not p.is_terminal() and not p.deleting]
        state = _NodeState(
            name=name,
            labels=dict(node["metadata"].get("labels") or {}),
            allocatable=_allocatable(node),
            taints=[Taint.from_spec(t) for t in (node.get("spec") or {}).get("taints") or []],
            ready=is_ready(node),
            unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            pods=pods,
            requested=add(*(_requests(p) for p in pods)) if pods else {},
            scored=add(*(_scored(p) for p in pods)) if pods else {},
            # The node's name answers the DaemonSet controller's matchFields pin (wk.NODE_NAME_FIELD).
            requirements=Requirements.from_labels({**(node["metadata"].get("labels") or {}), NODE_NAME_FIELD: name}),
        )
        cache[name] = (key, state)
        states.append(state)
    for gone in [name for name in cache if name not in names]:
        del cache[gone]
    return states


def _scored(pod: Pod) -> dict[str, int]:
    return {"cpu": pod.requests.get("cpu", 0) or DEFAULT_CPU, "memory": pod.requests.get("memory", 0) or DEFAULT_MEMORY}


def _allocatable(node: Obj) -> Resources:
    status = node.get("status") or {}
    return parse_resources(status.get("allocatable") or status.get("capacity") or {})


def _requests(pod: Pod) -> Resources:
    return add(pod.requests, {"pods": 1000})


AntiTerm = tuple[dict[str, str], Pod, PodAffinityTerm]  # a bound pod's required anti-affinity, with its node's labels


def _feasible(
    pod: Pod, nodes: Sequence[_NodeState], anti_terms: Sequence[AntiTerm]
) -> tuple[list[_NodeState], Counter[str]]:
    reasons: Counter[str] = Counter()
    state = PodState.of(pod)
    selector = Requirements.from_labels(pod.node_selector)
    terms = [selector.merged(t) for t in state.required_terms] or [selector]
    feasible = []
    for node in nodes:
        reason = _filter(pod, node, terms, nodes, anti_terms)
        if reason is None:
            feasible.append(node)
        else:
            reasons[reason] += 1
    return feasible, reasons


def _filter(
    pod: Pod,
    node: _NodeState,
    terms: list[Requirements],
    nodes: Sequence[_NodeState],
    anti_terms: Sequence[AntiTerm],
) -> str | None:
    if not node.ready:
        return "node(s) were not ready"
    if node.unschedulable:
        return "node(s) were unschedulable"
    blocking = untolerated([t for t in node.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)], pod.tolerations)
    if blocking:
        taint = blocking[0]
        return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    if not any(node.requirements.compatible(term, allow_undefined=frozenset()) for term in terms):
        return "node(s) didn't match Pod's node affinity/selector"
    needed = add(node.requested, _requests(pod))
    if not fits(needed, node.allocatable):
        short = [name for name, amount in needed.items() if amount > node.allocatable.get(name, 0)]
        return "Insufficient " + ", ".join(sorted(short))
    if pod.host_ports:
        held = [port for p in node.pods for port in p.host_ports]
        if any(port.conflicts(other) for port in pod.host_ports for other in held):
            return "node(s) didn't have free ports for the requested pod ports"
    for term in pod.affinity:
        if not _affinity_ok(pod, term, node, nodes):
            return "node(s) didn't match pod affinity rules"
    for term in pod.anti_affinity:
        if _matches_in_domain(pod, term, node, nodes):
            return "node(s) didn't match pod anti-affinity rules"
    if _blocked_by_existing_anti_affinity(pod, node, anti_terms):
        return "node(s) didn't satisfy existing pods anti-affinity rules"
    for constraint in pod.spread:
        if constraint.when_unsatisfiable == DO_NOT_SCHEDULE and not _spread_ok(pod, constraint, node, nodes, terms):
            return "node(s) didn't match pod topology spread constraints"
    return None


def _term_selects(term: PodAffinityTerm, owner: Pod, candidate: Pod) -> bool:
    namespaces = term.namespaces or frozenset({owner.namespace})
    if term.namespace_selector is not None and not term.namespace_selector.terms:
        namespaces = frozenset({candidate.namespace})
    return candidate.namespace in namespaces and term.selector is not None and term.selector.matches(candidate.labels)


def _matches_in_domain(pod: Pod, term: PodAffinityTerm, node: _NodeState, nodes: Sequence[_NodeState]) -> bool:
    domain = node.labels.get(term.topology_key)
    if domain is None:
        return False
    return any(
        other.labels.get(term.topology_key) == domain and any(_term_selects(term, pod, p) for p in other.pods)
        for other in nodes
    )


def _affinity_ok(pod: Pod, term: PodAffinityTerm, node: _NodeState, nodes: Sequence[_NodeState]) -> bool:
    if term.topology_key not in node.labels:
        return False
    if _matches_in_domain(pod, term, node, nodes):
        return True
    # Kubernetes lets the first pod of a self-selecting group in, if no pod anywhere matches yet.
    anywhere = any(_term_selects(term, pod, p) for other in nodes for p in other.pods)
    return not anywhere and _term_selects(term, pod, pod)


def _blocked_by_existing_anti_affinity(pod: Pod, node: _NodeState, anti_terms: Sequence[AntiTerm]) -> bool:
    for labels, existing, term in anti_terms:
        domain = labels.get(term.topology_key)
        if domain is not None and node.labels.get(term.topology_key) == domain and _term_selects(term, existing, pod):
            return True
    return False


def _spread_ok(
    pod: Pod, constraint: object, node: _NodeState, nodes: Sequence[_NodeState], terms: list[Requirements]
) -> bool:
    from provisioner.pods import TopologySpreadConstraint

    assert isinstance(constraint, TopologySpreadConstraint)
    key = constraint.topology_key
    if key not in node.labels:
        return False
    counts: dict[str, int] = {}
    for other in nodes:
        domain = other.labels.get(key)
        if domain is None:
            continue
        labels = Requirements.from_labels(other.labels)
        if constraint.node_affinity_policy == "Honor" and not any(
            labels.compatible(t, allow_undefined=frozenset()) for t in terms
        ):
            continue
        matching = sum(
            1
            for p in other.pods
            if p.namespace == pod.namespace
            and constraint.selector is not None
            and constraint.selector.matches(p.labels)
        )
        counts[domain] = counts.get(domain, 0) + matching
    if not counts:
        return True
    minimum = min(counts.values())
    if constraint.min_domains is not None and len(counts) < constraint.min_domains:
        minimum = 0
    self_match = 1 if constraint.selector is not None and constraint.selector.matches(pod.labels) else 0
    return counts.get(node.labels[key], 0) + self_match - minimum <= constraint.max_skew


def _score(pod: Pod, node: _NodeState) -> float:
    """LeastAllocated: the share of CPU and memory left after placing the pod, averaged."""
    adding = _scored(pod)
    score = 0.0
    for resource in ("cpu", "memory"):
        allocatable = node.allocatable.get(resource, 0)
        if not allocatable:
            continue
        used = node.scored.get(resource, 0) + adding[resource]
        score += max(allocatable - used, 0) / allocatable
    return score / 2


def _message(total: int, reasons: Counter[str]) -> str:
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."

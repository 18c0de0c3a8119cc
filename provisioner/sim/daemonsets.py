"""The DaemonSet controller: a pod pinned to each node its template fits and tolerates, replaced when outdated,
and the DaemonSet's status.
"""

from __future__ import annotations

import random
from typing import Any

from provisioner.apimachinery.defaults import defaulted_spec
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Obj
from provisioner.labels import NODE_NAME_FIELD
from provisioner.manifests.pod import pod_from_spec
from provisioner.pods import Pod
from provisioner.requirements import Requirements
from provisioner.scheduling.poddata import PodState
from provisioner.sim.workloads import Availability, Wakes, create_pod, owned_by, template_hash
from provisioner.taints import Taint, Toleration, untolerated

DAEMONSET_HASH = "controller-revision-hash"
DAEMONSET_GENERATION = "pod-template-generation"


DAEMON_TOLERATIONS = (
    Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),
    Toleration(key="karpenter.sh/disrupted", operator="Exists", effect="NoSchedule"),
)


def daemon_runs_on(daemonset: Obj, node: Obj) -> bool:
    return _runs_on(_daemon_pod(daemonset), node)


def _daemon_pod(daemonset: Obj) -> Pod:
    template = (daemonset.get("spec") or {}).get("template") or {}
    return pod_from_spec(template.get("spec") or {}, "spec.template.spec", namespace="", labels={})


def _runs_on(pod: Pod, node: Obj) -> bool:
    taints = [
        Taint.from_spec(t)
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") != "PreferNoSchedule"
    ]
    if untolerated(taints, (*pod.tolerations, *DAEMON_TOLERATIONS)):
        return False
    state = PodState.of(pod)
    labels = Requirements.from_labels(node["metadata"].get("labels") or {})
    base = Requirements.from_labels(pod.node_selector)
    return any(
        labels.compatible(base.merged(term), allow_undefined=frozenset())
        for term in state.required_terms or [Requirements()]
    )


def daemon_target(pod: Obj) -> str:
    """The node a daemon pod is for: where it is bound, or where its matchFields pin sends it (the DaemonSet
    controller's GetTargetNodeName)."""
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound:
        return str(bound)
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == NODE_NAME_FIELD and field.get("operator") == "In" and field.get("values"):
                return str(field["values"][0])
    return ""


def _pinned_to(pod: Obj, node: str) -> None:
    """kube-controller-manager's ReplaceDaemonSetPodNodeNameNodeAffinity: the required node affinity becomes one
    term selecting the node by name (the controller has checked the template's own terms against it), so
    kube-scheduler binds the pod there or leaves it Pending, never somewhere else and never past allocatable."""
    spec = pod["spec"]
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}]}]
    }
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity


def reconcile_daemonsets(store: ObjectStore, rng: random.Random, now: float, wakes: Wakes | None = None) -> bool:
    """One pod per matching node, pinned to it for kube-scheduler to bind and labelled with the template's
    revision; pods on nodes that are
    gone or no longer match go, and with the RollingUpdate strategy a pod of an older template is replaced (all at
    once: the lab does not hold back to maxUnavailable). The status counts as the DaemonSet controller's does; a
    DaemonSet whose ready pods are not yet available (minReadySeconds) asks to be looked at again (`wakes`)."""
    changed = False
    wakes = {} if wakes is None else wakes
    daemonsets = store.list("DaemonSet")
    if not daemonsets:
        return False
    nodes = {n["metadata"]["name"]: n for n in store.list("Node") if not n["metadata"].get("deletionTimestamp")}
    for daemonset in daemonsets:
        if daemonset["metadata"].get("deletionTimestamp"):
            continue  # as Kubernetes' controller: the garbage collector is deleting its pods, none are made again
        spec = defaulted_spec(daemonset)
        revision = template_hash(spec.get("template") or {})
        labels = {DAEMONSET_HASH: revision, DAEMONSET_GENERATION: str(daemonset["metadata"].get("generation", 1))}
        strategy = spec.get("updateStrategy")
        replaces = isinstance(strategy, dict) and strategy.get("type") == "RollingUpdate"
        # The template is parsed once, not once per node (and not at all without nodes).
        template = _daemon_pod(daemonset) if nodes else None
        runs_on = {name: _runs_on(template, node) for name, node in nodes.items()} if template is not None else {}
        placed = {daemon_target(p): p for p in owned_by(store, "Pod", daemonset)}
        for name in nodes:
            if not runs_on[name]:
                continue
            current = placed.get(name)
            if current is not None and replaces and _outdated(current, revision):
                if current["metadata"].get("deletionTimestamp"):
                    continue  # its replacement comes once it is gone
                store.delete("Pod", current["metadata"]["name"], current["metadata"]["namespace"])
                current = None
            if current is None:
                pod = create_pod(store, daemonset, rng, labels)
                _pinned_to(pod, name)
                store.update(pod)
                placed[name] = pod
                changed = True
        for node_name, pod in list(placed.items()):
            if node_name not in nodes or not runs_on[node_name]:
                store.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
                del placed[node_name]
                changed = True
        status = _daemonset_status(daemonset, spec, runs_on, placed, revision, now, wakes)
        if daemonset.get("status") != status:
            daemonset["status"] = status
            store.update(daemonset)
    return changed


def _outdated(pod: Obj, revision: str) -> bool:
    """A pod made from an older template. One without the revision label was made before the lab labelled daemon
    pods: taken as current, not replaced."""
    made_from = (pod["metadata"].get("labels") or {}).get(DAEMONSET_HASH)
    return made_from is not None and made_from != revision


def _daemonset_status(
    daemonset: Obj, spec: Obj, runs_on: dict[str, bool], placed: dict[Any, Obj], revision: str, now: float, wakes: Wakes
) -> Obj:
    """updateDaemonSetStatus: over the nodes that should run the pod, how many do, ready, available and updated;
    and those that run it but should not."""
    counts = Availability(now, int(spec.get("minReadySeconds") or 0))
    scheduled = updated = misscheduled = 0
    for node_name, pod in placed.items():
        if not runs_on.get(node_name):
            misscheduled += 1
            continue
        scheduled += 1
        counts.add(pod)
        updated += not _outdated(pod, revision)
    desired = sum(runs_on.values())
    uid = daemonset["metadata"]["uid"]
    wakes.pop(uid, None)
    if counts.next_available is not None:
        wakes[uid] = counts.next_available
    status: Obj = {
        "currentNumberScheduled": scheduled,
        "numberMisscheduled": misscheduled,
        "desiredNumberScheduled": desired,
        "numberReady": counts.ready,
        "observedGeneration": daemonset["metadata"].get("generation", 1),
        "updatedNumberScheduled": updated,
        "numberAvailable": counts.available,
        "numberUnavailable": desired - counts.available,
    }
    previous = daemonset.get("status") or {}
    for kept in ("collisionCount", "conditions"):
        if previous.get(kept) is not None:
            status[kept] = previous[kept]
    return status

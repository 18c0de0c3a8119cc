"""Karpenter v1.15.0's PDB and pod utility suites (pkg/utils/pdb/suite_test.go, pkg/utils/pod/suite_test.go) ported
onto karpui, each test naming the It (or DescribeTable Entry) it follows.

Karpenter's pdb.Limits is karpui's `pdb.policies` over a store; CanEvictPods is what ValidatePodsDisruptable asks of a
node's pods, karpui's `candidates.blockers` (its sentence names the PDBs CanEvictPods returns); IsCurrentlyReschedulable
is `consolidation.currently_reschedulable`. IsDoNotDisruptActive and IsDisruptable are `candidates.pod_blocks` (which
is also false for an inactive pod) and the event it tells, `candidates.do_not_disrupt_notice`. HasDRARequirements is
`provisioning.has_dra_requirements`. envtest runs no kube-controller-manager, so a Go test's PDB status is empty (no
disruption allowed); karpui computes the status from the pods, which gives the same 0 for every budget used here.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from provisioner.cluster import pdb
from provisioner.cluster.memory import ObjectStore
from provisioner.controllers.provisioning import has_dra_requirements
from provisioner.disruption.candidates import PodNotice, blockers, do_not_disrupt_notice, pod_blocks
from provisioner.disruption.consolidation import currently_reschedulable
from provisioner.disruption.types import DisruptionBudgetPolicy
from provisioner.pods import OwnerReference, Pod
from provisioner.taints import Toleration
from tests.builders import nodepool
from tests.disruption_builders import NOW, claimed

DND = "karpenter.sh/do-not-disrupt"
POD_LABELS = {"pdb-test": "value"}
UNREADY = [{"type": "Ready", "status": "False"}]
_names = iter(range(1, 1_000_000))


def _store(*objs: dict[str, Any]) -> ObjectStore:
    store = ObjectStore(clock=lambda: NOW)
    for obj in objs:
        store.create(obj)
    return store


def _budget(name: str = "pdb", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """test.PodDisruptionBudget: a selector on `labels` (POD_LABELS by default) and the spec's budget fields."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": POD_LABELS if labels is None else labels}, **spec},
    }


def _pod(
    labels: dict[str, str] | None = None, conditions: list[dict[str, str]] | None = None, **meta: Any
) -> dict[str, Any]:
    """test.Pod: no phase, so Pending, and (unless said) not Ready-False."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{next(_names)}", "namespace": "default", "labels": labels or {}, **meta},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
        "status": {"conditions": conditions or []},
    }


def _limits(store: ObjectStore) -> list[DisruptionBudgetPolicy]:
    """pdb.NewLimits."""
    return pdb.policies(store, store.views)


def _pods(store: ObjectStore) -> list[Pod]:
    return [store.views.pod(obj) for obj in store.list("Pod")]


def _can_evict(store: ObjectStore) -> list[str]:
    """CanEvictPods over the store's pods, as ValidatePodsDisruptable asks it of their node: [] when it can."""
    return blockers(claimed("n1", pods=_pods(store)), nodepool(), _limits(store), NOW)


# The four budgets each DescribeTable runs with: (Entry, the PDBs).
BLOCKING = {
    "100% min available": [_budget(minAvailable="100%")],
    "0% max unavailable": [_budget(maxUnavailable="0%")],
    "0 max unavailable": [_budget(maxUnavailable=0)],
    "multiple PDBs on the same pod": [_budget("pdb-1", minAvailable="100%"), _budget("pdb-2", minAvailable="100%")],
}


def _refusal(budgets: list[dict[str, Any]]) -> list[str]:
    """ValidatePodsDisruptable's sentence for the PDBs CanEvictPods returns."""
    keys = " ".join(f"default/{b['metadata']['name']}" for b in budgets)
    if len(budgets) > 1:
        return [f"Eviction does not support multiple PDBs (PodDisruptionBudget(s)=[{keys}])"]
    return [f"Pdb prevents pod evictions (PodDisruptionBudget=[{keys}])"]


# Describe("CanEvictPods") ----------------------------------------------------------------------------------------


def test_can_evict_pods_can_evict_unhealthy_pods_when_unhealthy_pod_eviction_policy_is_set_to_always_allow() -> None:
    """It("can evict unhealthy pods when UnhealthyPodEvictionPolicy is set to always allow")"""
    store = _store(_budget(minAvailable="100%", unhealthyPodEvictionPolicy="AlwaysAllow"), _pod(POD_LABELS, UNREADY))
    assert _can_evict(store) == []


def test_can_evict_pods_cant_evict_unhealthy_pods_when_unhealthy_pod_eviction_policy_is_not_set() -> None:
    """It("can't evict unhealthy pods when UnhealthyPodEvictionPolicy is not set")"""
    store = _store(_budget(minAvailable="100%"), _pod(POD_LABELS, UNREADY))
    assert _can_evict(store) == ["Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"]


def test_can_evict_pods_can_evict_pods_when_no_pdbs_match() -> None:
    """It("can evict pods when no PDBs match")"""
    store = _store(_budget(labels={"other": "value"}), _pod(POD_LABELS))
    assert _can_evict(store) == []


@pytest.mark.parametrize("entry", list(BLOCKING))
def test_can_evict_pods_cant_evict_pods_when_disruptions_are_not_allowed_for_every_pod_in_the_list(entry: str) -> None:
    """DescribeTable("can't evict pods when disruptions are not allowed for every pod in the list"), each Entry."""
    store = _store(*BLOCKING[entry], _pod(POD_LABELS), _pod(POD_LABELS))
    assert _can_evict(store) == _refusal(BLOCKING[entry])


@pytest.mark.parametrize("entry", list(BLOCKING))
def test_can_evict_pods_cant_evict_pods_when_disruptions_are_not_allowed_for_one_pod_in_the_list(entry: str) -> None:
    """DescribeTable("can't evict pods when disruptions are not allowed for one pod in the list"), each Entry."""
    store = _store(*BLOCKING[entry], _pod(POD_LABELS), _pod())
    assert _can_evict(store) == _refusal(BLOCKING[entry])


# Describe("IsCurrentlyReschedulable") ----------------------------------------------------------------------------


def _currently_reschedulable(store: ObjectStore) -> bool:
    [pod] = _pods(store)
    return currently_reschedulable(pod, NOW, _limits(store))


def test_is_currently_reschedulable_considers_unhealthy_pod_when_unhealthy_pod_eviction_policy_is_always_allow() -> (
    None
):
    """It("considers unhealthy pod as currently reschedulable when UnhealthyPodEvictionPolicy is set to always
    allow")"""
    store = _store(_budget(minAvailable="100%", unhealthyPodEvictionPolicy="AlwaysAllow"), _pod(POD_LABELS, UNREADY))
    assert _currently_reschedulable(store) is True


def test_is_currently_reschedulable_does_not_consider_unhealthy_pod_when_the_policy_is_not_set() -> None:
    """It("does not consider unhealthy pod as currently reschedulable when UnhealthyPodEvictionPolicy is not set")"""
    store = _store(_budget(minAvailable="100%"), _pod(POD_LABELS, UNREADY))
    assert _currently_reschedulable(store) is False


def test_is_currently_reschedulable_considers_pod_as_currently_reschedulable_when_no_pdbs_match() -> None:
    """It("considers pod as currently reschedulable when no PDBs match")"""
    store = _store(_budget(labels={"other": "value"}), _pod(POD_LABELS))
    assert _currently_reschedulable(store) is True


@pytest.mark.parametrize("entry", list(BLOCKING))
def test_is_currently_reschedulable_pods_which_are_not_currently_reschedulable_due_to_pdbs(entry: str) -> None:
    """DescribeTable("pods which are not currently reschedulable due to PDBs"), each Entry."""
    store = _store(*BLOCKING[entry], _pod(POD_LABELS))
    assert _currently_reschedulable(store) is False


def test_is_currently_reschedulable_does_not_consider_pod_with_do_not_disrupt_annotation() -> None:
    """It("does not consider pod with do-not-disrupt annotation as currently reschedulable")"""
    store = _store(_pod(POD_LABELS, annotations={DND: "true"}))
    assert _currently_reschedulable(store) is False


# Beyond the suite: what pdb.go's isEvictable decides before any budget is read (pdb.go:88-105).


def test_two_pdbs_fully_block_a_pod_even_when_each_allows_disruptions() -> None:
    """isFullyBlocked: more than one matching PDB blocks eviction whatever they allow (pdb.go:99-105)."""
    store = _store(_budget("pdb-1", maxUnavailable=5), _budget("pdb-2", maxUnavailable=5), _pod(POD_LABELS))
    assert _currently_reschedulable(store) is False


def test_a_pod_that_tolerates_the_disrupted_taint_is_never_held_by_a_pdb() -> None:
    """isEvictable: a pod Karpenter never evicts (it tolerates karpenter.sh/disrupted:NoSchedule) passes every PDB,
    for CanEvictPods and for isFullyBlocked alike (pdb.go:88-92, utils/pod/scheduling.go:57-62)."""
    tolerant = _pod(POD_LABELS)
    tolerant["spec"]["tolerations"] = [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]
    store = _store(_budget(minAvailable="100%"), tolerant)
    assert (_can_evict(store), _currently_reschedulable(store)) == ([], True)


def test_a_terminating_statefulset_pod_is_never_held_by_a_pdb() -> None:
    """isEvictable: a terminating pod is not active, so no PDB holds it, though a StatefulSet's is reschedulable."""
    going = _pod(POD_LABELS, deletionTimestamp="2027-01-15T08:00:00Z")
    going["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "uid": "s"}]
    store = _store(_budget(minAvailable="100%"), going)
    assert (_can_evict(store), _currently_reschedulable(store)) == ([], True)


# Describe("IsDoNotDisruptActive") ---------------------------------------------------------------------------------


def _annotated(value: str | None, started: float | None = NOW - 600, phase: str = "Pending") -> Pod:
    """A pod started 10 minutes ago (by default) with `value` as its do-not-disrupt annotation."""
    return Pod("test-pod", annotations={DND: value} if value is not None else {}, started=started, phase=phase)


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_is_do_not_disrupt_active_should_return_false_when_no_annotation_exists() -> None:
    """It("should return false when no annotation exists")"""
    assert pod_blocks(_annotated(None), NOW) is False


def test_is_do_not_disrupt_active_should_return_true_for_true_annotation() -> None:
    """It("should return true for 'true' annotation")"""
    assert pod_blocks(_annotated("true"), NOW) is True


def test_is_do_not_disrupt_active_should_return_false_and_emit_event_for_invalid_duration_format() -> None:
    """It("should return false and emit event for invalid duration format")"""
    pod = _annotated("invalid-format")
    assert (pod_blocks(pod, NOW), do_not_disrupt_notice(pod, NOW)) == (
        False,
        PodNotice(
            "Warning",
            "InvalidDoNotDisruptAnnotation",
            'Invalid karpenter.sh/do-not-disrupt annotation: failed to parse "invalid-format" as a duration: time: '
            'invalid duration "invalid-format", ignoring annotation',
        ),
    )


def test_is_do_not_disrupt_active_should_return_false_and_emit_event_for_zero_duration() -> None:
    """It("should return false and emit event for zero duration")"""
    pod = _annotated("0s")
    assert (pod_blocks(pod, NOW), do_not_disrupt_notice(pod, NOW)) == (
        False,
        PodNotice(
            "Warning",
            "InvalidDoNotDisruptAnnotation",
            'Invalid karpenter.sh/do-not-disrupt annotation: duration "0s" must be positive, ignoring annotation',
        ),
    )


def test_is_do_not_disrupt_active_should_return_false_and_emit_event_for_negative_duration() -> None:
    """It("should return false and emit event for negative duration")"""
    pod = _annotated("-5m")
    assert (pod_blocks(pod, NOW), do_not_disrupt_notice(pod, NOW)) == (
        False,
        PodNotice(
            "Warning",
            "InvalidDoNotDisruptAnnotation",
            'Invalid karpenter.sh/do-not-disrupt annotation: duration "-5m" must be positive, ignoring annotation',
        ),
    )


def test_is_do_not_disrupt_active_should_return_true_and_emit_disruptable_at_event_when_duration_has_not_expired() -> (
    None
):
    """It("should return true and emit disruptable-at event when duration has not expired")"""
    pod = _annotated("15m")
    assert (pod_blocks(pod, NOW), do_not_disrupt_notice(pod, NOW)) == (
        True,
        PodNotice(
            "Normal",
            "DoNotDisruptUntil",
            f"The karpenter.sh/do-not-disrupt grace period will elapse at {_rfc3339(NOW - 600 + 900)}",
        ),
    )


def test_is_do_not_disrupt_active_should_return_false_and_emit_grace_period_elapsed_event_when_duration_expired() -> (
    None
):
    """It("should return false and emit grace period elapsed event when duration has expired")"""
    pod = _annotated("5m")
    assert (pod_blocks(pod, NOW), do_not_disrupt_notice(pod, NOW)) == (
        False,
        PodNotice(
            "Normal",
            "DoNotDisruptGracePeriodElapsed",
            "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable",
        ),
    )


def test_is_do_not_disrupt_active_should_fail_safe_when_start_time_is_nil() -> None:
    """It("should fail safe when start time is nil")"""
    assert pod_blocks(_annotated("5m", started=None), NOW) is True


def test_is_do_not_disrupt_active_should_not_emit_disruptable_at_event_for_indefinite_protection() -> None:
    """It("should not emit disruptable-at event for indefinite protection")"""
    pod = _annotated("true")
    assert (pod_blocks(pod, NOW), do_not_disrupt_notice(pod, NOW)) == (True, None)


# Describe("IsDisruptable") ----------------------------------------------------------------------------------------


def test_is_disruptable_should_be_disruptable_for_active_pod_without_annotation() -> None:
    """It("should be disruptable for active pod without annotation")"""
    assert pod_blocks(_annotated(None, phase="Running"), NOW) is False


def test_is_disruptable_should_not_be_disruptable_for_true_annotation_and_not_emit_invalid_annotation_event() -> None:
    """It("should not be disruptable for active pod with 'true' annotation and not emit invalid annotation event")"""
    pod = _annotated("true", phase="Running")
    assert (pod_blocks(pod, NOW), do_not_disrupt_notice(pod, NOW)) == (True, None)


def test_is_disruptable_should_be_disruptable_for_expired_duration_and_not_emit_invalid_annotation_event() -> None:
    """It("should be disruptable for active pod with expired duration and not emit invalid annotation event")"""
    pod = _annotated("5m", phase="Running")
    notice = do_not_disrupt_notice(pod, NOW)
    assert (pod_blocks(pod, NOW), notice is not None and notice.reason) == (False, "DoNotDisruptGracePeriodElapsed")


def test_is_disruptable_should_not_be_disruptable_for_active_pod_with_non_expired_duration() -> None:
    """It("should not be disruptable for active pod with non-expired duration")"""
    assert pod_blocks(_annotated("15m", phase="Running"), NOW) is True


def test_is_disruptable_should_be_disruptable_for_terminal_pod_even_with_annotation() -> None:
    """It("should be disruptable for terminal pod even with annotation")"""
    assert pod_blocks(_annotated("true", phase="Succeeded"), NOW) is False


# Describe("HasDRARequirements") ------------------------------------------------------------------------------------


def test_has_dra_requirements_should_return_false_when_the_pod_references_no_resource_claims() -> None:
    """It("should return false when the pod references no ResourceClaims")"""
    assert has_dra_requirements({"containers": [{"name": "app"}]}) is False


def test_has_dra_requirements_should_return_true_when_a_pod_level_resource_claim_is_referenced() -> None:
    """It("should return true when a pod-level ResourceClaim is referenced")"""
    spec = {"resourceClaims": [{"name": "gpu-claim"}], "containers": [{"name": "app"}]}
    assert has_dra_requirements(spec) is True


def test_has_dra_requirements_should_return_true_when_a_container_consumes_a_resource_claim() -> None:
    """It("should return true when a container consumes a ResourceClaim")"""
    spec = {"containers": [{"name": "app", "resources": {"claims": [{"name": "gpu-claim"}]}}]}
    assert has_dra_requirements(spec) is True


def test_has_dra_requirements_should_return_true_when_an_init_container_consumes_a_resource_claim() -> None:
    """It("should return true when an init container consumes a ResourceClaim")"""
    spec = {
        "initContainers": [{"name": "init", "resources": {"claims": [{"name": "gpu-claim"}]}}],
        "containers": [{"name": "app"}],
    }
    assert has_dra_requirements(spec) is True


def test_a_daemonset_pod_counts_as_one_for_the_pdb_check_but_a_mirror_pod_does_not() -> None:
    """CanEvictPods asks isEvictable of every pod on the node: a DaemonSet's pod is evicted by the drain (so its PDB
    holds the node), a mirror pod never is (IsOwnedByNode)."""
    daemon = replace(
        Pod("ds", labels=POD_LABELS, owner=OwnerReference("DaemonSet", "ds"), phase="Running"),
        tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists"),),
    )
    mirror = Pod("mirror", labels=POD_LABELS, owner=OwnerReference("Node", "n1"), phase="Running")
    budget = DisruptionBudgetPolicy("default", "pdb", None, 0, True)
    budget = replace(budget, selector=pdb.LabelSelector.parse("pdb-test=value"))
    assert blockers(claimed("n1", pods=[mirror]), nodepool(), [budget], NOW) == []
    assert blockers(claimed("n1", pods=[daemon]), nodepool(), [budget], NOW) == [
        "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"
    ]


def test_a_pod_owned_by_a_daemonset_of_another_api_group_is_an_ordinary_pod() -> None:
    """IsOwnedByDaemonSet and IsOwnedByNode match the kind under its apiVersion (utils/pod/scheduling.go:172-209): a
    CRD's own "DaemonSet" (OpenKruise's Advanced DaemonSet) owns an ordinary pod, which Karpenter provisions for and
    moves; an apps/v1 DaemonSet's pod it does not."""
    unschedulable = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    kruise = _pod(conditions=unschedulable)
    kruise["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet", "name": "d", "uid": "d", "controller": True}
    ]
    apps = _pod(conditions=unschedulable)
    apps["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "e", "controller": True}
    ]
    store = _store(kruise, apps)
    views = {p.name: p for p in _pods(store)}
    kruise_pod, apps_pod = views[kruise["metadata"]["name"]], views[apps["metadata"]["name"]]
    assert [(p.is_daemonset_pod(), p.is_provisionable(), p.is_reschedulable()) for p in (kruise_pod, apps_pod)] == [
        (False, True, True),
        (True, False, False),
    ]


def test_a_running_pod_that_is_not_ready_is_not_healthy_for_its_pdb() -> None:
    """The PDB status karpui writes as kube-controller-manager does (disruption controller's countHealthyPods): a pod
    counts as healthy only while Ready, so minAvailable 1 over a Ready pod and a not-Ready one allows no disruption."""
    ready, unready = _pod(POD_LABELS), _pod(POD_LABELS, UNREADY)
    for obj in (ready, unready):
        obj["status"]["phase"] = "Running"
    store = _store(_budget(minAvailable=1), ready, unready)
    [budget] = store.list("PodDisruptionBudget")
    assert pdb.budget_status(budget, _pods(store)) == {
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 2,
        "disruptionsAllowed": 0,
    }

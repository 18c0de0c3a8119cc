"""Why a node cannot be a candidate, in Karpenter v1.15's words and order (statenode.go ValidateNodeDisruptable and
ValidatePodsDisruptable, types.go NewCandidate), and what reading a timed do-not-disrupt tells on the pod
(pkg/utils/pod/events.go), and what an evicted pod is told. The texts are the ones Karpenter's own suites detect
(disruption/suite_test.go)."""

from dataclasses import replace

from provisioner.controllers.termination import eviction_reason
from provisioner.disruption.candidates import PodNotice, blockers, consolidation_blockers, do_not_disrupt_notice
from provisioner.disruption.types import DisruptionBudgetPolicy
from provisioner.pods import OwnerReference
from provisioner.selectors import LabelSelector
from tests.builders import nodepool, pod
from tests.disruption_builders import NOW, claimed, pdb

DND = "karpenter.sh/do-not-disrupt"


def app(name, annotation=None, started=NOW - 60, **labels):
    made = pod("100m", name=name, labels=labels or None, owner=OwnerReference("ReplicaSet", "rs"))
    return replace(made, annotations={DND: annotation} if annotation else {}, started=started, phase="Running")


def test_a_pod_annotation_blocks_with_the_pods_key():
    """'should not consider candidates that have do-not-disrupt pods scheduled' (suite_test.go)."""
    node = claimed("n1", pods=[app("a"), app("b", "true")])
    assert blockers(node, nodepool(), [], NOW) == [f'Pod has "{DND}" annotation (Pod=default/b)']


def test_a_blocking_pdb_is_named_in_brackets_and_two_pdbs_are_named_in_order():
    """'should not consider candidates that have PDB-blocked pods scheduled' (suite_test.go)."""
    node = claimed("n1", pods=[app("a", app_label="web")])
    assert blockers(node, nodepool(), [pdb(app_label="web")], NOW) == [
        "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"
    ]
    second = DisruptionBudgetPolicy("default", "another", LabelSelector.parse("app_label=web"), 5)
    assert blockers(node, nodepool(), [pdb(allowed=5, app_label="web"), second], NOW) == [
        "Eviction does not support multiple PDBs (PodDisruptionBudget(s)=[default/another default/pdb])"
    ]


def test_node_checks_come_before_pods_deleting_first_and_the_annotation_in_its_words():
    """Karpenter stops at the first: deleting, then not initialized, nominated, the node's annotation."""
    node = replace(
        claimed("n1", pods=[app("b", "true")]),
        deleting=True,
        initialized=False,
        nominated_until=NOW + 20,
        annotations={DND: "true"},
    )
    assert blockers(node, nodepool(), [], NOW) == [
        "Node is deleting or marked for deletion",
        "Node isn't initialized",
        "Node is nominated for a pending pod",
        f'Disruption is blocked through the "{DND}" annotation',
        f'Pod has "{DND}" annotation (Pod=default/b)',
    ]


def test_a_node_not_yet_registered_is_told_apart_from_one_not_yet_initialized():
    """ValidateNodeDisruptable: liveness's registration timeout owns a node until it registers."""
    waiting = replace(claimed("n1"), initialized=False, registered=False)
    assert blockers(waiting, nodepool(), [], NOW) == ["Node isn't initialized nor registered"]
    assert blockers(replace(waiting, registered=True), nodepool(), [], NOW) == ["Node isn't initialized"]


def test_a_missing_nodepool_and_a_missing_label_are_told_as_karpenter_tells_them():
    """'should not consider candidates that have no NodePool' and '... missing the nodepool label' (suite_test.go)."""
    assert blockers(claimed("n1", pool="gone"), None, [], NOW) == ["NodePool not found (NodePool=gone)"]
    assert blockers(claimed("n1", pool=""), None, [], NOW) == [
        "Node doesn't have required label (label=karpenter.sh/nodepool)"
    ]


def test_consolidation_filters_say_which_label_is_missing_and_when_empty_only():
    pool = nodepool()
    assert consolidation_blockers(replace(claimed("n1"), capacity_type=""), pool, False) == [
        'Node does not have label "karpenter.sh/capacity-type"'
    ]
    assert consolidation_blockers(replace(claimed("n1"), zone=""), pool, False) == [
        'Node does not have label "topology.kubernetes.io/zone"'
    ]
    # Emptiness asks neither (emptiness.go ShouldDisrupt): an empty node without them is deleted as Empty.
    assert consolidation_blockers(replace(claimed("n1"), capacity_type="", zone=""), pool, True) == []
    when_empty = replace(pool, consolidation_policy="WhenEmpty")
    assert consolidation_blockers(claimed("n1"), when_empty, False) == [
        'NodePool "default" has consolidation policy WhenEmpty, but node is not empty'
    ]


def test_a_busy_node_of_a_when_empty_pool_is_told_so_even_inside_its_consolidate_after():
    """consolidation.go ShouldDisrupt asks WhenEmpty before the Consolidatable condition: the node is told
    Unconsolidatable for its policy, not passed over silently while consolidateAfter runs."""
    when_empty = replace(nodepool(), consolidation_policy="WhenEmpty")
    assert consolidation_blockers(replace(claimed("n1"), consolidatable=False), when_empty, False) == [
        'NodePool "default" has consolidation policy WhenEmpty, but node is not empty'
    ]


def test_a_timed_annotation_tells_until_when_it_protects_then_that_it_has_elapsed():
    """'should emit DoNotDisruptUntil / DoNotDisruptGracePeriodElapsed' (pod/scheduling_test.go)."""
    started = 1_780_000_000.0  # 2026-05-28T20:26:40Z
    timed = app("t", "5m", started=started)
    assert do_not_disrupt_notice(timed, started + 60) == PodNotice(
        "Normal",
        "DoNotDisruptUntil",
        "The karpenter.sh/do-not-disrupt grace period will elapse at 2026-05-28T20:31:40Z",
    )
    assert do_not_disrupt_notice(timed, started + 300) == PodNotice(
        "Normal",
        "DoNotDisruptGracePeriodElapsed",
        "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable",
    )
    # Go durations, not only whole units: 1.5m protects for 90 s
    assert blockers(claimed("n1", pods=[app("t", "1.5m", started=NOW - 89)]), nodepool(), [], NOW) != []
    assert blockers(claimed("n1", pods=[app("t", "1.5m", started=NOW - 90)]), nodepool(), [], NOW) == []


def test_an_invalid_annotation_is_ignored_with_a_warning_in_karpenters_words():
    """'should emit InvalidDoNotDisruptAnnotation' for "invalid-format", "0s" and "-5m" (pod/scheduling_test.go)."""
    told = {value: do_not_disrupt_notice(app("t", value), NOW) for value in ("invalid-format", "0s", "-5m")}
    assert told == {
        "invalid-format": PodNotice(
            "Warning",
            "InvalidDoNotDisruptAnnotation",
            'Invalid karpenter.sh/do-not-disrupt annotation: failed to parse "invalid-format" as a duration: '
            'time: invalid duration "invalid-format", ignoring annotation',
        ),
        "0s": PodNotice(
            "Warning",
            "InvalidDoNotDisruptAnnotation",
            'Invalid karpenter.sh/do-not-disrupt annotation: duration "0s" must be positive, ignoring annotation',
        ),
        "-5m": PodNotice(
            "Warning",
            "InvalidDoNotDisruptAnnotation",
            'Invalid karpenter.sh/do-not-disrupt annotation: duration "-5m" must be positive, ignoring annotation',
        ),
    }
    assert blockers(claimed("n1", pods=[app("t", "0s")]), nodepool(), [], NOW) == []
    # "true", no annotation, and a pod with no startTime yet tell nothing
    assert [
        do_not_disrupt_notice(app("t", v, started=s), NOW) for v, s in (("true", NOW), (None, NOW), ("5m", None))
    ] == [
        None,
        None,
        None,
    ]


def test_an_evicted_pod_is_told_its_nodeclaims_disruption_reason_or_a_forceful_termination():
    """terminator/eviction.go evictionReason: the DisruptionReason condition's reason when it is True."""
    held = {"status": {"conditions": [{"type": "DisruptionReason", "status": "True", "reason": "Underutilized"}]}}
    gone = {"status": {"conditions": [{"type": "DisruptionReason", "status": "False", "reason": "Underutilized"}]}}
    assert [eviction_reason(c) for c in (held, gone, {"status": {}})] == [
        "Underutilized",
        "Forceful Termination",
        "Forceful Termination",
    ]

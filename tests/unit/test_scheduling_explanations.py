"""What the engine says about its decisions: log records, NodeClaim explanations, pod-level inputs."""

from dataclasses import replace

from provisioner.pods import OwnerReference, effective_requests
from provisioner.quantity import format_resources, parse_resources
from provisioner.scheduling.logs import (
    LogRecord,
    computed_new_nodeclaims,
    computed_unready_nodes,
    created_nodeclaim,
    first_and_others,
    found_provisionable,
    go_duration,
)
from provisioner.selectors import LabelSelector
from provisioner.taints import Taint
from tests.builders import CAPACITY_TYPE, HOSTNAME, KWOK, nodepool, pod, req, schedule, spread, term

AMD64_ON_DEMAND = nodepool("default", req("kubernetes.io/arch", "In", "amd64"), req(CAPACITY_TYPE, "In", "on-demand"))


def test_a_batch_says_how_many_nodeclaims_it_launches_and_which_existing_nodes_take_pods():
    """Karpenter's Results.Record: "computed new nodeclaim(s) to fit pod(s)" and, beside it, "computed unready
    node(s) will fit pod(s)" counting only the nodes the simulation put pods on."""
    pods = [pod(cpu="1", name=f"pause-{i}") for i in range(7)]
    result = schedule(pods, pools=[AMD64_ON_DEMAND], types=KWOK)
    assert computed_new_nodeclaims(result.new_nodeclaims).as_dict() == {
        "level": "INFO",
        "logger": "controller.provisioner",
        "message": "computed new nodeclaim(s) to fit pod(s)",
        "nodeclaims": 1,
        "pods": 7,
    }
    unready = computed_unready_nodes({"a": pods[:2], "b": [], "c": pods[2:3]}).as_dict()
    assert (unready["message"], unready["nodes"], unready["pods"]) == ("computed unready node(s) will fit pod(s)", 2, 3)


def test_log_records_carry_karpenters_fields():
    pods = [pod(cpu="1", name=f"pause-{i}") for i in range(7)]
    result = schedule(pods, pools=[AMD64_ON_DEMAND], types=KWOK)
    [plan] = result.new_nodeclaims
    found = found_provisionable(result.pods_considered, 0.0295).as_dict()
    assert found == {
        "level": "INFO",
        "logger": "controller.provisioner",
        "message": "found provisionable pod(s)",
        "Pods": "default/pause-0, default/pause-1, default/pause-2, default/pause-3, default/pause-4 and 2 other(s)",
        "duration": "29.5ms",
    }
    created = created_nodeclaim(plan, "default-abcde").as_dict()
    assert created["NodePool"] == {"name": "default"} and created["NodeClaim"] == {"name": "default-abcde"}
    assert created["requests"] == {"cpu": "7", "pods": "7"}
    assert created["instance-types"] == (
        "c-128x-amd64-linux, c-128x-amd64-windows, c-16x-amd64-linux, c-16x-amd64-windows, c-192x-amd64-linux and 49 other(s)"
    )


def test_go_durations_and_lists():
    assert [go_duration(s) for s in (0.0000123, 0.85, 1.5, 123.5)] == ["12.3µs", "850ms", "1.5s", "2m3.5s"]
    assert first_and_others(["a", "b"]) == "a, b"


def test_a_nodeclaim_explains_its_choice():
    [plan] = schedule([pod(cpu="1") for _ in range(5)], pools=[AMD64_ON_DEMAND], types=KWOK).new_nodeclaims
    explanation = plan.explanation()
    assert explanation["chosen"] == "c-8x-amd64-linux" and explanation["price"] == 0.21718
    assert explanation["runner_up"] == {"name": "s-8x-amd64-linux", "price": 0.23436}
    assert len(explanation["candidates"]) == 54
    assert explanation["excluded_by_nodepool_requirements"] == 72


def test_effective_requests_follow_kubernetes_for_init_containers_sidecars_and_overhead():
    app = [parse_resources({"cpu": "500m", "memory": "256Mi"}), parse_resources({"cpu": "250m"})]
    init = [
        (parse_resources({"cpu": "2", "memory": "64Mi"}), False),  # a big init container runs alone first
        (parse_resources({"cpu": "100m", "memory": "128Mi"}), True),  # a sidecar keeps running
    ]
    requests = effective_requests(app, init, overhead=parse_resources({"cpu": "50m"}))
    # max(app 750m + sidecar 100m, init 2 CPU) + overhead 50m; memory max(256+128, 64) Mi.
    assert format_resources(requests) == {"cpu": "2050m", "memory": "384Mi"}


def test_provisionable_pods_exclude_daemonset_bound_and_nominated_pods():
    assert pod().is_provisionable()
    assert not pod(owner=OwnerReference("DaemonSet", "ds")).is_provisionable()
    assert not pod(node_name="n1").is_provisionable()
    nominated = replace(pod(), nominated_node_name="n1")
    assert not nominated.is_provisionable()


def test_affinity_counts_pods_in_the_namespaces_the_term_names():
    other_ns = pod(labels={"app": "db"}, namespace="data")
    follower = pod(labels={"app": "web"}, affinity=[term(HOSTNAME, app="db")])
    assert len(schedule([other_ns, follower]).failures) == 1  # the term defaults to the follower's namespace
    cross = pod(labels={"app": "web"}, affinity=[term(HOSTNAME, app="db")])
    cross = replace(cross, affinity=(replace(cross.affinity[0], namespaces=frozenset({"data"})),))
    result = schedule([pod(labels={"app": "db"}, namespace="data"), cross])
    assert len(result.failures) == 0 and len(result.new_nodeclaims) == 1


def test_match_label_keys_spreads_each_revision_on_its_own():
    constraint = spread(HOSTNAME, 1, app="web")
    constraint = replace(constraint, match_label_keys=("rev",))
    pods = [pod(labels={"app": "web", "rev": rev}, spread=[constraint]) for rev in ("1", "1", "2", "2")]
    # Without matchLabelKeys four pods would need four nodes; per revision, two pods of different revisions may share.
    assert len(schedule(pods).new_nodeclaims) == 2
    assert LabelSelector.parse("app=web").matches({"app": "web"})


def test_a_pool_at_its_limits_blames_the_taint_the_pod_does_not_tolerate_not_the_limits():
    """Raising the limits would not help this pod: the reason it is blocked first is the taint (then the label)."""
    tainted_full = nodepool("gpu", taints=[Taint("dedicated", "NoSchedule", "gpu")], limits={"cpu": "0"})
    labelled_full = nodepool("team", labels={"team": "a"}, limits={"cpu": "0"})
    open_full = nodepool("open", limits={"cpu": "0"})
    lost = pod(cpu="1", node_selector={"team": "b"})
    failure = schedule([lost], pools=[tainted_full, labelled_full, open_full], types=KWOK).failures[lost.uid]
    assert [(r.nodepool, r.kind, r.message) for r in failure.reasons] == [
        ("team", "requirements", "incompatible requirements, key team, team In [b] not in team In [a]"),
        ("open", "requirements", 'incompatible requirements, label "team" does not have known values'),
        ("gpu", "taints", "did not tolerate taint dedicated=gpu:NoSchedule"),
    ]


def test_a_field_never_overwrites_the_lines_own_keys():
    record = LogRecord("disruption command rejected", {"message": "other", "level": "x", "command": "c"}, "WARN", "l")
    assert record.as_dict() == {
        "level": "WARN",
        "logger": "l",
        "message": "disruption command rejected",
        "command": "c",
    }

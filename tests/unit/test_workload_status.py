"""The lab's deployment, ReplicaSet and DaemonSet controllers write status, revisions and conditions as
kube-controller-manager's do, on a lab running only its cluster side over static Ready nodes."""

from __future__ import annotations

import copy
from typing import Any

from provisioner.cluster.objects import timestamp
from provisioner.lab import Lab, LabConfig

T0 = 1_800_000_000.0
AT_T0 = timestamp(T0)  # 2027-01-15T08:00:00Z
REVISION = "deployment.kubernetes.io/revision"
Condition = tuple[str, str, str, str, str, str]  # type, status, reason, message, lastUpdateTime, lastTransitionTime


def lab(*, nodes: int = 1) -> Lab:
    config = LabConfig(nodepools=[], nodepool_uids={}, nodeclasses={}, catalogs={}, components="cluster")
    made = Lab([], config, {}, now=T0)
    for index in range(nodes):
        made.store.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{index}", "labels": {"kubernetes.io/os": "linux"}},
                "spec": {},
                "status": {
                    "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return made


def deployment(replicas: int = 3, image: str = "web:1", template_cpu: str = "100m", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "web", "image": image, "resources": {"requests": {"cpu": template_cpu}}}]
                },
            },
            **spec,
        },
    }


def daemonset(image: str = "agent:1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": image}]},
            },
            **spec,
        },
    }


def get(made: Lab, kind: str, name: str = "web") -> dict[str, Any]:
    found = made.store.get(kind, name, "default")
    assert found is not None
    return found


def edit(made: Lab, kind: str, change: Any, name: str = "web") -> None:
    """A write of the spec, as kubectl's would be (the generation moves)."""
    obj = get(made, kind, name)
    change(obj["spec"])
    made.store.update(obj, spec_changed=True)


def counts(made: Lab) -> dict[str, Any]:
    return {key: value for key, value in get(made, "Deployment")["status"].items() if key != "conditions"}


def conditions(made: Lab) -> list[Condition]:
    return [
        (c["type"], c["status"], c["reason"], c["message"], c["lastUpdateTime"], c["lastTransitionTime"])
        for c in get(made, "Deployment")["status"]["conditions"]
    ]


def replicasets(made: Lab) -> list[tuple[str, int, str, str]]:
    """Each ReplicaSet, oldest revision first: replicas, revision, revision-history and image."""
    found = [
        (
            rs["spec"]["replicas"],
            rs["metadata"]["annotations"][REVISION],
            rs["metadata"]["annotations"].get("deployment.kubernetes.io/revision-history", ""),
            rs["spec"]["template"]["spec"]["containers"][0]["image"],
        )
        for rs in made.store.list("ReplicaSet")
    ]
    return sorted(found, key=lambda rs: int(rs[1]))


def available(at: str, since: str = "") -> Condition:
    """The Available condition as it reads once minimum availability is reached (`at`, True `since`)."""
    return ("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", at, since or at)


def unavailable(at: str) -> Condition:
    message = "Deployment does not have minimum availability."
    return ("Available", "False", "MinimumReplicasUnavailable", message, at, at)


def progressed(name: str, at: str, since: str = "") -> Condition:
    """Progressing once the rollout of ReplicaSet `name` completed."""
    message = f'ReplicaSet "{name}" has successfully progressed.'
    return ("Progressing", "True", "NewReplicaSetAvailable", message, at, since or at)


def test_a_new_deployment_reports_its_replicaset_then_its_progress_then_its_availability() -> None:
    made = lab()
    made.store.create(deployment())
    made.step()  # the deployment controller's first sync: a ReplicaSet, no pods counted yet
    first = get(made, "Deployment")
    [rs] = made.store.list("ReplicaSet")
    name = rs["metadata"]["name"]
    assert first["metadata"]["annotations"] == {REVISION: "1"}
    assert rs["metadata"]["annotations"] == {
        REVISION: "1",
        "deployment.kubernetes.io/desired-replicas": "3",
        "deployment.kubernetes.io/max-replicas": "4",  # 3 and a surge of 25 %, rounded up
    }
    assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", "pod-template-hash": name.split("-")[1]}}
    assert counts(made)["unavailableReplicas"] == 3
    assert conditions(made) == [
        ("Progressing", "True", "NewReplicaSetCreated", f'Created new replica set "{name}"', AT_T0, AT_T0),
        unavailable(AT_T0),
    ]
    made.settle()  # the pods are made, bound and started at once on the Ready node
    assert counts(made) == {
        "observedGeneration": 1,
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "unavailableReplicas": 0,
    }
    assert get(made, "ReplicaSet", name)["status"] == {
        "replicas": 3,
        "fullyLabeledReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "observedGeneration": 1,
    }
    assert conditions(made) == [available(AT_T0), progressed(name, AT_T0)]
    assert made.next_due() is None  # complete: nothing to look at again


def test_pods_are_available_once_ready_for_min_ready_seconds_and_the_lab_wakes_for_it() -> None:
    made = lab()
    made.store.create(deployment(minReadySeconds=10))
    made.settle()
    [rs] = made.store.list("ReplicaSet")
    assert rs["spec"]["minReadySeconds"] == 10  # the Deployment's, copied
    assert (counts(made)["readyReplicas"], counts(made)["availableReplicas"]) == (3, 0)
    assert made.next_due() == T0 + 10
    made.advance(9)
    assert counts(made)["availableReplicas"] == 0
    made.advance(1)
    assert (counts(made)["availableReplicas"], counts(made)["unavailableReplicas"]) == (3, 0)
    at_10 = timestamp(T0 + 10)
    assert conditions(made) == [available(at_10), progressed(rs["metadata"]["name"], at_10, since=AT_T0)]
    assert made.next_due() is None


def test_a_rollout_that_makes_no_progress_times_out_at_its_deadline() -> None:
    made = lab(nodes=0)  # nowhere to run: the pods stay Pending
    made.store.create(deployment(progressDeadlineSeconds=30))
    made.settle()
    [rs] = made.store.list("ReplicaSet")
    name = rs["metadata"]["name"]
    assert conditions(made)[1][:3] == ("Progressing", "True", "ReplicaSetUpdated")
    assert made.next_due() == T0 + 31  # a second past the deadline, as the controller requeues
    made.advance(30)
    assert conditions(made)[1][:3] == ("Progressing", "True", "ReplicaSetUpdated")
    made.advance(1)
    at_31 = timestamp(T0 + 31)
    assert conditions(made) == [
        unavailable(AT_T0),
        (
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            f'ReplicaSet "{name}" has timed out progressing.',
            at_31,
            at_31,
        ),
    ]
    assert made.next_due() is None  # a timeout is reported once


def test_each_template_gets_the_next_revision_and_a_rollback_renumbers_the_old_replicaset() -> None:
    made = lab()
    made.store.create(deployment(replicas=2))
    made.settle()
    edit(made, "Deployment", lambda spec: spec["template"]["spec"]["containers"][0].update(image="web:2"))
    made.settle()
    assert replicasets(made) == [(0, "1", "", "web:1"), (2, "2", "", "web:2")]
    assert [p["spec"]["containers"][0]["image"] for p in made.store.list("Pod")] == ["web:2", "web:2"]
    # kubectl rollout undo patches the template back as Go writes it: empty fields, canonical quantities.
    [old] = [rs for rs in made.store.list("ReplicaSet") if rs["metadata"]["annotations"][REVISION] == "1"]
    template = copy.deepcopy(old["spec"]["template"])
    del template["metadata"]["labels"]["pod-template-hash"]
    template["metadata"]["creationTimestamp"] = None
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "0.1"}, "limits": {}}
    edit(made, "Deployment", lambda spec: spec.update(template=template))
    made.settle()
    assert len(made.store.list("ReplicaSet")) == 2  # the first one again, not a third
    assert replicasets(made) == [(0, "2", "", "web:2"), (2, "3", "1", "web:1")]
    assert get(made, "Deployment")["metadata"]["annotations"] == {REVISION: "3"}


def test_old_replicasets_beyond_the_revision_history_limit_are_deleted_lowest_revision_first() -> None:
    made = lab()
    made.store.create(deployment(replicas=1, revisionHistoryLimit=1))
    made.settle()
    for image in ("web:2", "web:3"):
        edit(
            made, "Deployment", lambda spec, image=image: spec["template"]["spec"]["containers"][0].update(image=image)
        )
        made.settle()
    assert replicasets(made) == [(0, "2", "", "web:2"), (1, "3", "", "web:3")]


def test_the_deployment_annotations_are_copied_to_its_current_replicaset() -> None:
    made = lab()
    manifest = deployment(replicas=1)
    manifest["metadata"]["annotations"] = {
        "kubernetes.io/change-cause": "first",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    made.store.create(manifest)
    made.settle()
    [rs] = made.store.list("ReplicaSet")
    assert rs["metadata"]["annotations"]["kubernetes.io/change-cause"] == "first"
    assert "kubectl.kubernetes.io/last-applied-configuration" not in rs["metadata"]["annotations"]


def test_a_paused_deployment_scales_its_replicaset_but_rolls_out_no_new_template() -> None:
    made = lab()
    made.store.create(deployment(replicas=2))
    made.settle()
    [rs] = made.store.list("ReplicaSet")
    made.now += 5
    edit(made, "Deployment", lambda spec: spec.update(paused=True))
    edit(made, "Deployment", lambda spec: spec["template"]["spec"]["containers"][0].update(image="web:2"))
    edit(made, "Deployment", lambda spec: spec.update(replicas=4))
    made.settle()
    at_5 = timestamp(T0 + 5)
    assert replicasets(made) == [(4, "1", "", "web:1")]
    assert counts(made) == {
        "observedGeneration": 4,
        "replicas": 4,
        "updatedReplicas": 0,  # no ReplicaSet of the paused template
        "readyReplicas": 4,
        "availableReplicas": 4,
        "unavailableReplicas": 0,
    }
    assert conditions(made) == [
        ("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", at_5, at_5),
        available(at_5),  # 2 of 4 when scaled, under 4 less maxUnavailable's 1: False, then True again
    ]
    assert made.next_due() is None  # paused: no deadline runs
    made.now += 5
    edit(made, "Deployment", lambda spec: spec.update(paused=False))
    made.settle()
    at_10 = timestamp(T0 + 10)
    assert replicasets(made) == [(0, "1", "", "web:1"), (4, "2", "", "web:2")]
    [new] = [r for r in made.store.list("ReplicaSet") if r is not rs]
    assert conditions(made)[1] == progressed(new["metadata"]["name"], at_10)  # from Unknown (resumed) to True


def test_daemon_pods_carry_their_revision_and_a_rolling_update_replaces_the_old_ones() -> None:
    made = lab(nodes=2)
    made.store.create(daemonset(updateStrategy={"type": "RollingUpdate"}))
    made.settle()
    pods = made.store.list("Pod")
    revision = pods[0]["metadata"]["labels"]["controller-revision-hash"]
    assert [p["metadata"]["labels"] for p in pods] == [
        {"app": "agent", "controller-revision-hash": revision, "pod-template-generation": "1"}
    ] * 2
    assert get(made, "DaemonSet", "agent")["status"] == {
        "currentNumberScheduled": 2,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 2,
        "numberReady": 2,
        "observedGeneration": 1,
        "updatedNumberScheduled": 2,
        "numberAvailable": 2,
        "numberUnavailable": 0,
    }
    edit(made, "DaemonSet", lambda spec: spec["template"]["spec"]["containers"][0].update(image="agent:2"), "agent")
    made.settle()
    replaced = made.store.list("Pod")
    assert sorted((p["spec"]["nodeName"], p["spec"]["containers"][0]["image"]) for p in replaced) == [
        ("node-0", "agent:2"),
        ("node-1", "agent:2"),
    ]
    assert {p["metadata"]["uid"] for p in replaced}.isdisjoint(p["metadata"]["uid"] for p in pods)
    status = get(made, "DaemonSet", "agent")["status"]
    assert (status["observedGeneration"], status["updatedNumberScheduled"], status["numberAvailable"]) == (2, 2, 2)


def test_on_delete_keeps_old_daemon_pods_and_counts_them_as_not_updated() -> None:
    made = lab(nodes=2)
    made.store.create(daemonset(updateStrategy={"type": "OnDelete"}))
    made.settle()
    pods = {p["metadata"]["uid"] for p in made.store.list("Pod")}
    edit(made, "DaemonSet", lambda spec: spec["template"]["spec"]["containers"][0].update(image="agent:2"), "agent")
    made.settle()
    assert {p["metadata"]["uid"] for p in made.store.list("Pod")} == pods
    status = get(made, "DaemonSet", "agent")["status"]
    assert (status["desiredNumberScheduled"], status["updatedNumberScheduled"], status["numberReady"]) == (2, 0, 2)


def test_daemon_pods_are_available_after_min_ready_seconds() -> None:
    made = lab(nodes=2)
    made.store.create(daemonset(minReadySeconds=5))
    made.settle()
    status = get(made, "DaemonSet", "agent")["status"]
    assert (status["numberReady"], status["numberAvailable"], status["numberUnavailable"]) == (2, 0, 2)
    assert made.next_due() == T0 + 5
    made.advance(5)
    status = get(made, "DaemonSet", "agent")["status"]
    assert (status["numberAvailable"], status["numberUnavailable"]) == (2, 0)


def test_a_daemon_pod_that_does_not_fit_its_node_stays_pending_there_as_kube_scheduler_leaves_it() -> None:
    """The DaemonSet controller pins each pod to its node by node affinity (metadata.name) and kube-scheduler binds
    it; on a full node it is Pending, never bound past allocatable (kind-worker at 4.05 of 4.00 CPU)."""
    made = lab(nodes=2)
    made.store.create(deployment(replicas=1, template_cpu="7950m"))
    made.settle()
    [web] = made.store.list("Pod")
    full = web["spec"]["nodeName"]
    agent = daemonset()
    agent["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    made.store.create(agent)
    made.settle()
    daemons = {p["metadata"]["name"]: p for p in made.store.list("Pod") if p["metadata"]["name"].startswith("agent")}
    pinned = {
        p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
            "matchFields"
        ][0]["values"][0]: p
        for p in daemons.values()
    }
    assert sorted(pinned) == ["node-0", "node-1"]
    stuck, running = pinned[full], pinned["node-1" if full == "node-0" else "node-0"]
    assert stuck["spec"].get("nodeName", "") == "" and stuck["status"]["phase"] == "Pending"
    [scheduled] = [c for c in stuck["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == (
        "False",
        "Unschedulable",
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector.",
    )
    assert running["spec"]["nodeName"] != full and running["status"]["phase"] == "Running"
    status = get(made, "DaemonSet", "agent")["status"]
    assert (status["desiredNumberScheduled"], status["currentNumberScheduled"], status["numberReady"]) == (2, 2, 1)
    made.settle()  # no second pod is made for the node whose pod waits
    assert len([p for p in made.store.list("Pod") if p["metadata"]["name"].startswith("agent")]) == 2


def test_match_fields_select_only_a_node_name_and_karpenter_refuses_to_provision_for_them() -> None:
    import pytest

    from provisioner.manifests.errors import ManifestError
    from provisioner.manifests.pod import pod_from_spec
    from provisioner.pods import validation_errors

    def spec(*fields: dict[str, Any]) -> dict[str, Any]:
        terms = [{"matchFields": list(fields)}]
        return {
            "containers": [{"name": "c"}],
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
            },
        }

    pinned = pod_from_spec(
        spec({"key": "metadata.name", "operator": "In", "values": ["node-0"]}), "spec", namespace="default", labels={}
    )
    assert validation_errors(pinned) == ["node selector term with matchFields is not supported"]
    with pytest.raises(ManifestError) as refused:
        pod_from_spec(
            spec({"key": "metadata.uid", "operator": "In", "values": ["x"]}), "spec", namespace="default", labels={}
        )
    assert (refused.value.field, refused.value.message) == (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key",
        'Unsupported value: "metadata.uid": supported values: metadata.name',
    )
    with pytest.raises(ManifestError) as two:
        pod_from_spec(
            spec({"key": "metadata.name", "operator": "In", "values": ["a", "b"]}),
            "spec",
            namespace="default",
            labels={},
        )
    assert two.value.message == "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"

"""Karpenter v1.15.0's CapacityBuffer suites ported onto karpui, each test naming the It it follows:
pkg/controllers/capacitybuffer/suite_test.go and helpers_test.go, pkg/controllers/provisioning/buffers_test.go,
pkg/state/virtualpods/virtualpods_test.go and utilities_test.go.

Karpenter keeps each ready buffer's virtual pods in a cache (virtualpods.Cache) the buffer controller refreshes and
the provisioner reads (GetAll); karpui builds them afresh at each provisioning pass from the buffers' status
(`capacitybuffer.virtual_pods`), so the cache's Its are ported as what GetAll returns. The Go controller is
reconciled one buffer at a time; karpui's reconciles every buffer in a pass. Its an existing test already covers
exactly are named where they are covered (tests/unit/test_capacitybuffer.py), not repeated.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from provisioner import capacitybuffers as cb
from provisioner.controllers import capacitybuffer
from provisioner.controllers.capacitybuffer import CapacityBufferController, set_condition
from provisioner.controllers.context import RETRY_MAX_SECONDS
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.lab import Lab
from provisioner.options import KarpenterOptions, parse_feature_gates
from provisioner.scheduling.results import PodFailure, SchedulingResult
from tests.lab_builders import condition, lab, nodepool_doc

GATED = KarpenterOptions(feature_gates=parse_feature_gates("CapacityBuffer=true"))
ACTIVE = "buffer.x-k8s.io/active-capacity"


def container(name: str = "app", image: str = "pause:latest", **requests: str) -> dict[str, Any]:
    made: dict[str, Any] = {"name": name, "image": image}
    if requests:
        made["resources"] = {"requests": requests}
    return made


def pod_template(name: str, *containers: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"containers": list(containers) or [container("c", "p")]}}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "template": template,
    }


def workload(kind: str, name: str, replicas: int | None, **requests: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container(**requests)]}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def buffer(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": cb.API_VERSION,
        "kind": cb.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def template_ref(name: str, replicas: int) -> dict[str, Any]:
    return {"podTemplateRef": {"name": name}, "replicas": replicas}


def deployment_ref(name: str) -> dict[str, str]:
    return {"apiGroup": "apps", "kind": "Deployment", "name": name}


def ready_buffer(name: str, replicas: int, namespace: str = "default") -> dict[str, Any]:
    """test.ReadyBuffer: a podTemplateRef buffer (template NAME-template) already ReadyForProvisioning."""
    made = buffer(name, namespace, **template_ref(f"{name}-template", replicas))
    made["metadata"]["uid"] = f"uid-{name}"
    made["status"] = {
        "replicas": replicas,
        "podTemplateRef": {"name": f"{name}-template"},
        "conditions": [{"type": cb.READY_FOR_PROVISIONING, "status": "True", "reason": cb.RESOLVED}],
    }
    return made


def ready_scalable_buffer(name: str, replicas: int) -> dict[str, Any]:
    """test.ReadyScalableRefBuffer: a scalableRef buffer (Deployment NAME-deploy, 20%) already ReadyForProvisioning."""
    made = buffer(name, scalableRef=deployment_ref(f"{name}-deploy"), percentage=20)
    made["metadata"]["uid"] = f"uid-{name}"
    made["status"] = {
        "replicas": replicas,
        "conditions": [{"type": cb.READY_FOR_PROVISIONING, "status": "True", "reason": cb.RESOLVED}],
    }
    return made


def template_for(made: dict[str, Any]) -> dict[str, Any]:
    """podTemplateFor: the PodTemplate a ready buffer names, of one container without requests."""
    return pod_template(made["spec"]["podTemplateRef"]["name"], container("app", "pause:v1"))


def deployment_for(made: dict[str, Any]) -> dict[str, Any]:
    """deploymentFor: the Deployment a ready scalableRef buffer names, 10 replicas."""
    return workload("Deployment", made["spec"]["scalableRef"]["name"], 10)


def cluster(*docs: dict[str, Any]) -> Lab:
    """A lab with the CapacityBuffer gate on, a NodePool that reclaims empty nodes at once, and `docs` stored."""
    pool = nodepool_doc(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"})
    return lab(pool, *docs, options=GATED)


def reconcile(made: Lab) -> None:
    CapacityBufferController().reconcile(made.ctx)


def stored(made: Lab, name: str) -> dict[str, Any]:
    found = made.store.get(cb.KIND, name, "default")
    assert found is not None
    return found


def virtual(made: Lab) -> list[Any]:
    """The provisioner's GetAll: every ready buffer's virtual pods."""
    return capacitybuffer.virtual_pods(made.ctx)


# suite_test.go: PodTemplateRef resolution ----------------------------------------------------------------------------


def test_should_resolve_a_podtemplate_and_set_ready_for_provisioning_true():
    """CapacityBuffer Controller PodTemplateRef resolution: should resolve a PodTemplate and set
    ReadyForProvisioning=True"""
    template = pod_template("test-template", container(cpu="1", memory="1Gi"))
    made = cluster(template, buffer("test-buffer", provisioningStrategy=ACTIVE, **template_ref("test-template", 5)))
    reconcile(made)
    status = stored(made, "test-buffer")["status"]
    assert condition(stored(made, "test-buffer"), cb.READY_FOR_PROVISIONING) == (
        "True",
        "Resolved",
        "Pod template resolved successfully",
    )
    assert status["podTemplateRef"] == {"name": "test-template"}
    assert (status["replicas"], status["provisioningStrategy"]) == (5, ACTIVE)


def test_should_set_ready_for_provisioning_false_when_podtemplate_is_not_found():
    """CapacityBuffer Controller PodTemplateRef resolution: should set ReadyForProvisioning=False when PodTemplate is
    not found"""
    made = cluster(buffer("test-buffer-missing", **template_ref("nonexistent", 3)))
    reconcile(made)
    assert condition(stored(made, "test-buffer-missing"), cb.READY_FOR_PROVISIONING) == (
        "False",
        "PodTemplateNotFound",
        'podtemplates "nonexistent" not found',
    )
    assert made.ctx.backoffs == {}  # a missing object is the user's to fix: the reconcile succeeds


# suite_test.go: ScalableRef resolution -------------------------------------------------------------------------------


def test_should_resolve_a_deployment_and_calculate_percentage_based_replicas():
    """CapacityBuffer Controller ScalableRef resolution: should resolve a Deployment and calculate percentage-based
    replicas (20% of 10 = 2; a scalableRef sets no status.podTemplateRef)"""
    deploy = workload("Deployment", "my-app", 10, cpu="500m", memory="256Mi")
    made = cluster(deploy, buffer("test-buffer-scalable", scalableRef=deployment_ref("my-app"), percentage=20))
    reconcile(made)
    status = stored(made, "test-buffer-scalable")["status"]
    assert condition(stored(made, "test-buffer-scalable"), cb.READY_FOR_PROVISIONING)[:2] == ("True", "Resolved")
    assert status["replicas"] == 2 and "podTemplateRef" not in status


def test_should_set_ready_for_provisioning_false_when_scalable_ref_is_not_found():
    """CapacityBuffer Controller ScalableRef resolution: should set ReadyForProvisioning=False when scalable ref is
    not found"""
    made = cluster(buffer("test-buffer-missing-ref", scalableRef=deployment_ref("nonexistent"), replicas=3))
    reconcile(made)
    assert condition(stored(made, "test-buffer-missing-ref"), cb.READY_FOR_PROVISIONING) == (
        "False",
        "ScalableRefNotFound",
        'deployments.apps "nonexistent" not found',
    )
    assert made.ctx.backoffs == {}


def test_should_resolve_a_statefulset():
    """CapacityBuffer Controller ScalableRef resolution: should resolve a StatefulSet (20% of 5 = 1)"""
    sts = workload("StatefulSet", "my-sts", 5, cpu="500m")
    ref = {"apiGroup": "apps", "kind": "StatefulSet", "name": "my-sts"}
    made = cluster(sts, buffer("test-buffer-sts", scalableRef=ref, percentage=20))
    reconcile(made)
    assert condition(stored(made, "test-buffer-sts"), cb.READY_FOR_PROVISIONING)[:2] == ("True", "Resolved")
    assert stored(made, "test-buffer-sts")["status"]["replicas"] == 1


def reconcile_errors(made: Lab) -> list[dict[str, object]]:
    return [dict(t.record.fields) for t in made.ctx.logs if t.record.message == "Reconciler error"]


def test_should_return_error_for_unsupported_kind():
    """CapacityBuffer Controller ScalableRef resolution: should return error for unsupported kind (ExpectReconciled
    Failed: the status says why, and the reconcile fails, is logged and retried with backoff)"""
    ref = {"apiGroup": "batch", "kind": "Job", "name": "my-job"}
    made = cluster(buffer("test-buffer-bad-kind", scalableRef=ref, percentage=20))
    reconcile(made)
    assert condition(stored(made, "test-buffer-bad-kind"), cb.READY_FOR_PROVISIONING) == (
        "False",
        "ResolutionFailed",
        'unsupported scalableRef API group "batch"',
    )
    [error] = reconcile_errors(made)
    assert (error["controller"], error["error"]) == (
        "capacitybuffer",
        'Unresolved: unsupported scalableRef API group "batch"',
    )
    assert error["CapacityBuffer"] == {"name": "test-buffer-bad-kind", "namespace": "default"}
    assert list(made.ctx.backoffs) == [("capacitybuffer", "CapacityBuffer/default/test-buffer-bad-kind")]


def test_should_return_error_for_unsupported_api_group():
    """CapacityBuffer Controller ScalableRef resolution: should return error for unsupported API group"""
    ref = {"apiGroup": "batch", "kind": "Deployment", "name": "my-deploy"}
    made = cluster(buffer("test-buffer-bad-group", scalableRef=ref, percentage=20))
    reconcile(made)
    assert condition(stored(made, "test-buffer-bad-group"), cb.READY_FOR_PROVISIONING)[:2] == (
        "False",
        "ResolutionFailed",
    )
    assert len(reconcile_errors(made)) == 1


def test_should_default_to_1_replica_when_workload_has_nil_spec_replicas():
    """CapacityBuffer Controller ScalableRef resolution: should default to 1 replica when workload has nil
    Spec.Replicas (100% of 1 = 1)"""
    deploy = workload("Deployment", "nil-replicas-app", None, cpu="500m")
    made = cluster(
        deploy,
        buffer("test-buffer-nil-replicas", scalableRef=deployment_ref("nil-replicas-app"), percentage=100),
    )
    reconcile(made)
    assert condition(stored(made, "test-buffer-nil-replicas"), cb.READY_FOR_PROVISIONING)[0] == "True"
    assert stored(made, "test-buffer-nil-replicas")["status"]["replicas"] == 1


# suite_test.go: Replica calculation (DescribeTable) is test_capacitybuffer.py::test_replica_calculation, entry by
# entry.

# suite_test.go: PodTemplate watch ------------------------------------------------------------------------------------


def test_should_re_resolve_the_template_when_its_generation_changes():
    """CapacityBuffer Controller PodTemplate watch: should re-resolve the template when its generation changes"""
    template = pod_template("watched-template", container("app", "pause:v1"))
    made = cluster(template, buffer("test-watch-buffer", **template_ref("watched-template", 2)))
    reconcile(made)
    original = stored(made, "test-watch-buffer")["status"]["podTemplateGeneration"]
    changed = copy.deepcopy(made.store.get("PodTemplate", "watched-template", "default"))
    changed["template"]["spec"]["containers"][0]["image"] = "pause:v2"
    made.store.apply(changed)
    reconcile(made)
    updated = made.store.get("PodTemplate", "watched-template", "default")
    assert updated["template"]["spec"]["containers"][0]["image"] == "pause:v2"
    assert (original, stored(made, "test-watch-buffer")["status"]["podTemplateGeneration"]) == (1, 2)


# suite_test.go: Provisioner trigger ----------------------------------------------------------------------------------
# karpui has no trigger object to record calls on: a triggered provisioner is one that ran a pass, which writes each
# buffer's Provisioning condition (updateBufferProvisioningStatus) and the nodes holding buffer pods.


def test_should_trigger_the_provisioner_after_a_successful_reconcile():
    """CapacityBuffer Controller Provisioner trigger: should trigger the provisioner after a successful reconcile. A
    buffer with no chunks to keep has no virtual pods to trigger a pass with: its reconcile does, and the pass writes
    Provisioning=False/BufferEmpty. One with a chunk gets its node, and once its status changes, a pass that finds
    the chunk on that node's capacity."""
    made = cluster(pod_template("trig-template"), buffer("trig-buffer", **template_ref("trig-template", 0)))
    made.advance(5)
    assert condition(stored(made, "trig-buffer"), cb.PROVISIONING) == (
        "False",
        "BufferEmpty",
        "Buffer has zero desired replicas",
    )
    made = cluster(pod_template("trig-template"), buffer("trig-buffer", **template_ref("trig-template", 1)))
    made.advance(5)
    assert condition(stored(made, "trig-buffer"), cb.PROVISIONING)[:2] == ("True", "FitsExistingCapacity")
    assert len(made.store.list("NodeClaim")) == 1


def test_should_trigger_the_provisioner_when_resolution_fails_so_stale_cluster_state_is_refreshed():
    """CapacityBuffer Controller Provisioner trigger: should trigger the provisioner when resolution fails so stale
    cluster state is refreshed (its pass writes Provisioning=False/NotReadyForProvisioning)"""
    made = cluster(buffer("no-trig-buffer", **template_ref("does-not-exist", 1)))
    made.advance(5)
    assert condition(stored(made, "no-trig-buffer"), cb.PROVISIONING) == (
        "False",
        "NotReadyForProvisioning",
        "Buffer is not ReadyForProvisioning",
    )


def test_should_trigger_the_provisioner_when_the_buffer_is_deleted_so_empty_nodes_can_scale_down():
    """CapacityBuffer Controller Provisioner trigger: should trigger the provisioner when the buffer is deleted so
    empty nodes can scale down"""
    made = cluster(pod_template("del-trig-template"), buffer("del-trig-buffer", **template_ref("del-trig-template", 1)))
    made.advance(60)
    [claim] = made.store.list("NodeClaim")
    assert list(made.ctx.buffer_nodes.values()) == [1]
    made.store.delete(cb.KIND, "del-trig-buffer", "default")
    made.advance(120)
    assert (made.ctx.buffer_nodes, made.store.list("NodeClaim")) == ({}, [])


def test_a_buffer_that_stops_resolving_is_told_not_ready_and_frees_its_node():
    """Provisioner trigger and Virtual pod cache together: the PodTemplate of a buffer holding a node is deleted; the
    provisioner's next pass (Schedule with no pods still runs updateBufferProvisioningStatus, provisioner.go:162)
    writes Provisioning=False/NotReadyForProvisioning and frees the node."""
    made = cluster(pod_template("gone-template"), buffer("gone-buffer", **template_ref("gone-template", 1)))
    made.advance(60)
    assert condition(stored(made, "gone-buffer"), cb.PROVISIONING)[:2] == ("True", "FitsExistingCapacity")
    made.store.delete("PodTemplate", "gone-template", "default")
    made.advance(120)
    assert condition(stored(made, "gone-buffer"), cb.PROVISIONING)[:2] == ("False", "NotReadyForProvisioning")
    assert (made.ctx.buffer_nodes, made.store.list("NodeClaim")) == ({}, [])


# controller.go Reconcile: a retryable resolution error returns before the cache and the trigger (controller.go:110-113)


def _breaking(made: Lab, name: str) -> None:
    """The buffer's scalableRef turned to a Job: resolution fails with a retryable error (not a NotFound)."""
    changed = copy.deepcopy(stored(made, name))
    changed["spec"]["scalableRef"] = {"apiGroup": "batch", "kind": "Job", "name": "my-job"}
    made.store.apply(changed)


def test_a_buffer_failing_with_a_retryable_error_keeps_its_last_virtual_pods():
    """The status says ReadyForProvisioning=False, but the cache keeps the entry the last successful reconcile made,
    so the provisioner's GetAll still has its virtual pods; a reconcile that succeeds again refreshes them."""
    deploy = workload("Deployment", "web", 10, cpu="500m")
    made = cluster(deploy, buffer("kept", scalableRef=deployment_ref("web"), percentage=20))
    reconcile(made)
    names = [p.name for p in virtual(made)]
    assert names == ["capacity-buffer-kept-1", "capacity-buffer-kept-2"]
    _breaking(made, "kept")
    reconcile(made)
    assert condition(stored(made, "kept"), cb.READY_FOR_PROVISIONING)[:2] == ("False", "ResolutionFailed")
    assert [p.name for p in virtual(made)] == names
    assert [p.requests["cpu"] for p in virtual(made)] == [500, 500]
    fixed = copy.deepcopy(stored(made, "kept"))
    fixed["spec"]["scalableRef"] = deployment_ref("web")
    fixed["spec"]["percentage"] = 10
    made.store.apply(fixed)
    made.ctx.now += RETRY_MAX_SECONDS  # past the failed reconcile's backoff
    reconcile(made)
    assert [p.name for p in virtual(made)] == ["capacity-buffer-kept-1"]


def test_a_buffer_failing_with_a_retryable_error_is_dropped_once_deleted():
    """A deleted buffer's cache entry is removed (RemoveEntry), even one kept through a failing reconcile."""
    made = cluster(workload("Deployment", "web", 10), buffer("kept", scalableRef=deployment_ref("web"), percentage=20))
    reconcile(made)
    _breaking(made, "kept")
    reconcile(made)
    assert len(virtual(made)) == 2
    made.store.delete(cb.KIND, "kept", "default")
    reconcile(made)
    assert (virtual(made), made.ctx.buffer_cache, made.ctx.buffers_failing) == ([], {}, set())


def test_a_buffer_failing_with_a_retryable_error_triggers_no_provisioning_pass():
    """Its reconcile fails before c.trigger.Trigger(cb.UID): the status it wrote asks for no pass, and its last
    trigger is not taken for a deleted buffer's."""
    made = cluster(workload("Deployment", "web", 10), buffer("kept", scalableRef=deployment_ref("web"), percentage=20))
    reconcile(made)
    provisioner = ProvisioningController({})
    provisioner.reconcile(made.ctx)
    made.ctx.now += 5  # the batch closes and its pass runs
    provisioner.reconcile(made.ctx)
    assert provisioner.batcher.opened_at is None
    _breaking(made, "kept")
    reconcile(made)
    assert capacitybuffer.triggers(made.ctx) == []
    made.ctx.now += 1  # before the virtual pods' own requeue
    provisioner.reconcile(made.ctx)
    assert provisioner.batcher.opened_at is None
    assert [k for k in provisioner.triggers if k.startswith(capacitybuffer.TRIGGER)] == []


# suite_test.go: Virtual pod cache ------------------------------------------------------------------------------------


def test_should_populate_the_cache_after_a_successful_reconcile():
    """CapacityBuffer Controller Virtual pod cache: should populate the cache after a successful reconcile"""
    made = cluster(pod_template("cache-template"), buffer("cache-buffer", **template_ref("cache-template", 3)))
    assert virtual(made) == []
    reconcile(made)
    assert [p.name for p in virtual(made)] == [f"capacity-buffer-cache-buffer-{i}" for i in (1, 2, 3)]


def test_should_remove_the_cache_entry_when_resolution_fails_with_not_found():
    """CapacityBuffer Controller Virtual pod cache: should remove the cache entry when resolution fails with
    NotFound"""
    made = cluster(pod_template("gone-template"), buffer("gone-buffer", **template_ref("gone-template", 2)))
    reconcile(made)
    assert len(virtual(made)) == 2
    made.store.delete("PodTemplate", "gone-template", "default")
    reconcile(made)
    assert virtual(made) == []


def test_should_evict_the_cache_entry_when_the_buffer_is_deleted():
    """CapacityBuffer Controller Virtual pod cache: should evict the cache entry when the buffer is deleted"""
    made = cluster(pod_template("del-template"), buffer("del-buffer", **template_ref("del-template", 3)))
    reconcile(made)
    assert len(virtual(made)) == 3
    made.store.delete(cb.KIND, "del-buffer", "default")
    reconcile(made)
    assert virtual(made) == []


def test_should_not_touch_the_cache_when_a_buffer_has_neither_ref_set():
    """CapacityBuffer Controller Virtual pod cache: should not touch the cache when a buffer has neither ref set"""
    made = cluster(buffer("no-ref-buffer", replicas=1))
    reconcile(made)
    assert condition(stored(made, "no-ref-buffer"), cb.READY_FOR_PROVISIONING)[:2] == ("False", "ResolutionFailed")
    assert virtual(made) == []


# helpers_test.go: calculateLimitReplicas is test_capacitybuffer.py::test_limit_replicas (CPU, memory, minimum, floor,
# millicores, 0, no requests, no match) and ::test_requests_sum_containers_and_take_the_init_peak (containers summed,
# init container max, container sum). calculatePercentageReplicas is ::test_percentage_replicas, It by It.

# helpers_test.go: totalPodRequests (resources.RequestsForSpec) -------------------------------------------------------
# "should sum sidecar init containers with regular containers", "should use max of regular init container + preceding
# sidecars vs running total" and "should not treat init containers without restartPolicy as sidecars" are
# test_capacitybuffer.py::test_sidecars_add_to_the_containers.

MIB = 1024**2 * 1000  # in milli-units, as the requests are kept


def requests_of(spec: dict[str, Any]) -> dict[str, int]:
    return dict(cb.template_pod({"spec": spec}, "default").requests)


def sized(cpu: str | None = None, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    wanted = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": "c", "image": "p", "resources": {"requests": wanted}, **extra}


def test_should_sum_requests_from_all_containers():
    """Helpers totalPodRequests: should sum requests from all containers"""
    got = requests_of({"containers": [sized("1", "512Mi"), sized("500m", "256Mi")]})
    assert (got["cpu"], got["memory"]) == (1500, 768 * MIB)


def test_should_take_max_of_init_containers_vs_regular_containers():
    """Helpers totalPodRequests: should take max of init containers vs regular containers"""
    got = requests_of({"initContainers": [sized("4"), sized("2")], "containers": [sized("1")]})
    assert got["cpu"] == 4000


def test_should_return_empty_list_for_pod_with_no_requests():
    """Helpers totalPodRequests: should return empty list for pod with no requests"""
    got = requests_of({"containers": [{"name": "app", "image": "p"}]})
    assert {k: v for k, v in got.items() if k != "pods"} == {}


def test_should_handle_mixed_resources_across_containers():
    """Helpers totalPodRequests: should handle mixed resources across containers"""
    got = requests_of({"containers": [sized("1"), sized(memory="1Gi")]})
    assert (got["cpu"], got["memory"]) == (1000, 1024 * MIB)


def test_should_sum_multiple_sidecar_init_containers_with_regular_containers():
    """Helpers totalPodRequests: should sum multiple sidecar init containers with regular containers"""
    sidecars = [sized("500m", restartPolicy="Always"), sized("200m", restartPolicy="Always")]
    assert requests_of({"initContainers": sidecars, "containers": [sized("1")]})["cpu"] == 1700


def test_should_handle_sidecar_after_regular_init_container():
    """Helpers totalPodRequests: should handle sidecar after regular init container"""
    inits = [sized("4"), sized("500m", restartPolicy="Always")]
    assert requests_of({"initContainers": inits, "containers": [sized("1")]})["cpu"] == 4000


def test_limits_on_a_pod_without_requests_constrain_nothing():
    """Helpers calculateLimitReplicas, through computeReplicas: should return false when pod has no resource
    requests: limits alone then give the buffer no replicas (replicas unset, limits ignored)"""
    template = pod_template("pt", container("app", "p"))
    made = cluster(template, buffer("b", podTemplateRef={"name": "pt"}, limits={"cpu": "4"}))
    reconcile(made)
    assert stored(made, "b")["status"]["replicas"] == 0


def test_a_limit_without_a_request_requests_nothing_in_a_template():
    """Not a Go It: calculateLimitReplicas reads resources.RequestsForSpec (helpers.go:33, resources.go:124-126),
    the template's requests as they are; Kubernetes defaults requests to limits on a Pod only (SetDefaults_Pod), never
    on a PodTemplate. So a limits-only template matches no buffer limit (replicas 0), and its virtual pods, which never
    pass the API server, request nothing."""
    limited = {"name": "app", "image": "p", "resources": {"limits": {"cpu": "2"}}}
    template = pod_template("pt", limited)
    made = cluster(template, buffer("b", podTemplateRef={"name": "pt"}, limits={"cpu": "4"}))
    reconcile(made)
    assert stored(made, "b")["status"]["replicas"] == 0
    [chunk] = cb.virtual_pods(ready_buffer("web", 1), template["template"])
    assert dict(chunk.requests) == {}


# helpers_test.go: SetCondition ---------------------------------------------------------------------------------------

AT = 1_800_000_000.0


def test_set_condition_should_add_a_new_condition():
    """Helpers SetCondition: should add a new condition"""
    obj: dict[str, Any] = {"metadata": {}}
    set_condition(obj, "TestCond", "True", "TestReason", "test message", AT)
    [made] = obj["status"]["conditions"]
    assert (made["type"], made["status"], made["reason"], made["message"]) == (
        "TestCond",
        "True",
        "TestReason",
        "test message",
    )
    assert made["observedGeneration"] == 0  # an object without a generation (cb.Generation is 0)


def test_set_condition_should_update_an_existing_condition():
    """Helpers SetCondition: should update an existing condition"""
    obj: dict[str, Any] = {"metadata": {}}
    set_condition(obj, "TestCond", "False", "FirstReason", "first", AT)
    set_condition(obj, "TestCond", "True", "SecondReason", "second", AT + 1)
    [made] = obj["status"]["conditions"]
    assert (made["status"], made["reason"], made["message"]) == ("True", "SecondReason", "second")


def test_set_condition_should_support_multiple_condition_types():
    """Helpers SetCondition: should support multiple condition types"""
    obj: dict[str, Any] = {"metadata": {}}
    set_condition(obj, "CondA", "True", "A", "a", AT)
    set_condition(obj, "CondB", "False", "B", "b", AT)
    assert [c["type"] for c in obj["status"]["conditions"]] == ["CondA", "CondB"]


def test_set_condition_should_set_observed_generation():
    """Helpers SetCondition: should set observed generation"""
    obj: dict[str, Any] = {"metadata": {"generation": 7}}
    set_condition(obj, "TestCond", "True", "R", "m", AT)
    assert obj["status"]["conditions"][0]["observedGeneration"] == 7


# virtualpods_test.go ------------------------------------------------------------------------------------------------
# Skipped as cache plumbing karpui has no counterpart for (it keeps no cache): "should hydrate at most once", "should
# retry hydration if the first attempt found nothing due to a list error", "should never hand a concurrent caller an
# empty cache while hydrating", "should replace previously cached entries", RemoveEntry "should be a no-op for an
# unknown entry", concurrency "should safely handle concurrent reads and writes".


def test_get_all_should_return_no_virtual_pods_when_there_are_no_buffers():
    """VirtualPodCache GetAll: should return no virtual pods when there are no buffers (hydrateCache: should return
    an empty cache when there are no buffers)"""
    assert virtual(cluster()) == []


def test_get_all_should_lazily_hydrate_from_the_cluster_on_the_first_call():
    """VirtualPodCache GetAll: should lazily hydrate from the cluster on the first call (hydrateCache: should
    populate the cache from all ready buffers in the cluster)"""
    web, api = ready_buffer("web", 3), ready_buffer("api", 2)
    made = cluster(web, api, template_for(web), template_for(api))
    assert sorted(p.name for p in virtual(made)) == [
        "capacity-buffer-api-1",
        "capacity-buffer-api-2",
        "capacity-buffer-web-1",
        "capacity-buffer-web-2",
        "capacity-buffer-web-3",
    ]


def test_update_entry_should_populate_the_cache_with_the_buffers_virtual_pods():
    """VirtualPodCache UpdateEntry: should populate the cache with the buffer's virtual pods"""
    web = ready_buffer("web", 3)
    made = cluster(web, template_for(web))
    reconcile(made)
    pods = virtual(made)
    assert [p.annotations[cb.BUFFER_NAME_ANNOTATION] for p in pods] == ["web", "web", "web"]


def test_update_entry_should_replace_an_existing_entry_when_called_again():
    """VirtualPodCache UpdateEntry: should replace an existing entry when called again"""
    web = ready_buffer("web", 3)
    made = cluster(web, template_for(web))
    assert len(virtual(made)) == 3
    stored(made, "web")["status"]["replicas"] = 1
    assert [p.name for p in virtual(made)] == ["capacity-buffer-web-1"]


def test_update_entry_should_remove_the_entry_when_the_buffer_is_no_longer_ready_for_provisioning():
    """VirtualPodCache UpdateEntry: should remove the entry when the buffer is no longer ready for provisioning"""
    web = ready_buffer("web", 3)
    made = cluster(web, template_for(web))
    assert len(virtual(made)) == 3
    stored(made, "web")["status"]["conditions"][0]["status"] = "False"
    assert virtual(made) == []


def test_update_entry_should_build_pods_for_scalable_ref_buffers():
    """VirtualPodCache UpdateEntry: should build pods for scalableRef buffers"""
    scalable = ready_scalable_buffer("scalable", 2)
    made = cluster(scalable, deployment_for(scalable))
    assert [p.name for p in virtual(made)] == ["capacity-buffer-scalable-1", "capacity-buffer-scalable-2"]


def test_remove_entry_should_remove_the_entry_for_the_given_namespace_name():
    """VirtualPodCache RemoveEntry: should remove the entry for the given namespace/name"""
    web = ready_buffer("web", 3)
    made = cluster(web, template_for(web))
    assert len(virtual(made)) == 3
    made.store.delete(cb.KIND, "web", "default")
    assert virtual(made) == []


def test_hydrate_cache_should_skip_buffers_that_are_not_ready_for_provisioning():
    """VirtualPodCache hydrateCache: should skip buffers that are not ready for provisioning"""
    ready, not_ready = ready_buffer("web", 3), ready_buffer("api", 2)
    not_ready["status"]["conditions"][0]["status"] = "False"
    made = cluster(ready, not_ready, template_for(ready), template_for(not_ready))
    assert [p.annotations[cb.BUFFER_NAME_ANNOTATION] for p in virtual(made)] == ["web", "web", "web"]


def test_hydrate_cache_should_skip_buffers_whose_pod_spec_cannot_be_resolved():
    """VirtualPodCache hydrateCache: should skip buffers whose pod spec cannot be resolved"""
    resolvable, unresolvable = ready_buffer("web", 3), ready_buffer("api", 2)
    made = cluster(resolvable, unresolvable, template_for(resolvable))
    assert len(virtual(made)) == 3


# utilities_test.go: buildVirtualPods ---------------------------------------------------------------------------------


def test_build_virtual_pods_should_create_the_correct_number_of_pods_with_expected_metadata():
    """buildVirtualPods: should create the correct number of pods with expected metadata"""
    web = ready_buffer("web", 3)
    template = {"metadata": {"labels": {"app": "web", "env": "prod"}}, "spec": {"containers": [container()]}}
    pods = cb.virtual_pods(web, template)
    assert [(p.name, p.namespace, p.uid) for p in pods] == [
        (f"capacity-buffer-web-{i}", "default", f"uid-web-{i}") for i in (1, 2, 3)
    ]
    for made in pods:
        assert made.annotations == {
            cb.FAKE_POD_ANNOTATION: "true",
            cb.BUFFER_NAME_ANNOTATION: "web",
            cb.BUFFER_NAMESPACE_ANNOTATION: "default",
        }
        assert made.labels == {"app": "web", "env": "prod"}
        assert (made.priority, made.node_name, made.unschedulable) == (-(2**31), "", True)


def test_build_virtual_pods_should_produce_deterministic_uids_across_calls():
    """buildVirtualPods: should produce deterministic UIDs across calls"""
    web = ready_buffer("web", 2)
    template = {"spec": {"containers": [{"name": "app"}]}}
    first, second = cb.virtual_pods(web, template), cb.virtual_pods(web, template)
    assert [p.uid for p in first] == [p.uid for p in second] == ["uid-web-1", "uid-web-2"]
    assert [dict(p.labels) for p in first] == [{}, {}]


def test_build_virtual_pods_should_return_nil_for_zero_replicas():
    """buildVirtualPods: should return nil for zero replicas"""
    assert cb.virtual_pods(ready_buffer("web", 0), {"spec": {"containers": [{"name": "app"}]}}) == []


def test_build_virtual_pods_should_create_pods_with_expected_metadata_for_scalable_ref_buffers():
    """buildVirtualPods with scalableRef buffer: should create pods with expected metadata for scalableRef buffers"""
    scalable = ready_scalable_buffer("scalable-app", 2)
    template = {"metadata": {"labels": {"app": "scalable"}}, "spec": {"containers": [container("app", "nginx")]}}
    pods = cb.virtual_pods(scalable, template)
    assert [p.name for p in pods] == ["capacity-buffer-scalable-app-1", "capacity-buffer-scalable-app-2"]
    assert [p.annotations[cb.BUFFER_NAME_ANNOTATION] for p in pods] == ["scalable-app"] * 2
    assert [(dict(p.labels), p.priority) for p in pods] == [({"app": "scalable"}, -(2**31))] * 2


# utilities_test.go: sanitizeVirtualPodSpec ---------------------------------------------------------------------------


def sanitized(spec: dict[str, Any]) -> dict[str, Any]:
    return cb.sanitize(spec)


def mounts(spec: dict[str, Any], section: str = "containers") -> list[str]:
    return [m["name"] for m in spec[section][0].get("volumeMounts") or []]


def test_sanitize_should_drop_pvc_volumes_and_their_mounts():
    """sanitizeVirtualPodSpec: should drop PVC volumes and their mounts"""
    spec = {
        "containers": [
            {
                "name": "app",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "config", "mountPath": "/c"}],
            }
        ],
        "initContainers": [{"name": "init", "volumeMounts": [{"name": "data", "mountPath": "/init-data"}]}],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "my-pvc"}},
            {"name": "config", "configMap": {"name": "cfg"}},
        ],
    }
    result = sanitized(spec)
    assert [v["name"] for v in result["volumes"]] == ["config"]
    assert (mounts(result), mounts(result, "initContainers")) == (["config"], [])


def test_sanitize_should_drop_ephemeral_volumes_and_their_mounts():
    """sanitizeVirtualPodSpec: should drop ephemeral volumes and their mounts"""
    spec = {
        "containers": [
            {
                "name": "app",
                "volumeMounts": [{"name": "scratch", "mountPath": "/s"}, {"name": "config", "mountPath": "/c"}],
            }
        ],
        "volumes": [
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "config", "configMap": {"name": "cfg"}},
        ],
    }
    result = sanitized(spec)
    assert ([v["name"] for v in result["volumes"]], mounts(result)) == (["config"], ["config"])


def test_sanitize_should_drop_both_pvc_and_ephemeral_volumes_together():
    """sanitizeVirtualPodSpec: should drop both PVC and ephemeral volumes together"""
    names = ("pvc-vol", "eph-vol", "secret-vol")
    spec = {
        "containers": [{"name": "app", "volumeMounts": [{"name": n, "mountPath": f"/{n}"} for n in names]}],
        "volumes": [
            {"name": "pvc-vol", "persistentVolumeClaim": {"claimName": "my-pvc"}},
            {"name": "eph-vol", "ephemeral": {"volumeClaimTemplate": {}}},
            {"name": "secret-vol", "secret": {"secretName": "s"}},
        ],
    }
    result = sanitized(spec)
    assert ([v["name"] for v in result["volumes"]], mounts(result)) == (["secret-vol"], ["secret-vol"])


def test_sanitize_should_preserve_tolerations_node_selector_and_affinity():
    """sanitizeVirtualPodSpec: should preserve tolerations, nodeSelector, and affinity"""
    toleration = {"key": "dedicated", "operator": "Equal", "value": "buffer", "effect": "NoSchedule"}
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    spec = {
        "containers": [container()],
        "tolerations": [toleration],
        "nodeSelector": {"node-type": "buffer"},
        "affinity": affinity,
    }
    result = cb.sanitize(spec)
    [made] = cb.virtual_pods(ready_buffer("web", 1), {"spec": spec})
    assert (result["tolerations"], result["nodeSelector"], result["affinity"]) == (
        [toleration],
        {"node-type": "buffer"},
        affinity,
    )
    # What the scheduler reads of them, too.
    assert dict(made.node_selector) == {"node-type": "buffer"}
    assert [t.key for t in made.tolerations] == ["dedicated"]
    assert [t.topology_key for t in made.affinity] == ["kubernetes.io/hostname"]


# utilities_test.go: listBuffersReadyForProvisioning (isBufferReadyForProvisioning) ----------------------------------


def test_ready_should_include_scalable_ref_buffers_without_status_pod_template_ref():
    """listBuffersReadyForProvisioning: should include scalableRef buffers without Status.PodTemplateRef"""
    scalable = ready_scalable_buffer("scalable", 3)
    assert "podTemplateRef" not in scalable["status"] and cb.ready(scalable)


def test_ready_should_exclude_buffers_with_neither_pod_template_ref_nor_scalable_ref():
    """listBuffersReadyForProvisioning: should exclude buffers with neither PodTemplateRef nor ScalableRef"""
    orphan = buffer("orphan", replicas=2)
    orphan["status"] = {
        "replicas": 2,
        "conditions": [{"type": cb.READY_FOR_PROVISIONING, "status": "True", "reason": "Resolved"}],
    }
    assert not cb.ready(orphan)


def test_ready_should_exclude_buffers_with_zero_replicas():
    """listBuffersReadyForProvisioning: should exclude buffers with zero replicas"""
    assert not cb.ready(ready_scalable_buffer("zero", 0))


def test_ready_should_exclude_buffers_without_ready_for_provisioning_condition():
    """listBuffersReadyForProvisioning: should exclude buffers without ReadyForProvisioning condition"""
    not_ready = ready_scalable_buffer("notready", 3)
    not_ready["status"]["conditions"][0]["status"] = "False"
    assert not cb.ready(not_ready)


def test_ready_should_include_pod_template_ref_buffers_with_status_pod_template_ref_set():
    """listBuffersReadyForProvisioning: should include podTemplateRef buffers with Status.PodTemplateRef set"""
    assert cb.ready(ready_buffer("ptref", 2))


# buffers_test.go: bufferKeyOf, IsVirtualPod --------------------------------------------------------------------------
# "should return empty string for nil pod" and "should return false for nil pod" have no Python counterpart (no nil
# pod); "should return empty string for non-virtual pod", "should return namespace/name for complete virtual pod" and
# "should return false for pod without annotations" are test_capacitybuffer.py::test_buffer_key_and_is_virtual.


def annotated(annotations: dict[str, str]) -> Any:
    return replace(cb.template_pod({"spec": {"containers": [container()]}}, "default"), annotations=annotations)


def test_buffer_key_should_return_empty_string_when_namespace_annotation_is_missing():
    """bufferKeyOf: should return empty string when namespace annotation is missing"""
    pod = annotated({cb.FAKE_POD_ANNOTATION: "true", cb.BUFFER_NAME_ANNOTATION: "my-buffer"})
    assert cb.buffer_key(pod) == ""


def test_buffer_key_should_return_empty_string_when_name_annotation_is_missing():
    """bufferKeyOf: should return empty string when name annotation is missing"""
    pod = annotated({cb.FAKE_POD_ANNOTATION: "true", cb.BUFFER_NAMESPACE_ANNOTATION: "default"})
    assert cb.buffer_key(pod) == ""


def test_is_virtual_pod_should_return_true_for_virtual_pod():
    """IsVirtualPod: should return true for virtual pod"""
    assert cb.is_virtual(annotated({cb.FAKE_POD_ANNOTATION: "true"}))


def test_is_virtual_pod_should_return_false_for_pod_with_other_annotations_only():
    """IsVirtualPod: should return false for pod with other annotations only"""
    assert not cb.is_virtual(annotated({"other": "value"}))


# buffers_test.go: classifyBufferPods, bufferPodCountsFromResults -----------------------------------------------------


def built(made: dict[str, Any]) -> list[Any]:
    return cb.virtual_pods(made, {"spec": {"containers": [{"name": "app"}]}})


def classify(result: SchedulingResult) -> tuple[dict[str, cb.Placement], dict[str, int]]:
    """classifyBufferPods and bufferPodCountsFromResults over one result: the placements, the nodes' buffer pods."""
    made = cluster()
    placed = ProvisioningController._buffers(made.ctx, result)
    return placed, dict(made.ctx.buffer_nodes)


def plan(*pods: Any) -> Any:
    return SimpleNamespace(pods=tuple(pods))


def test_classify_should_bucket_virtual_pods_by_buffer_across_existing_and_new_nodes():
    """classifyBufferPods: should bucket virtual pods by buffer namespace/name across existing and new nodes"""
    a, b = built(ready_buffer("a", 3)), built(ready_buffer("b", 2))
    result = SchedulingResult(new_nodeclaims=[plan(a[2], b[0], b[1])], placements={"existing": [a[0], a[1]]})
    placed, _ = classify(result)
    assert placed == {"default/a": cb.Placement(existing=2, new=1), "default/b": cb.Placement(new=2)}


def test_classify_should_ignore_real_pods():
    """classifyBufferPods: should ignore real pods"""
    real = annotated({})
    assert classify(SchedulingResult(placements={"existing": [real]})) == ({}, {})


def test_classify_should_distinguish_buffers_with_the_same_name_in_different_namespaces():
    """classifyBufferPods: should distinguish buffers with the same name in different namespaces"""
    a, b = built(ready_buffer("buffer", 2, "ns-a")), built(ready_buffer("buffer", 3, "ns-b"))
    result = SchedulingResult(new_nodeclaims=[plan(a[1], b[2])], placements={"existing": [a[0], b[0], b[1]]})
    placed, _ = classify(result)
    assert placed == {"ns-a/buffer": cb.Placement(existing=1, new=1), "ns-b/buffer": cb.Placement(existing=2, new=1)}


def test_classify_counts_failed_virtual_pods():
    """classifyBufferPods: a virtual pod among the PodErrors counts as failed (buffers.go classifyBufferPods)"""
    [a] = built(ready_buffer("a", 1))
    placed, _ = classify(SchedulingResult(failures={a.uid: PodFailure(a, ())}))
    assert placed == {"default/a": cb.Placement(failed=1)}


def test_buffer_pod_counts_should_count_virtual_pods_per_node_on_existing_nodes():
    """bufferPodCountsFromResults: should count virtual pods per providerID on existing nodes"""
    a, b = built(ready_buffer("a", 3)), built(ready_buffer("b", 2))
    real = annotated({})
    result = SchedulingResult(
        new_nodeclaims=[plan(a[2])], placements={"provider-a": [a[0], a[1], real], "provider-b": [b[0], b[1]]}
    )
    assert classify(result)[1] == {"provider-a": 2, "provider-b": 2}


def test_buffer_pod_counts_should_return_empty_map_for_empty_results():
    """bufferPodCountsFromResults: should return empty map for empty results"""
    assert classify(SchedulingResult())[1] == {}


def test_buffer_pod_counts_should_return_empty_map_when_only_real_pods_are_present():
    """bufferPodCountsFromResults: should return empty map when only real pods are present"""
    assert classify(SchedulingResult(placements={"provider-a": [annotated({})]}))[1] == {}


# buffers_test.go: computeProvisioningCondition is test_capacitybuffer.py::test_compute_provisioning_condition (its five
# Its); with a scalableRef buffer:


def test_compute_provisioning_condition_fits_existing_capacity_for_a_scalable_ref_buffer():
    """computeProvisioningCondition with scalableRef buffer: should return True/FitsExistingCapacity for scalableRef
    buffer when all pods fit"""
    assert cb.provisioning_condition(ready_scalable_buffer("scalable", 2), cb.Placement(existing=2)) == (
        "True",
        "FitsExistingCapacity",
        "All 2 virtual pods fit on existing capacity",
    )


def test_compute_provisioning_condition_requires_new_capacity_for_a_scalable_ref_buffer():
    """computeProvisioningCondition with scalableRef buffer: should return False/RequiresNewCapacity for scalableRef
    buffer when new nodes needed"""
    assert cb.provisioning_condition(ready_scalable_buffer("scalable", 3), cb.Placement(existing=1, new=2)) == (
        "False",
        "RequiresNewCapacity",
        "2/3 virtual pods required new capacity, 0 failed",
    )


# buffers_test.go: filterVirtualPodErrors, filterVirtualPodMapping ----------------------------------------------------
# karpui filters inline where Karpenter's MarkPodSchedulingDecisions would record them: a virtual pod gets no verdict
# (failure) and nominates no node (placement). Ported as what one provisioning pass leaves.


def test_filter_virtual_pod_errors_and_mapping_in_a_provisioning_pass():
    """filterVirtualPodErrors: should remove virtual pods from error map; filterVirtualPodMapping: should remove
    virtual pods from pod slices (only real pods get verdicts and nominate nodes)"""
    huge = pod_template("huge", container(cpu="1000"))
    made = cluster(huge, buffer("web", **template_ref("huge", 2)))
    made.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "real", "namespace": "default"},
            "spec": {"containers": [container(cpu="1000")]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
        }
    )
    made.advance(30)
    controller = made.manager.provisioning
    assert condition(stored(made, "web"), cb.PROVISIONING)[:2] == ("False", "RequiresNewCapacity")
    assert [uid for uid in controller.verdicts if uid.startswith("uid-")] == []
    assert len(controller.verdicts) == 1


def test_a_virtual_pod_that_does_not_fit_is_told_as_a_pod_is():
    """Not a Go It: Results.Record (scheduling/scheduler.go:322-333) runs over every PodError, virtual pods'
    included (only MarkPodSchedulingDecisions filters them): "could not schedule pod" and a FailedScheduling event
    naming the virtual pod, told again only when what it says changes."""
    huge = pod_template("huge", container(cpu="1000"))
    made = cluster(huge, buffer("web", **template_ref("huge", 2)))
    made.advance(120)  # several passes
    told = [t.record for t in made.ctx.logs if t.record.message == "could not schedule pod"]
    assert [r.fields["Pod"] for r in told] == [
        {"name": "capacity-buffer-web-1", "namespace": "default"},
        {"name": "capacity-buffer-web-2", "namespace": "default"},
    ]
    error = (
        'incompatible with nodepool "default", no instance type has enough resources for requests {"cpu":"1000",'
        '"pods":"1"} (daemonset overhead {}; largest compatible type capacity {"cpu":"256","ephemeral-storage":"20Gi",'
        '"memory":"2Ti","pods":"1024"})'
    )
    assert [r.fields["error"] for r in told] == [error, error]
    events = [e for e in made.store.list("Event") if e["reason"] == "FailedScheduling"]
    assert sorted(e["involvedObject"]["name"] for e in events) == ["capacity-buffer-web-1", "capacity-buffer-web-2"]
    assert [e["message"] for e in events] == [f"Failed to schedule pod, {error}"] * 2
    assert made.manager.provisioning.verdicts == {}


def test_filter_virtual_pod_mapping_drops_a_node_holding_only_virtual_pods():
    """filterVirtualPodMapping: should drop keys entirely when only virtual pods remain (a node the pass places only
    virtual pods on is nominated for nothing, so disruption other than emptiness may still take it)"""
    made = cluster(pod_template("pt", container(cpu="1")), buffer("web", **template_ref("pt", 1)))
    made.advance(60)
    assert condition(stored(made, "web"), cb.PROVISIONING)[:2] == ("True", "FitsExistingCapacity")
    assert len(made.ctx.buffer_nodes) == 1 and made.ctx.nominations == {}

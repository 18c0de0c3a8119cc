"""CapacityBuffer (Karpenter v1.14): the chunk count, the pod shape's resolution, the virtual pods and the
Provisioning condition. Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/controllers/capacitybuffer/helpers_test.go
and suite_test.go, pkg/controllers/provisioning/buffers_test.go and pkg/state/virtualpods; each test names the It (or
Entry) it follows."""

import pytest

from provisioner import capacitybuffers as cb
from provisioner.controllers.capacitybuffer import resolve_status
from provisioner.manifests.capacitybuffer import validate_capacitybuffer
from provisioner.manifests.errors import ManifestError
from provisioner.quantity import parse_resources

GI, MI = 1024**3 * 1000, 1024**2 * 1000  # in milli-units, as parse_resources gives quantities


def requests(**amounts):
    return parse_resources({k.replace("_", "-"): v for k, v in amounts.items()})


# helpers_test.go: calculateLimitReplicas -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "pod", "expected"),
    [
        ({"cpu": "4"}, {"cpu": "1"}, 4),  # should calculate replicas based on CPU limits
        ({"memory": "2Gi"}, {"memory": "512Mi"}, 4),  # should calculate replicas based on memory limits
        ({"cpu": "8", "memory": "4Gi"}, {"cpu": "1", "memory": "1Gi"}, 4),  # should take the minimum across resources
        ({"cpu": "10"}, {"cpu": "3"}, 3),  # should floor divide (no rounding up)
        ({"cpu": "1"}, {"cpu": "250m"}, 4),  # should handle millicore-level precision
        ({"cpu": "1"}, {"cpu": "2"}, 0),  # should return 0 when limit is smaller than a single pod request
        ({"cpu": "4"}, {}, None),  # should return false when pod has no resource requests
        ({"memory": "4Gi"}, {"cpu": "1"}, None),  # should return false when no limit resources match pod requests
    ],
)
def test_limit_replicas(limits, pod, expected):
    assert cb.limit_replicas(parse_resources(limits), parse_resources(pod)) == expected


def chunk(spec):
    """The requests of one chunk of a pod spec, as the buffer controller reads them."""
    return cb.template_pod({"spec": spec}, "default").requests


def container(cpu, **extra):
    return {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}, **extra}


def test_requests_sum_containers_and_take_the_init_peak():
    """should sum requests across multiple containers; should use init container max if larger than sum of
    containers; should use container sum if larger than init containers"""
    assert cb.limit_replicas({"cpu": 3000}, chunk({"containers": [container("500m"), container("500m")]})) == 3
    init_bigger = {"initContainers": [container("4")], "containers": [container("1")]}
    assert cb.limit_replicas({"cpu": 8000}, chunk(init_bigger)) == 2
    containers_bigger = {"initContainers": [container("500m")], "containers": [container("2")]}
    assert cb.limit_replicas({"cpu": 6000}, chunk(containers_bigger)) == 3


def test_sidecars_add_to_the_containers():
    """should sum sidecar init containers with regular containers; should use max of regular init container +
    preceding sidecars vs running total; should not treat init containers without restartPolicy as sidecars"""
    sidecar = container("500m", restartPolicy="Always")
    assert chunk({"initContainers": [sidecar], "containers": [container("1")]})["cpu"] == 1500
    assert chunk({"initContainers": [sidecar, container("4")], "containers": [container("1")]})["cpu"] == 4500
    assert chunk({"initContainers": [container("2")], "containers": [container("1")]})["cpu"] == 2000


# helpers_test.go: calculatePercentageReplicas ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "percentage", "expected"),
    [(10, 20, 2), (3, 10, 1), (1, 1, 1), (0, 50, 0), (10, 0, 0), (5, 100, 5), (5, 200, 10), (1000, 10, 100)],
)
def test_percentage_replicas(replicas, percentage, expected):
    """should calculate percentage and ceil ... should handle large replica counts"""
    assert cb.percentage_replicas(replicas, percentage) == expected


# suite_test.go --------------------------------------------------------------------------------------------------------

CPU_POD = {"containers": [container("1")]}
NOW = 1_800_000_000.0


def objects(*items):
    by_key = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", "default")): o for o in items}
    return lambda kind, name, namespace: by_key.get((kind, name, namespace))


def pod_template(name, spec=CPU_POD, generation=1):
    return {
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default", "generation": generation},
        "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
    }


def deployment(name, replicas=10, spec=CPU_POD):
    workload = {"template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    if replicas is not None:
        workload["replicas"] = replicas
    return {"kind": "Deployment", "metadata": {"name": name, "namespace": "default"}, "spec": workload}


def buffer(**spec):
    return {
        "apiVersion": cb.API_VERSION,
        "kind": cb.KIND,
        "metadata": {"name": "test-buffer", "namespace": "default", "uid": "u", "generation": 1},
        "spec": spec,
    }


def ready_for_provisioning(obj):
    [condition] = [c for c in obj["status"]["conditions"] if c["type"] == cb.READY_FOR_PROVISIONING]
    return condition["status"], condition["reason"], condition["message"]


def test_a_podtemplate_is_resolved():
    """should resolve a PodTemplate and set ReadyForProvisioning=True"""
    obj = buffer(podTemplateRef={"name": "test-template"}, replicas=5)
    template = resolve_status(obj, objects(pod_template("test-template", generation=3)), NOW)
    assert template["metadata"]["labels"] == {"app": "test-template"}
    assert ready_for_provisioning(obj) == ("True", "Resolved", "Pod template resolved successfully")
    assert obj["status"]["podTemplateRef"] == {"name": "test-template"}
    assert (obj["status"]["replicas"], obj["status"]["podTemplateGeneration"]) == (5, 3)
    assert obj["status"]["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    assert obj["status"]["conditions"][0]["observedGeneration"] == 1


def test_a_missing_podtemplate_is_not_ready():
    """should set ReadyForProvisioning=False when PodTemplate is not found"""
    obj = buffer(podTemplateRef={"name": "missing"}, replicas=5)
    assert resolve_status(obj, objects(), NOW) is None
    assert ready_for_provisioning(obj) == ("False", "PodTemplateNotFound", 'podtemplates "missing" not found')
    assert "replicas" not in obj["status"]


def test_a_deployment_is_resolved_with_its_percentage():
    """should resolve a Deployment and calculate percentage-based replicas"""
    obj = buffer(scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "my-deploy"}, percentage=20)
    assert resolve_status(obj, objects(deployment("my-deploy")), NOW) is not None
    assert ready_for_provisioning(obj)[:2] == ("True", "Resolved")
    assert obj["status"]["replicas"] == 2 and "podTemplateRef" not in obj["status"]


def test_a_missing_scalable_ref_is_not_ready():
    """should set ReadyForProvisioning=False when scalable ref is not found"""
    obj = buffer(scalableRef={"kind": "Deployment", "name": "nope"}, percentage=20)
    assert resolve_status(obj, objects(), NOW) is None
    assert ready_for_provisioning(obj) == ("False", "ScalableRefNotFound", 'deployments.apps "nope" not found')


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"apiGroup": "batch", "kind": "Job", "name": "my-job"}, 'unsupported scalableRef API group "batch"'),
        ({"apiGroup": "batch", "kind": "Deployment", "name": "d"}, 'unsupported scalableRef API group "batch"'),
        ({"apiGroup": "apps", "kind": "Job", "name": "my-job"}, 'unsupported kind "Job"'),
    ],
)
def test_unsupported_references_fail_resolution(ref, message):
    """should return error for unsupported kind; should return error for unsupported API group"""
    obj = buffer(scalableRef=ref, percentage=20)
    assert resolve_status(obj, objects(), NOW) is None
    assert ready_for_provisioning(obj) == ("False", "ResolutionFailed", message)


def test_a_workload_without_replicas_counts_as_one():
    """should default to 1 replica when workload has nil Spec.Replicas"""
    obj = buffer(scalableRef={"kind": "Deployment", "name": "d"}, percentage=50)
    resolve_status(obj, objects(deployment("d", replicas=None)), NOW)
    assert obj["status"]["replicas"] == 1


def test_neither_reference_is_a_resolution_failure():
    obj = buffer(replicas=1)
    assert resolve_status(obj, objects(), NOW) is None
    assert ready_for_provisioning(obj) == ("False", "ResolutionFailed", "Neither podTemplateRef nor scalableRef is set")


@pytest.mark.parametrize(
    ("backing", "spec", "expected"),
    [
        (pod_template("pt"), {"podTemplateRef": {"name": "pt"}, "replicas": 7}, 7),  # fixed replicas only
        (
            pod_template("pt"),
            {"podTemplateRef": {"name": "pt"}, "replicas": 10, "limits": {"cpu": "3"}},
            3,
        ),  # replicas capped by binding limit
        (
            pod_template("pt"),
            {"podTemplateRef": {"name": "pt"}, "replicas": 3, "limits": {"cpu": "10"}},
            3,
        ),  # non-binding limit does not reduce (podTemplateRef)
        (pod_template("pt"), {"podTemplateRef": {"name": "pt"}, "limits": {"cpu": "5"}}, 5),  # limits only
        (deployment("d"), {"scalableRef": {"kind": "Deployment", "name": "d"}, "percentage": 20}, 2),  # percentage only
        (
            deployment("d"),
            {"scalableRef": {"kind": "Deployment", "name": "d"}, "replicas": 5, "percentage": 20},
            5,
        ),  # replicas > percentage
        (
            deployment("d"),
            {"scalableRef": {"kind": "Deployment", "name": "d"}, "replicas": 5, "percentage": 80},
            8,
        ),  # percentage > replicas
        (
            deployment("d"),
            {
                "scalableRef": {"kind": "Deployment", "name": "d"},
                "replicas": 5,
                "percentage": 80,
                "limits": {"cpu": "4"},
            },
            4,
        ),  # max of replicas and percentage capped by limit
        (
            deployment("d", replicas=1),
            {"scalableRef": {"kind": "Deployment", "name": "d"}, "percentage": 10},
            1,
        ),  # percentage rounds up to a minimum of 1
    ],
)
def test_replica_calculation(backing, spec, expected):
    """should resolve buffer replicas from replicas, percentage, and limits"""
    obj = buffer(**spec)
    resolve_status(obj, objects(backing), NOW)
    assert obj["status"]["replicas"] == expected


def test_a_changed_podtemplate_is_resolved_again():
    """should re-resolve the template when its generation changes"""
    obj = buffer(podTemplateRef={"name": "pt"}, replicas=1)
    resolve_status(obj, objects(pod_template("pt", generation=1)), NOW)
    resolve_status(obj, objects(pod_template("pt", generation=2)), NOW + 1)
    assert obj["status"]["podTemplateGeneration"] == 2
    # The condition kept its transition time: its status did not change.
    assert obj["status"]["conditions"][0]["lastTransitionTime"] == "2027-01-15T08:00:00Z"


# virtualpods: BuildVirtualPods ---------------------------------------------------------------------------------------


def test_virtual_pods_are_the_template_marked_as_the_buffers():
    """BuildVirtualPods: status.replicas pods, lowest priority, no node, no persistent volumes"""
    spec = {
        "nodeName": "somewhere",
        "containers": [{**container("1"), "volumeMounts": [{"name": "data", "mountPath": "/d"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "tmp", "emptyDir": {}}],
    }
    obj = buffer(podTemplateRef={"name": "pt"}, replicas=2)
    obj["status"] = {"replicas": 2}
    pods = cb.virtual_pods(obj, {"metadata": {"labels": {"app": "x"}}, "spec": spec}, NOW)
    assert [p.name for p in pods] == ["capacity-buffer-test-buffer-1", "capacity-buffer-test-buffer-2"]
    assert [p.uid for p in pods] == ["u-1", "u-2"]
    first = pods[0]
    assert (first.priority, first.node_name, first.unschedulable, first.labels) == (-(2**31), "", True, {"app": "x"})
    assert first.annotations == {
        "karpenter.sh/capacity-buffer-fake-pod": "true",
        "karpenter.sh/capacity-buffer-name": "test-buffer",
        "karpenter.sh/capacity-buffer-namespace": "default",
    }
    assert first.requests["cpu"] == 1000 and first.created == NOW
    assert first.is_provisionable()


# buffers_test.go -----------------------------------------------------------------------------------------------------


def test_buffer_key_and_is_virtual():
    """bufferKeyOf / IsVirtualPod"""
    obj = buffer(replicas=1)
    obj["status"] = {"replicas": 1}
    [virtual] = cb.virtual_pods(obj, {"spec": CPU_POD})
    assert cb.is_virtual(virtual) and cb.buffer_key(virtual) == "default/test-buffer"
    real = cb.template_pod({"spec": CPU_POD}, "default")
    assert not cb.is_virtual(real) and cb.buffer_key(real) == ""


def status_buffer(ready=True, replicas=3):
    obj = buffer(podTemplateRef={"name": "pt"}, replicas=replicas)
    obj["status"] = {
        "replicas": replicas,
        "conditions": [{"type": "ReadyForProvisioning", "status": "True" if ready else "False"}],
    }
    return obj


def test_compute_provisioning_condition():
    """computeProvisioningCondition: should return True/FitsExistingCapacity when all pods fit; False/
    RequiresNewCapacity when new nodes are needed; False/NotReadyForProvisioning when buffer is not ready; False/
    BufferEmpty when replicas is zero; nil when ready but no results observed"""
    assert cb.provisioning_condition(status_buffer(), cb.Placement(existing=3)) == (
        "True",
        "FitsExistingCapacity",
        "All 3 virtual pods fit on existing capacity",
    )
    assert cb.provisioning_condition(status_buffer(), cb.Placement(existing=1, new=2)) == (
        "False",
        "RequiresNewCapacity",
        "2/3 virtual pods required new capacity, 0 failed",
    )
    assert cb.provisioning_condition(status_buffer(ready=False), None) == (
        "False",
        "NotReadyForProvisioning",
        "Buffer is not ReadyForProvisioning",
    )
    assert cb.provisioning_condition(status_buffer(replicas=0), None) == (
        "False",
        "BufferEmpty",
        "Buffer has zero desired replicas",
    )
    assert cb.provisioning_condition(status_buffer(), None) is None


# The CRD's validation (autoscaling.x-k8s.io_capacitybuffers.yaml, pkg/apis/autoscaling/v1beta1/suite_test.go) --------


@pytest.mark.parametrize(
    "spec",
    [
        {"podTemplateRef": {"name": "pt"}, "replicas": 3},  # should accept ... podTemplateRef and replicas
        {"podTemplateRef": {"name": "pt"}, "limits": {"cpu": "4"}},  # ... podTemplateRef and limits
        {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "d"}, "percentage": 20},  # ... scalableRef
    ],
)
def test_valid_buffers_are_accepted(spec):
    validate_capacitybuffer(buffer(**spec))


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"podTemplateRef": {"name": "pt"}}, "spec", "If podTemplateRef is set, replicas or limits must also be set"),
        (
            {"podTemplateRef": {"name": "pt"}, "replicas": 1, "scalableRef": {"kind": "Deployment", "name": "d"}},
            "spec",
            "You must define either PodTemplateRef or ScalableRef, but not both",
        ),
        ({"scalableRef": {"kind": "Deployment", "name": "d"}, "replicas": -1}, "spec.replicas", "must be greater"),
        ({"scalableRef": {"kind": "Deployment", "name": "d"}, "percentage": -5}, "spec.percentage", "must be greater"),
        ({"scalableRef": {"kind": "", "name": "d"}}, "spec.scalableRef.kind", "should be at least 1 chars long"),
        ({"podTemplateRef": {}, "replicas": 1}, "spec.podTemplateRef.name", "Required value"),
        ({"scalableRef": {"kind": "Deployment", "name": "d"}, "surplus": 1}, "spec.surplus", ""),
    ],
)
def test_invalid_buffers_are_refused_naming_the_field(spec, field, message):
    with pytest.raises(ManifestError) as refused:
        validate_capacitybuffer(buffer(**spec))
    assert refused.value.field == field and message in refused.value.message

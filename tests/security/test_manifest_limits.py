"""Manifests cannot hurt: the loader bounds what a small text can make, and validation refuses what the API server
would, naming the field. Pure: no database (tests/security/test_bad_input.py runs the same inputs end to end)."""

import json
import tracemalloc

import pytest

from provisioner.catalog.files import load_catalog
from provisioner.durations import MAX_SECONDS, DurationError, parse_duration
from provisioner.manifests import ManifestError, load_documents
from provisioner.manifests.cluster import MAX_PODS_PER_APPLY, check_pods_per_apply, validate_cluster_object
from provisioner.manifests.documents import MAX_ALIAS_NODES, MAX_OBJECT_BYTES, decode
from provisioner.manifests.errors import MAX_MESSAGE
from provisioner.manifests.kubernetes import KINDS
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.quantity import MAX_MILLI, QuantityError, parse_quantity
from tests.security import kubernetes_types


def billion_laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nstatus:\n" + "\n".join(f"  {line}" for line in lines)


def test_a_billion_laughs_is_refused_before_it_expands():
    tracemalloc.start()
    with pytest.raises(ManifestError) as raised:
        load_documents(billion_laughs(8))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert str(raised.value) == (
        f"error: status.a4: line 9, column 12: YAML aliases expand to more than {MAX_ALIAS_NODES} nodes"
    )
    assert peak < 5 * 2**20  # refused at a4, long before the 9**8 nodes a8 would make


def test_a_few_aliases_sharing_labels_are_accepted_as_kubectl_does():
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: &labels {app: web, tier: front}\n"
        "spec:\n  nodeSelector: *labels\n  containers: [{name: c, image: x}]\n"
    )
    [document] = load_documents(text)
    assert document.body["spec"]["nodeSelector"] == {"app": "web", "tier": "front"}
    assert document.body["spec"]["nodeSelector"] is not document.body["metadata"]["labels"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a: &a [*a]\n", "error: a: line 1, column 8: alias *a refers to a node that holds it"),
        ("x: " + "[" * 150 + "]" * 150 + "\n", "error: line 1, column 103: nested deeper than 100 levels"),
        ("kind: A\nkind: B\n", 'error: kind: duplicate field "kind" at line 2 (first at line 1)'),
        (
            "metadata:\n  labels: {a: b}\n  labels: {c: d}\n",
            'error: metadata.labels: duplicate field "labels" at line 3 (first at line 2)',
        ),
        ("spec: {replicas: .nan}\n", "error: spec.replicas: must be a finite number, got .nan"),
        ("spec: {replicas: 1.0e+400}\n", "error: spec.replicas: must be a finite number, got 1.0e+400"),
        (
            "spec: {priority: 1208925819614629174706176}\n",
            "error: spec.priority: integer 1208925819614629174706176 is out of range (int64)",
        ),
        ('metadata: {name: "a\\0b"}\n', "error: metadata.name: NUL characters and lone surrogates are not allowed"),
        ("data: !!binary aGVsbG8=\n", "error: data: unsupported YAML tag tag:yaml.org,2002:binary"),
        ("data: !!set {a, b}\n", "error: data: unsupported YAML tag tag:yaml.org,2002:set"),
    ],
)
def test_yaml_that_json_cannot_hold_is_refused_naming_the_field(text, error):
    with pytest.raises(ManifestError) as raised:
        load_documents(text)
    assert str(raised.value) == error


def test_timestamps_stay_strings_as_in_json():
    [document] = load_documents("apiVersion: v1\nkind: Pod\nmetadata: {creationTimestamp: 2026-01-02T03:04:05Z}\n")
    assert document.body["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"


def test_an_object_over_one_and_a_half_mebibytes_is_refused():
    body = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "x" * MAX_OBJECT_BYTES}}
    with pytest.raises(ManifestError) as raised:
        load_documents(json.dumps(body))
    size = len(json.dumps(body, separators=(",", ":")))
    assert str(raised.value) == (
        f"error: document 1: the object is {size} bytes encoded, over the API server's limit of "
        f"{MAX_OBJECT_BYTES} (1.5 MiB)"
    )


def test_an_error_echoes_at_most_a_bounded_part_of_the_input():
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {" + "x" * 3_000_000 + ": 1}\n"
    with pytest.raises(ManifestError) as raised:
        validate_cluster_object(load_documents(text)[0].body)
    assert len(str(raised.value)) < MAX_MESSAGE + 500


def test_text_that_is_not_utf8_is_refused_naming_where_it_came_from():
    with pytest.raises(ManifestError) as raised:
        decode(b"kind: \xff\xfe", "pods.yaml")
    assert str(raised.value) == "error: pods.yaml: not UTF-8 text (byte 0xff at offset 6)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e30", "quantity '1e30' is too large: at most 9223372036854775807m (an int64 of milli-units)"),
        (
            "1" * 40 + "Ei",
            "quantity '" + "1" * 40 + "Ei' is too large: at most 9223372036854775807m (an int64 of milli-units)",
        ),
        ("9Pi", "quantity '9Pi' is too large: at most 9223372036854775807m (an int64 of milli-units)"),
        ("0." + "0" * 80 + "1", "quantity '0." + "0" * 62 + "…' has more than 64 digits"),
    ],
)
def test_quantities_are_capped_at_an_int64_of_milli_units(text, message):
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text)
    assert str(raised.value) == message


def test_the_largest_quantity_is_accepted():
    assert parse_quantity(f"{MAX_MILLI}m") == MAX_MILLI


def pod(**spec_changes):
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}
    spec = {"containers": [container], **spec_changes}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def refused(doc):
    with pytest.raises(ManifestError) as raised:
        validate_cluster_object(doc)
    return raised.value.field, raised.value.message


def test_negative_requests_and_limits_are_refused():
    doc = pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "-1"}, "limits": {"memory": "-1Gi"}}}])
    assert refused(doc) == ("spec.containers[0].resources.requests.cpu", "must be greater than or equal to 0, got -1")


@pytest.mark.parametrize(
    ("port", "field", "message"),
    [
        ({"containerPort": 80, "hostPort": 70000}, "hostPort", "must be less than or equal to 65535, got 70000"),
        ({"containerPort": 80, "hostPort": -1}, "hostPort", "must be greater than or equal to 0, got -1"),
        ({"containerPort": 0}, "containerPort", "must be greater than or equal to 1, got 0"),
        ({"containerPort": "80"}, "containerPort", "expected an integer, got string"),
        (
            {"containerPort": 80, "protocol": "HTTP"},
            "protocol",
            'Unsupported value: "HTTP": supported values: TCP, UDP, SCTP',
        ),
    ],
)
def test_ports_are_checked_as_the_api_server_does(port, field, message):
    doc = pod(containers=[{"name": "c", "ports": [port]}])
    assert refused(doc) == (f"spec.containers[0].ports[0].{field}", message)


def test_a_priority_beyond_int32_is_refused():
    assert refused(pod(priority=2**80)) == ("spec.priority", f"must be less than or equal to {2**31 - 1}, got {2**80}")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"spec": {"containers": [{"name": "c", "imagePullPolicyy": "Always"}]}},
            "spec.containers[0].imagePullPolicyy",
        ),
        ({"spec": {"containers": [{"name": "c"}], "nodeSelectorr": {}}}, "spec.nodeSelectorr"),
        (
            {"spec": {"containers": [{"name": "c", "securityContext": {"privilegedd": True}}]}},
            "spec.containers[0].securityContext.privilegedd",
        ),
        ({"status": {"phasee": "Running"}}, "status.phasee"),
    ],
)
def test_unknown_fields_anywhere_in_a_pod_are_refused(change, field):
    assert refused({**pod(), **change}) == (field, f'unknown field "{field.rsplit(".", 1)[-1]}"')


def test_every_real_pod_field_is_accepted():
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "nginx",
                "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP", "name": "http"}],
                "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10},
                "resources": {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                "securityContext": {"runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }
        ],
        "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
        "terminationGracePeriodSeconds": 30,
        "priorityClassName": "high",
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        "serviceAccountName": "default",
    }
    validate_cluster_object({**pod(), "spec": spec})


@pytest.mark.parametrize(
    ("meta", "field", "message"),
    [
        ({"name": "p", "namespace": "Not_A_Namespace"}, "metadata.namespace", "invalid namespace 'Not_A_Namespace'"),
        ({"name": "p", "namespace": "n" * 64}, "metadata.namespace", "invalid namespace"),
        ({"name": "p", "labels": {"k" * 64: "v"}}, f"metadata.labels.{'k' * 64}", "invalid key 'kkk"),
        ({"name": "p", "labels": {"k": "v" * 64}}, "metadata.labels.k", "invalid label value"),
        (
            {"name": "p", "annotations": {"a": "x" * 300_000}},
            "metadata.annotations",
            "Too long: must have at most 262144 bytes, got 300001",
        ),
        ({"name": "p" * 254}, "metadata.name", "must be no more than 253 characters, got 254"),
    ],
)
def test_metadata_past_kubernetes_limits_is_refused(meta, field, message):
    got_field, got_message = refused({**pod(), "metadata": meta})
    assert got_field == field
    assert got_message.startswith(message)


def deployment(replicas):
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": "a"}}, "template": template}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec}


def test_replicas_are_capped_per_workload_and_per_apply():
    assert refused(deployment(1_000_000)) == ("spec.replicas", "must be less than or equal to 5000, got 1000000")
    validate_cluster_object(deployment(5000))
    with pytest.raises(ManifestError) as raised:
        check_pods_per_apply([deployment(5000)] * 4 + [pod()])
    assert raised.value.message == (
        f"the manifests ask for 20001 pods (Pods plus replicas); one apply may ask for at most {MAX_PODS_PER_APPLY}"
    )


NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [],
            }
        }
    },
}


def nodepool(annotations=None, ref=None, limits=None, kind="NodePool"):
    doc = json.loads(json.dumps(NODEPOOL))
    doc["kind"] = kind
    if annotations:
        doc["metadata"]["annotations"] = annotations
    if ref:
        doc["spec"]["template"]["spec"]["nodeClassRef"] = ref
    if limits:
        doc["spec"]["limits"] = limits
    return doc


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        (nodepool(kind="Pod"), "kind", 'expected kind NodePool, got "Pod"'),
        (nodepool(limits={"cpu": "-1"}), "spec.limits.cpu", "must be greater than or equal to 0, got -1"),
        (
            nodepool(ref={"group": "example.com", "kind": "FooNodeClass", "name": "x"}),
            "spec.template.spec.nodeClassRef.kind",
            'Unsupported value: "FooNodeClass": supported values: EC2NodeClass, KWOKNodeClass',
        ),
        (
            nodepool(ref={"group": "karpenter.k8s.aws", "kind": "KWOKNodeClass", "name": "x"}),
            "spec.template.spec.nodeClassRef.group",
            'Unsupported value: "karpenter.k8s.aws": KWOKNodeClass is served by karpenter.kwok.sh',
        ),
        (
            nodepool({"karpui.dev/approval-mode": "yolo"}),
            "metadata.annotations.karpui.dev/approval-mode",
            'Unsupported value: "yolo": supported values: auto, manual, auto-below, dry-run',
        ),
        (
            nodepool({"karpui.dev/approval-mode": "auto-below", "karpui.dev/approval-threshold": "lots"}),
            "metadata.annotations.karpui.dev/approval-threshold",
            'invalid value "lots": a non-negative number of dollars per hour, like 0.25',
        ),
        (
            nodepool({"karpui.dev/approval-mode": "auto-below"}),
            "metadata.annotations.karpui.dev/approval-threshold",
            "Required value: auto-below approves commands saving up to this many $/h",
        ),
    ],
)
def test_nodepool_values_with_a_known_meaning_are_checked_at_apply(doc, field, message):
    with pytest.raises(ManifestError) as raised:
        parse_nodepool(doc)
    assert (raised.value.field, raised.value.message) == (field, message)


def test_a_valid_approval_threshold_is_kept():
    pool = parse_nodepool(
        nodepool({"karpui.dev/approval-mode": "auto-below", "karpui.dev/approval-threshold": "0.2500"})
    )
    assert pool.annotations["karpui.dev/approval-threshold"] == "0.2500"


CATALOG = """\
apiVersion: karpui.dev/v1alpha1
kind: InstanceCatalog
metadata: {name: mine}
spec:
  instanceTypes:
  - name: small
    labels: {kubernetes.io/arch: amd64}
    capacity: {cpu: "2", memory: 4Gi, pods: "10"}
    offerings: [{zone: z1, capacityType: on-demand, price: 0.1}]
"""


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (("name: mine", "name: a.b"), "metadata.name", "invalid catalog name 'a.b'"),
        (("- name: small", f"- name: {'s' * 64}"), "spec.instanceTypes[0].name", "must be no more than 63"),
        (("zone: z1", f"zone: {'z' * 64}"), "spec.instanceTypes[0].offerings[0].zone", "invalid label value"),
        (("arch: amd64", f"arch: {'a' * 33}"), "spec.instanceTypes[0].labels.kubernetes.io/arch", "must be no more"),
        (('cpu: "2"', "cpu: 1e30"), "spec.instanceTypes[0].capacity.cpu", "quantity '1e30' is too large"),
        (('pods: "10"', 'pods: "3000000000"'), "spec.instanceTypes[0].capacity.pods", "must be no more than"),
        (
            ("price: 0.1}]", "price: 0.1}, {zone: z1, capacityType: on-demand, price: 0.2}]"),
            "spec.instanceTypes[0].offerings[1]",
            "duplicate offering for zone 'z1' and capacity type 'on-demand'",
        ),
        (
            ("price: 0.1}]", "price: 0.1}]\n    devices: [{driver: gpu.example.com}]"),
            "spec.instanceTypes[0].devices[0].devices",
            "at least one device is required",
        ),
    ],
)
def test_catalog_values_that_would_not_fit_or_work_are_refused(change, field, message):
    with pytest.raises(ManifestError) as raised:
        load_catalog(CATALOG.replace(*change))
    assert raised.value.field == field
    assert raised.value.message.startswith(message)


def test_a_catalog_device_group_gets_its_pool_filled_in():
    catalog = load_catalog(
        CATALOG.replace("price: 0.1}]", "price: 0.1}]\n    devices: [{driver: gpu.example.com, devices: [{name: g0}]}]")
    )
    assert catalog.instance_types[0].devices == (
        {"driver": "gpu.example.com", "pool": "small-pool", "devices": [{"name": "g0"}]},
    )


def test_the_committed_field_lists_match_the_kubernetes_client():
    committed = json.loads(kubernetes_types.OUTPUT.read_text())
    assert committed == json.loads(kubernetes_types.render()), "run: python -m tests.security.kubernetes_types"
    assert sorted(KINDS) == sorted(kubernetes_types.ROOTS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2562048h", "invalid duration '2562048h': longer than 2562047h47m16s, Go's largest"),
        ("9" * 80 + "s", "invalid duration '" + "9" * 64 + "'…: expected a sequence like 720h, 1h30m or 10s"),
    ],
)
def test_durations_stop_at_gos_largest(text, message):
    with pytest.raises(DurationError) as raised:
        parse_duration(text)
    assert str(raised.value) == message
    assert parse_duration("2562047h47m16s") == MAX_SECONDS

"""Pending verdicts a platform engineer can trust: what blocks the pod first (the scheduler's own reason on the node
it must use), the NodePools the pod's own selector leaves out folded into one line, links to the pod, its owner and
its events, quantities in Kubernetes form, and a CEL error named."""

from __future__ import annotations

import pytest

from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok
from tests.lab_manifests import ON_DEMAND, deployment, documents, nodepool

NODES = (EXAMPLES / "static-nodes" / "nodes.yaml").read_text()
SPOT = (("karpenter.sh/capacity-type", ("spot",)),)
GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
# No disruption block (Karpenter's defaults), as the walk's NodePools have always been written.
POOLS = documents(
    nodepool(requirements=ON_DEMAND, limits={"cpu": "0"}, consolidation_policy=None, consolidate_after=None),
    nodepool(
        "batch-spot",
        requirements=SPOT,
        limits={"cpu": "0"},
        consolidation_policy=None,
        consolidate_after=None,
        node_class=False,
    ),
    nodepool(
        "gpu",
        requirements=ON_DEMAND,
        taints=[GPU_TAINT],
        consolidation_policy=None,
        consolidate_after=None,
        node_class=False,
    ),
)
PINNED = """\
apiVersion: v1
kind: Pod
metadata: {name: pinned}
spec:
  nodeSelector: {kubernetes.io/hostname: kind-worker}
  containers: [{name: app, image: pause, resources: {requests: {cpu: "5"}}}]
"""
HUGE = """\
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  nodeSelector: {karpenter.sh/nodepool: gpu}
  containers: [{name: app, image: pause, resources: {requests: {cpu: "1000", memory: 2Gi}}}]
"""
WORKLOADS = documents(PINNED, deployment("batch", 2, nodepool="batch-spot", grace_period=None), HUGE)


@pytest.fixture
def walk(lab, tmp_path):
    """kind's three nodes with their hostname labels, three NodePools (two capped at 0 CPU, one tainted) and pods
    pinned to a full node, selecting one NodePool, and too large for any instance type."""
    files = []
    for name, text in (("nodes", NODES), ("pools", POOLS), ("workloads", WORKLOADS)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        files += ["-f", str(path)]
    ok("apply", *files)
    for node in ("kind-worker", "kind-worker2"):  # as kind's kubelets label them
        ok("label", "node", node, f"kubernetes.io/hostname={node}", "--overwrite")
    ok("advance", "15s")
    return logged_in(user())


def verdicts(client, name):
    [pod] = [p for p in client.get("/pods/pending/", {"group": "none"}).context["pods"] if p["name"] == name]
    return [(v["label"], v["kind"], v["message"], v["fix"]) for v in pod["verdicts"]]


def test_a_pod_pinned_to_a_full_node_is_told_the_scheduler_reason_on_that_node_first(walk):
    assert verdicts(walk, "pinned") == [
        (
            "node kind-worker",
            "scheduler",
            "Insufficient cpu on kind-worker (cpu: the pod requests 5; the node has 4 allocatable, 0 requested)",
            "free cpu on kind-worker, or lower the pod's requests: it may run only there",
        ),
        (
            "all",
            "validation",
            'label "kubernetes.io/hostname" is restricted; pods cannot be scheduled to a specific new node',
            "Karpenter launches no node for a pod pinned to one node (kubernetes.io/hostname); make room on that node",
        ),
    ]


def test_nodepools_the_pods_own_selector_leaves_out_are_one_line_after_the_one_it_selects(walk):
    listing = walk.get("/pods/pending/", {"group": "none", "owner": "Deployment/default/batch"}).context["pods"]
    assert len(listing) == 2
    said = [(v["label"], v["kind"], v["message"], v["fix"]) for v in listing[0]["verdicts"]]
    assert said == [
        (
            "batch-spot",
            "limits",
            "all available instance types exceed limits for nodepool (remaining cpu=0)",
            "raise the NodePool's spec.limits, or free capacity in it",
        ),
        (
            "2 others",
            "not-selected",
            "default, gpu: not selected by the pod's karpenter.sh/nodepool In [batch-spot]",
            "",
        ),
    ]


def test_quantities_read_in_kubernetes_form_not_json(walk):
    [(label, kind, message, _)] = [v for v in verdicts(walk, "huge") if v[1] != "not-selected"]
    assert (label, kind) == ("gpu", "resources")
    assert message.startswith("no instance type has enough resources for requests cpu 1000, memory 2Gi, pods 1 (")
    assert '{"' not in message and '"cpu"' not in message


def test_pod_owner_and_events_are_links(walk):
    body = walk.get("/pods/pending/", {"group": "none"}).content.decode()
    assert '<a href="/objects/Pod/default/pinned/">default/pinned</a>' in body
    assert '<a href="/objects/Deployment/default/batch/">Deployment batch</a>' in body
    assert '<a href="/events/?kind=Pod&amp;q=pinned" class="muted">events</a>' in body
    grouped = walk.get("/pods/pending/").content.decode()
    assert '<a href="/objects/Deployment/default/batch/">Deployment <b>default/batch</b></a>' in grouped
    assert '<a href="/objects/Pod/default/pinned/">default/pinned</a>' in grouped


def test_a_cel_division_by_zero_is_named_in_the_pending_reason(lab, tmp_path):
    gpu = (EXAMPLES / "dra" / "gpu.yaml").read_text()
    broken = gpu.replace(
        'expression: device.driver == "gpu.example.com"',
        'expression: device.driver == "gpu.example.com" && size(device.attributes["gpu.example.com"].model) / 0 == 1',
    )
    path = tmp_path / "gpu.yaml"
    path.write_text(broken)
    ok("apply", "-f", str(path))
    ok("advance", "5s")
    client = logged_in(user())
    pods = client.get("/pods/pending/", {"group": "none"}).context["pods"]
    assert len(pods) == 2
    [verdict] = pods[0]["verdicts"]
    assert verdict["kind"] == "devices"
    claim = verdict["message"].split('of claim "')[1].split('"')[0]
    assert verdict["message"] == (
        f'no instance type declares devices for request "gpu" of claim "{claim}" (DeviceClass gpu.example.com); '
        f'on m-1x-amd64-linux: cannot allocate request "gpu" of claim "{claim}" (DeviceClass gpu.example.com): '
        '0 matching device(s) free, 1 needed; device "gpu-0": CEL runtime error: division by zero in CEL expression'
    )

"""CapacityBuffers in the lab through karp (Karpenter v1.14, gate CapacityBuffer): ported from Karpenter's regression
suite (test/suites/regression/capacitybuffer_test.go) with its NodePool of c-2x kwok types and 1-CPU chunks, so
each chunk takes a node of its own; and from disruption/emptiness_test.go's buffer cases."""

import json
import re

import pytest

from karpui.settings import feature_gates
from tests.karp import karp, ok, table
from tests.lab_manifests import ON_DEMAND_AMD64, deployment, documents, nodepool

POOL = nodepool(
    requirements=(*ON_DEMAND_AMD64, ("node.kubernetes.io/instance-type", ("c-2x-amd64-linux",))),
    consolidate_after="0s",
)
TEMPLATE = """
apiVersion: v1
kind: PodTemplate
metadata: {name: buffer-template}
template:
  spec:
    containers:
      - name: pause
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: "1", memory: 512Mi}}
"""


def template_buffer(replicas):
    return f"""
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {{name: buffer}}
spec:
  provisioningStrategy: buffer.x-k8s.io/active-capacity
  podTemplateRef: {{name: buffer-template}}
  replicas: {replicas}
"""


SCALABLE = """
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: buffer}
spec:
  scalableRef: {apiGroup: apps, kind: Deployment, name: scalable-app}
  percentage: 20
"""


@pytest.fixture
def gate_on(lab, settings):
    settings.KARPUI_FEATURE_GATES = feature_gates("CapacityBuffer=true")
    ok("apply", "-f", "-", stdin=POOL)


def buffer_status():
    return json.loads(ok("get", "capacitybuffer", "buffer", "-o", "json")).get("status") or {}


def conditions():
    return {c["type"]: (c["status"], c["reason"]) for c in buffer_status().get("conditions") or []}


def nodeclaims():
    return len(table("get", "nodeclaims"))


def test_a_podtemplate_buffer_provisions_a_node_per_chunk(gate_on):
    """should provision capacity when a buffer with podTemplateRef is applied"""
    ok("apply", "-f", "-", stdin=documents(TEMPLATE, template_buffer(3)))
    ok("advance", "1m")
    assert buffer_status()["replicas"] == 3 and nodeclaims() == 3
    assert conditions() == {
        "ReadyForProvisioning": ("True", "Resolved"),
        "Provisioning": ("True", "FitsExistingCapacity"),
    }
    [row] = table("get", "cb")
    assert {k: v for k, v in row.items() if k != "AGE"} == {
        "NAME": "buffer",
        "STRATEGY": "buffer.x-k8s.io/active-capacity",
        "PODTEMPLATE": "buffer-template",
        "REPLICAS": "3",
        "CONDITIONSTYPE": "ReadyForProvisioning,Provisioning",
        "CONDITIONSSTATUS": "True,True",
        "CONDITIONSREASON": "Resolved,FitsExistingCapacity",
    }
    assert table("get", "pods") == []  # virtual pods exist nowhere


def test_a_changed_podtemplate_is_read_again(gate_on):
    """should update buffer status when PodTemplate is updated"""
    ok("apply", "-f", "-", stdin=documents(TEMPLATE, template_buffer(2)))
    ok("advance", "10s")
    generation = buffer_status()["podTemplateGeneration"]
    ok("apply", "-f", "-", stdin=TEMPLATE.replace('cpu: "1"', 'cpu: "2"'))
    ok("advance", "10s")
    assert buffer_status()["podTemplateGeneration"] == generation + 1


def test_a_scalable_ref_buffer_keeps_a_percentage_of_the_workload(gate_on):
    """should provision buffer capacity using scalableRef with percentage"""
    ok("apply", "-f", "-", stdin=deployment("scalable-app", 10, "500m", memory="256Mi"))
    ok("advance", "1m")
    before = nodeclaims()
    ok("apply", "-f", "-", stdin=SCALABLE)
    ok("advance", "1m")
    assert buffer_status()["replicas"] == 2  # 20% of 10
    # Ten 500m pods take four c-2x (three, three, three and one): the last one's room holds both chunks.
    assert conditions()["Provisioning"] == ("True", "FitsExistingCapacity")
    assert (before, nodeclaims()) == (4, 4)


def test_a_buffer_waits_for_its_workload(gate_on):
    """should recover when scalable ref is created after buffer"""
    ok("apply", "-f", "-", stdin=SCALABLE.replace("percentage: 20", "replicas: 2"))
    ok("advance", "10s")
    assert table("get", "cb")[0]["STRATEGY"] == "buffer.x-k8s.io/active-capacity"  # the CRD's default
    assert conditions()["ReadyForProvisioning"] == ("False", "ScalableRefNotFound")
    assert nodeclaims() == 0
    ok("apply", "-f", "-", stdin=deployment("scalable-app", 10, "500m", memory="256Mi"))
    ok("advance", "1m")
    assert buffer_status()["replicas"] == 2 and conditions()["ReadyForProvisioning"] == ("True", "Resolved")


def test_a_consumer_takes_the_buffer_and_the_buffer_refills(gate_on):
    """should allow consumer pods to use existing buffer capacity and then refill"""
    ok("apply", "-f", "-", stdin=documents(TEMPLATE, template_buffer(2)))
    ok("advance", "1m")
    assert nodeclaims() == 2
    ok("apply", "-f", "-", stdin=deployment("consumer", 1, "1", memory="512Mi"))
    ok("advance", "2s")
    [consumer] = table("get", "pods")
    assert consumer["STATUS"] == "Running"  # at once, on the buffer's capacity
    ok("advance", "1m")
    assert nodeclaims() == 3
    assert conditions()["Provisioning"] == ("True", "FitsExistingCapacity")


def test_buffer_nodes_are_not_empty(gate_on):
    """emptiness_test.go: should not disrupt a node that hosts virtual buffer pods; should disrupt a node once
    buffer pods are cleared"""
    ok("apply", "-f", "-", stdin=documents(TEMPLATE, template_buffer(2)))
    ok("advance", "5m")
    assert nodeclaims() == 2
    assert [c["PHASE"] for c in table("get", "disruptioncommands") if c["PHASE"] == "Succeeded"] == []
    ok("delete", "capacitybuffer", "buffer")
    ok("advance", "2m")
    assert nodeclaims() == 0


def test_the_gate_is_off_by_default(lab):
    """FEATURE_GATES CapacityBuffer=false: a buffer is stored but nothing resolves or provisions it"""
    ok("apply", "-f", "-", stdin=documents(POOL, TEMPLATE, template_buffer(2)))
    ok("advance", "1m")
    assert buffer_status() == {} and nodeclaims() == 0


def test_a_bad_buffer_is_refused_naming_the_field(lab):
    code, _, err = karp("apply", "-f", "-", stdin=template_buffer(2).replace("  replicas: 2\n", ""))
    assert code == 1 and "spec: If podTemplateRef is set, replicas or limits must also be set" in err
    assert table("get", "cb") == []


def test_the_pending_view_shows_each_buffer_and_the_nodes_it_holds(gate_on):
    """Visible: a capacity buffer's virtual pods on the pending view"""
    from tests.integration.test_dashboard import logged_in, user

    ok("apply", "-f", "-", stdin=documents(TEMPLATE, template_buffer(2)))
    ok("advance", "1m")
    page = logged_in(user()).get("/pods/pending/").content.decode()
    row = re.search(r'<tr id="buffer-default-buffer">(.*?)</tr>', page, re.S).group(1)
    cells = [re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
    assert cells == [
        ["default/buffer"],
        ["PodTemplate", "buffer-template"],
        ["2"],
        ["cpu", "1,", "memory", "512Mi"],
        ["True", "Resolved", "Pod", "template", "resolved", "successfully"],
        ["FitsExistingCapacity", "All", "2", "virtual", "pods", "fit", "on", "existing", "capacity"],
    ]
    holding = re.search(r'<p id="buffer-nodes">(.*?)</p>', page, re.S).group(1)
    assert holding.count("(1 virtual pod)") == 2

"""A karpenter.sh/v1beta1 nodeClassRef that names no kind, in a lab that serves both node class kinds: the node class
of that name that exists, by one rule (provisioner.nodeclasses), which the NodePool's condition and an Event state;
and a NodePool whose node class does not exist is never Ready."""

import json

from karpui import models
from tests.karp import EXAMPLES, karp, ok, rows, table, workload_objects

KWOK_CLASS = "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: default}\n"
EC2_CLASS = (
    "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: default}\n"
    'spec: {amiFamily: AL2, role: "KarpenterNodeRole-lab"}\n'
)
KINDLESS = """\
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements:
%s"""
AMD64 = "        - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n"
CATEGORY = "        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}\n"
FAMILY = "        - {key: karpenter.kwok.sh/instance-family, operator: In, values: [c, m]}\n"


def nodepool() -> dict:
    return json.loads(ok("get", "nodepool", "default", "-o", "json"))


def node_class_ref() -> dict:
    return nodepool()["spec"]["template"]["spec"]["nodeClassRef"]


def condition(kind: str) -> dict:
    """The NodePool's condition of that type as its controller has it after the lab's next run (its time and
    generation left out)."""
    ok("advance", "0s")
    found = next(c for c in nodepool()["status"]["conditions"] if c["type"] == kind)
    return {key: found[key] for key in ("type", "status", "reason", "message")}


def resolved_events() -> list[str]:
    events = json.loads(ok("get", "events", "-o", "json"))["items"]
    return [
        e["message"]
        for e in events
        if e["reason"] == "NodeClassResolved" and e["involvedObject"] == {**e["involvedObject"], "kind": "NodePool"}
    ]


def test_the_only_node_class_of_that_name_is_the_one_named_and_provisions(lab):
    # The kwok provider's kind of NodePool: a name only, beside a KWOKNodeClass.
    ok("apply", "-f", "-", stdin=KWOK_CLASS + "---\n" + KINDLESS % AMD64)
    assert node_class_ref() == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    assert condition("NodeClassResolved") == {
        "type": "NodeClassResolved",
        "status": "True",
        "reason": "OnlyOneNamed",
        "message": 'the nodeClassRef names no kind: the KWOKNodeClass "default", the only node class of that name',
    }
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    ok("advance", "30s")
    assert [row["STATUS"] for row in table("get", "pods")] == ["Running", "Running"]
    assert [row["TYPE"] for row in table("get", "nodeclaims")] == ["c-4x-amd64-linux"]
    assert resolved_events() == [
        'the nodeClassRef names no kind: the KWOKNodeClass "default", the only node class of that name'
    ]
    # Kept as written, for the NodePool served at v1beta1 (Karpenter's conversion annotation).
    annotations = nodepool()["metadata"]["annotations"]
    assert annotations["compatibility.karpenter.sh/v1beta1-nodeclass-reference"] == '{"name": "default"}'


def test_beside_a_kwoknodeclass_that_cannot_serve_it_the_ec2nodeclass_is_named(lab):
    """Seed 004 after experiment 1: a KWOKNodeClass "default" is left over, and the NodePool asks for EC2 categories
    no kwok type has."""
    ok("apply", "-f", "-", stdin=KWOK_CLASS)
    assert ok("apply", "-f", "-", stdin=KINDLESS % (CATEGORY + AMD64) + "---\n" + EC2_CLASS) == (
        "nodepool.karpenter.sh/default created\nec2nodeclass.karpenter.k8s.aws/default created\n"
    )
    assert node_class_ref() == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    why = (
        'the nodeClassRef names no kind: the EC2NodeClass "default"; the KWOKNodeClass kind could not serve it: '
        "no instance type of the 144 the KWOKNodeClass offers satisfies karpenter.k8s.aws/instance-category In [c, m, r]"
    )
    assert condition("NodeClassResolved") == {
        "type": "NodeClassResolved",
        "status": "True",
        "reason": "OnlyOneServes",
        "message": why,
    }
    assert condition("Ready")["status"] == "True"
    ok("advance", "1s")
    assert resolved_events() == [why]


def test_where_both_kinds_could_serve_it_the_ec2nodeclass_is_named(lab):
    ok("apply", "-f", "-", stdin=KWOK_CLASS + "---\n" + EC2_CLASS + "---\n" + KINDLESS % AMD64)
    assert node_class_ref()["kind"] == "EC2NodeClass"
    assert condition("NodeClassResolved")["reason"] == "BothNamed"
    assert condition("NodeClassResolved")["message"] == (
        'the nodeClassRef names no kind: the EC2NodeClass "default"; the KWOKNodeClass "default" exists too, and '
        "where both kinds can serve a NodePool the EC2NodeClass is taken"
    )


def test_a_nodepool_written_before_its_node_class_takes_it_once_it_exists(lab):
    """kubectl apply sends a file's documents one by one: the NodePool exists before the node class after it."""
    ok("apply", "-f", "-", stdin=KINDLESS % FAMILY)
    # No node class of that name yet, and only kwok's types define both families: a KWOKNodeClass, awaited.
    assert node_class_ref() == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    assert condition("NodeClassReady") == {
        "type": "NodeClassReady",
        "status": "False",
        "reason": "NodeClassNotFound",
        "message": "NodeClass not found on cluster",
    }
    assert condition("NodeClassResolved") == {
        "type": "NodeClassResolved",
        "status": "True",
        "reason": "NoneNamed",
        "message": 'the nodeClassRef names no kind: the KWOKNodeClass "default", once it exists (no node class '
        'is named "default" yet); the EC2NodeClass kind could not serve it: no instance type of the 45 the '
        "EC2NodeClass offers satisfies karpenter.kwok.sh/instance-family In [c, m]",
    }
    assert condition("Ready") == {
        "type": "Ready",
        "status": "False",
        "reason": "UnhealthyDependents",
        "message": "NodeClassReady=False",
    }
    assert table("get", "nodepools")[0]["READY"] == "False"
    ok("apply", "-f", "-", stdin=KWOK_CLASS)
    assert node_class_ref()["kind"] == "KWOKNodeClass"
    assert condition("Ready")["status"] == "True"


def test_a_kindless_nodepool_follows_a_node_class_that_comes_after_it(lab):
    ok("apply", "-f", "-", stdin=KINDLESS % AMD64)
    before = models.NodePool.objects.get(name="default")
    assert node_class_ref()["kind"] == "EC2NodeClass"  # neither exists: the rule's default
    ok("apply", "-f", "-", stdin=KWOK_CLASS)
    after = models.NodePool.objects.get(name="default")
    assert node_class_ref() == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    assert after.generation == before.generation + 1
    assert condition("NodeClassResolved")["reason"] == "OnlyOneNamed"
    # The change is audited, as the KWOKNodeClass's creator's.
    audit = models.AuditEvent.objects.filter(target_kind="NodePool", action="update").get()
    assert audit.before["spec"]["template"]["spec"]["nodeClassRef"]["kind"] == "EC2NodeClass"
    assert audit.after["spec"]["template"]["spec"]["nodeClassRef"]["kind"] == "KWOKNodeClass"
    # The last node class of its name going leaves it with its kind, waiting, not Ready.
    ok("delete", "kwoknodeclass", "default")
    assert node_class_ref()["kind"] == "KWOKNodeClass"
    assert condition("Ready") == {
        "type": "Ready",
        "status": "False",
        "reason": "UnhealthyDependents",
        "message": "NodeClassReady=False",
    }


def test_a_nodepool_whose_node_class_does_not_exist_is_never_ready(lab):
    manifest = (EXAMPLES / "provisioning" / "nodepool.yaml").read_text()
    only_nodepool = manifest[manifest.index("apiVersion: karpenter.sh/v1") :]
    ok("apply", "-f", "-", stdin=only_nodepool)
    # At once, before its controller has run: awaiting reconciliation, as Karpenter's conditions start out.
    assert nodepool()["status"]["conditions"] == [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": "AwaitingReconciliation",
            "message": "object is awaiting reconciliation",
        }
    ]
    assert condition("NodeClassReady") == {
        "type": "NodeClassReady",
        "status": "False",
        "reason": "NodeClassNotFound",
        "message": "NodeClass not found on cluster",
    }
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    for _ in range(3):
        ok("advance", "20s")
        assert condition("Ready")["status"] == "False"
        assert table("get", "nodepools")[0]["READY"] == "False"
    assert rows("get", "nodeclaims") == []


def test_a_nodepool_whose_node_class_goes_is_not_ready_from_then_on(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    assert condition("Ready")["status"] == "True"
    ok("delete", "kwoknodeclass", "default")
    # Its stored status said Ready: until its controller runs again, it awaits reconciliation; then it is False.
    assert [(c["type"], c["status"]) for c in nodepool()["status"]["conditions"]] == [("Ready", "Unknown")]
    assert condition("Ready")["status"] == "False"


def test_a_kindless_nodepool_neither_kind_could_serve_is_refused(lab):
    code, _, err = karp("apply", "-f", "-", stdin=KWOK_CLASS + "---\n" + KINDLESS % (CATEGORY + FAMILY))
    assert code == 1
    assert err == (
        "error: document 2 NodePool/default: spec.template.spec.requirements[1]: the nodeClassRef names no kind, "
        "and neither node class kind could serve this NodePool: no instance type of the 45 the EC2NodeClass offers "
        "satisfies karpenter.kwok.sh/instance-family In [c, m] together with the requirements before it; no instance "
        "type of the 144 the KWOKNodeClass offers satisfies karpenter.k8s.aws/instance-category In [c, m, r]\n"
    )
    assert workload_objects() == 0
    assert not models.NodePool.objects.exists() and not models.NodeClass.objects.exists()

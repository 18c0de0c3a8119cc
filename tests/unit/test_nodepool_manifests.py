from pathlib import Path

import pytest
import yaml

from provisioner.manifests import ManifestError
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool
from tests.builders import MINIMAL_NODEPOOL as MINIMAL
from tests.builders import with_spec

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_the_documented_v1_nodepool_round_trips():
    doc = yaml.safe_load((FIXTURES / "nodepool-docs-v1.yaml").read_text())
    assert nodepool_to_manifest(parse_nodepool(doc)) == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "metadata": doc["spec"]["template"]["metadata"],
                "spec": {
                    "nodeClassRef": doc["spec"]["template"]["spec"]["nodeClassRef"],
                    "requirements": doc["spec"]["template"]["spec"]["requirements"],
                    "taints": doc["spec"]["template"]["spec"]["taints"],
                    "startupTaints": doc["spec"]["template"]["spec"]["startupTaints"],
                    "expireAfter": "720h",
                    "terminationGracePeriod": "48h",
                },
            },
            "disruption": doc["spec"]["disruption"],
            "limits": {"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": "2"},
            "weight": 10,
        },
    }


def test_karpenters_v1_defaults_are_applied():
    nodepool = parse_nodepool(MINIMAL)
    spec = nodepool_to_manifest(nodepool)["spec"]
    assert spec["template"]["spec"]["expireAfter"] == "720h"
    assert spec["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "10%"}],
    }
    assert "weight" not in spec and nodepool.weight is None
    assert nodepool.expire_after_seconds == 720 * 3600


def test_never_is_accepted_for_expire_after_and_consolidate_after():
    doc = with_spec("spec.template.spec.expireAfter", "Never")
    doc["spec"]["disruption"] = {"consolidateAfter": "Never"}
    nodepool = parse_nodepool(doc)
    assert (nodepool.expire_after_seconds, nodepool.consolidate_after_seconds) == (None, None)


def test_template_requirements_add_labels_and_the_nodepool_name():
    doc = yaml.safe_load((FIXTURES / "nodepool-docs-v1.yaml").read_text())
    requirements = parse_nodepool(doc).template_requirements()
    assert requirements["karpenter.sh/nodepool"].values == frozenset({"default"})
    assert requirements["billing-team"].values == frozenset({"my-team"})
    assert requirements["karpenter.kwok.sh/instance-family"].min_values == 2


V1BETA1 = """
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot"]
      nodeClassRef:
        apiVersion: karpenter.k8s.aws/v1beta1
        kind: EC2NodeClass
        name: default
      kubelet:
        maxPods: 110
  limits:
    cpu: 10
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 168h
    budgets:
      - nodes: "20%"
"""


def test_v1beta1_is_converted_as_karpenters_conversion_webhook_does():
    manifest = nodepool_to_manifest(parse_nodepool(yaml.safe_load(V1BETA1)))
    assert manifest["apiVersion"] == "karpenter.sh/v1"
    assert manifest["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "20%"}],
    }
    assert manifest["spec"]["template"]["spec"]["expireAfter"] == "168h"
    assert manifest["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert manifest["metadata"]["annotations"] == {
        "compatibility.karpenter.sh/v1beta1-kubelet-conversion": '{"maxPods": 110}',
        "compatibility.karpenter.sh/v1beta1-nodeclass-reference": (
            '{"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "default"}'
        ),
    }
    assert manifest["spec"]["limits"] == {"cpu": "10"}


@pytest.mark.parametrize(
    ("ref", "group", "kind"),
    [
        # Until its writer resolves it by the node classes that exist (provisioner.nodeclasses): the kind taken where
        # none of that name exists yet.
        ("{name: default}", "karpenter.k8s.aws", "EC2NodeClass"),
        ("{kind: EC2NodeClass, name: default}", "karpenter.k8s.aws", "EC2NodeClass"),  # the kind's own group
        ("{kind: KWOKNodeClass, name: default}", "karpenter.kwok.sh", "KWOKNodeClass"),
        # An apiVersion without a kind names its group's node class.
        ("{apiVersion: karpenter.kwok.sh/v1alpha1, name: default}", "karpenter.kwok.sh", "KWOKNodeClass"),
        ("{apiVersion: karpenter.k8s.aws/v1beta1, name: default}", "karpenter.k8s.aws", "EC2NodeClass"),
    ],
)
def test_a_v1beta1_nodeclassref_without_kind_or_api_version(ref, group, kind):
    manifest = nodepool_to_manifest(parse_nodepool(yaml.safe_load(v1beta1_with_ref(ref))))
    assert manifest["spec"]["template"]["spec"]["nodeClassRef"] == {"group": group, "kind": kind, "name": "default"}


def test_a_v1beta1_nodeclassref_of_a_kind_at_another_group_is_refused():
    with pytest.raises(ManifestError) as error:
        parse_nodepool(
            yaml.safe_load(v1beta1_with_ref("{apiVersion: karpenter.k8s.aws/v1beta1, kind: KWOKNodeClass, name: a}"))
        )
    assert str(error.value) == (
        'error: spec.template.spec.nodeClassRef.group: Unsupported value: "karpenter.k8s.aws": '
        "KWOKNodeClass is served by karpenter.kwok.sh"
    )


def v1beta1_with_ref(ref: str) -> str:
    given = "nodeClassRef:\n        apiVersion: karpenter.k8s.aws/v1beta1\n        kind: EC2NodeClass\n        name: default"
    assert given in V1BETA1
    return V1BETA1.replace(given, f"nodeClassRef: {ref}")


def test_v1beta1_when_empty_keeps_its_consolidate_after():
    text = V1BETA1.replace(
        "consolidationPolicy: WhenUnderutilized", "consolidationPolicy: WhenEmpty\n    consolidateAfter: 30s"
    )
    manifest = nodepool_to_manifest(parse_nodepool(yaml.safe_load(text)))
    assert manifest["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert manifest["spec"]["disruption"]["consolidateAfter"] == "30s"


@pytest.mark.parametrize(
    ("text_change", "field"),
    [
        (
            (
                "consolidationPolicy: WhenUnderutilized",
                "consolidationPolicy: WhenUnderutilized\n    consolidateAfter: 30s",
            ),
            "spec.disruption.consolidateAfter",
        ),
        (
            ("consolidationPolicy: WhenUnderutilized", "consolidationPolicy: WhenEmpty"),
            "spec.disruption.consolidateAfter",
        ),
        (('- nodes: "20%"', '- nodes: "20%"\n        reasons: [Empty]'), "spec.disruption.budgets[0].reasons"),
    ],
)
def test_v1beta1_rules(text_change, field):
    with pytest.raises(ManifestError) as raised:
        parse_nodepool(yaml.safe_load(V1BETA1.replace(*text_change)))
    assert raised.value.field == field


REQ = "spec.template.spec.requirements"


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        ("spec.weight", 0, "spec.weight", "must be greater than or equal to 1"),
        ("spec.weight", 101, "spec.weight", "must be less than or equal to 100"),
        ("spec.weight", "high", "spec.weight", "expected an integer"),
        ("spec.colour", "red", "spec.colour", 'unknown field "colour"'),
        ("spec.template.spec.kubelet", {}, "spec.template.spec.kubelet", 'unknown field "kubelet"'),
        ("spec.limits", {"cpu": "1.5.5Gi"}, "spec.limits.cpu", "regular expression"),
        ("spec.limits", {"memory": "NaN"}, "spec.limits.memory", "regular expression"),
        (REQ, [{"key": "a", "operator": "Like", "values": ["x"]}], f"{REQ}[0].operator", 'Unsupported value: "Like"'),
        (REQ, [{"key": "a", "operator": "Gt", "values": ["four"]}], f"{REQ}[0].values", "single positive integer"),
        (REQ, [{"key": "a", "operator": "Gt", "values": ["1", "2"]}], f"{REQ}[0].values", "single positive integer"),
        (REQ, [{"key": "a", "operator": "In", "values": []}], f"{REQ}[0].values", "must have a value"),
        (
            REQ,
            [{"key": "a", "operator": "In", "values": ["x"], "minValues": 2}],
            f"{REQ}[0].minValues",
            "at least that many",
        ),
        (REQ, [{"key": "a", "operator": "Exists", "minValues": 51}], f"{REQ}[0].minValues", "less than or equal to 50"),
        (REQ, [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}], f"{REQ}[0].key", "restricted"),
        (REQ, [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["x"]}], f"{REQ}[0].key", "restricted"),
        (REQ, [{"key": "karpenter.sh/custom", "operator": "Exists"}], f"{REQ}[0].key", "restricted"),
        (
            REQ,
            [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["cheap"]}],
            f"{REQ}[0].values",
            "known capacity type",
        ),
        (REQ, [{"key": "a", "operator": "In", "values": ["x"], "extra": 1}], f"{REQ}[0].extra", "unknown field"),
        (REQ, None, REQ, "Required value"),
        ("spec.template.spec.nodeClassRef", None, "spec.template.spec.nodeClassRef", "Required value"),
        (
            "spec.template.spec.nodeClassRef",
            {"group": "a/b", "kind": "K", "name": "n"},
            "spec.template.spec.nodeClassRef.group",
            "must not contain",
        ),
        ("spec.template.spec.expireAfter", "30d", "spec.template.spec.expireAfter", "invalid duration"),
        (
            "spec.template.spec.terminationGracePeriod",
            "Never",
            "spec.template.spec.terminationGracePeriod",
            "invalid duration",
        ),
        (
            "spec.template.spec.taints",
            [{"key": "k", "effect": "Sometimes"}],
            "spec.template.spec.taints[0].effect",
            "Unsupported value",
        ),
        (
            "spec.template.metadata",
            {"labels": {"karpenter.sh/nodepool": "x"}},
            "spec.template.metadata.labels.karpenter.sh/nodepool",
            "restricted",
        ),
        (
            "spec.template.metadata",
            {"labels": {"team": "-bad-"}},
            "spec.template.metadata.labels.team",
            "invalid label value",
        ),
        (
            "spec.disruption",
            {"consolidationPolicy": "Always"},
            "spec.disruption.consolidationPolicy",
            "Unsupported value",
        ),
        (
            "spec.disruption",
            {"budgets": [{"nodes": "10%", "schedule": "@daily"}]},
            "spec.disruption.budgets[0].duration",
            "'schedule' must be set with 'duration'",
        ),
        (
            "spec.disruption",
            {"budgets": [{"nodes": "10%", "duration": "10m"}]},
            "spec.disruption.budgets[0].schedule",
            "'schedule' must be set with 'duration'",
        ),
        ("spec.disruption", {"budgets": [{"nodes": "101%"}]}, "spec.disruption.budgets[0].nodes", "must match"),
        (
            "spec.disruption",
            {"budgets": [{"nodes": "0", "schedule": "every day", "duration": "1h"}]},
            "spec.disruption.budgets[0].schedule",
            "invalid cron",
        ),
        (
            "spec.disruption",
            {"budgets": [{"nodes": "0", "schedule": "@daily", "duration": "10s"}]},
            "spec.disruption.budgets[0].duration",
            "must match",
        ),
        (
            "spec.disruption",
            {"budgets": [{"reasons": ["Expired"]}]},
            "spec.disruption.budgets[0].reasons[0]",
            "Unsupported value",
        ),
        ("metadata.name", "Not_A_Name", "metadata.name", "RFC 1123"),
    ],
)
def test_bad_input_is_refused_with_the_field_named(path, value, field, message):
    with pytest.raises(ManifestError) as raised:
        parse_nodepool(with_spec(path, value))
    assert raised.value.field == field
    assert message in raised.value.message


def test_duplicate_taints_across_taints_and_startup_taints_are_refused():
    doc = with_spec("spec.template.spec.taints", [{"key": "k", "effect": "NoSchedule"}])
    doc["spec"]["template"]["spec"]["startupTaints"] = [{"key": "k", "effect": "NoSchedule"}]
    with pytest.raises(ManifestError) as raised:
        parse_nodepool(doc)
    assert raised.value.field == "spec.template.spec.startupTaints[0]"


def test_unknown_api_version_is_refused():
    with pytest.raises(ManifestError) as raised:
        parse_nodepool({**MINIMAL, "apiVersion": "karpenter.sh/v2"})
    assert raised.value.field == "apiVersion"

"""`karp apply` / `get` / `delete` for NodePools and node classes, run as a user would."""

import json
from pathlib import Path

import pytest
import yaml

from karpui import models
from karpui.people.audit import Actor
from provisioner.apimachinery.apply import LAST_APPLIED
from tests.karp import columns, karp

ROOT = Path(__file__).parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def db_state():
    return (
        list(models.NodePool.objects.values_list("name", "spec", "resource_version")),
        list(models.NodeClass.objects.values_list("kind", "name", "spec")),
        models.AuditEvent.objects.count(),
    )


def test_apply_creates_then_reports_unchanged_then_configured(lab):
    base = lab.resource_version  # the versions its namespaces took
    path = str(ROOT / "examples" / "nodepool-kwok.yaml")
    assert karp("apply", "-f", path)[:2] == (
        0,
        "kwoknodeclass.karpenter.kwok.sh/default created\nnodepool.karpenter.sh/default created\n",
    )
    assert (
        karp("apply", "-f", path)[1]
        == "kwoknodeclass.karpenter.kwok.sh/default unchanged\nnodepool.karpenter.sh/default unchanged\n"
    )
    changed = Path(path).read_text().replace("consolidateAfter: 1m", "consolidateAfter: 10s")
    assert karp("apply", "-f", "-", stdin=changed)[1].endswith("nodepool.karpenter.sh/default configured\n")
    row = models.NodePool.objects.get(name="default")
    # resourceVersions come from the cluster's one sequence: node class, NodePool, then its update.
    assert (row.generation, row.resource_version - base, row.spec["disruption"]["consolidateAfter"]) == (2, 3, "10s")
    actions = list(
        models.AuditEvent.objects.exclude(via="migrate")
        .order_by("id")
        .values_list("action", "target_kind", "target_name", "via")
    )
    assert [a[:3] for a in actions] == [
        ("create", "KWOKNodeClass", "default"),
        ("create", "NodePool", "default"),
        ("update", "NodePool", "default"),
    ]
    assert {a[3] for a in actions} == {"cli"}


@pytest.mark.parametrize("fixture", ["nodepool-docs-v1.yaml"])
def test_documented_nodepools_round_trip_through_get_yaml(lab, fixture):
    text = (FIXTURES / fixture).read_text()
    assert karp("apply", "-f", str(FIXTURES / fixture))[0] == 0
    code, out, _ = karp("get", "nodepool", "default", "-o", "yaml")
    printed = yaml.safe_load(out)
    given = yaml.safe_load(text)
    assert code == 0
    assert printed["spec"] == given["spec"]
    assert printed["metadata"]["name"] == "default"
    assert set(printed["metadata"]) == {
        "name",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "annotations",  # kubectl.kubernetes.io/last-applied-configuration: apply's record of what it owns
    }
    assert json.loads(printed["metadata"]["annotations"][LAST_APPLIED]) == given
    # What get prints can be applied back: as with kubectl, that records the printed object as last applied, and
    # changes nothing else.
    assert karp("apply", "-f", "-", stdin=out)[1] == "nodepool.karpenter.sh/default configured\n"
    assert yaml.safe_load(karp("get", "nodepool", "default", "-o", "yaml")[1])["spec"] == given["spec"]


def test_v1beta1_example_is_stored_as_v1(lab):
    assert karp("apply", "-f", str(ROOT / "examples" / "nodepool-v1beta1.yaml"))[0] == 0
    manifest = json.loads(karp("get", "nodepools", "spot-v1beta1", "-o", "json")[1])
    assert manifest["apiVersion"] == "karpenter.sh/v1"
    assert manifest["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert manifest["spec"]["template"]["spec"]["expireAfter"] == "168h"
    assert manifest["spec"]["template"]["spec"]["nodeClassRef"]["group"] == "karpenter.kwok.sh"


BAD_DOCUMENTS = [
    ("spec: [1, 2\n", "error: malformed YAML"),
    (
        "apiVersion: v1\nkind: Gadget\nmetadata: {name: x}\n",
        'error: document 2 Gadget/x: kind: no matches for kind "Gadget"',
    ),
    (
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {frobnicate: 1}\n",
        'spec.frobnicate: unknown field "frobnicate"',
    ),
]


def bad_nodepool(field_yaml: str) -> str:
    return (
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: bad}\nspec:\n"
        "  template:\n    spec:\n      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}\n"
        f"      requirements: []\n{field_yaml}"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        *BAD_DOCUMENTS,
        (
            bad_nodepool("  limits: {memory: 1.5.5Gi}\n"),
            "error: document 2 NodePool/bad: spec.limits.memory: quantities must match",
        ),
        (bad_nodepool("  limits: {cpu: NaN}\n"), "spec.limits.cpu: quantities must match"),
        (bad_nodepool("  weight: 0\n"), "spec.weight: must be greater than or equal to 1, got 0"),
        (bad_nodepool("  weight: 101\n"), "spec.weight: must be less than or equal to 100, got 101"),
        (
            bad_nodepool("  disruption: {budgets: [{nodes: '1', schedule: '@daily'}]}\n"),
            "spec.disruption.budgets[0].duration: 'schedule' must be set with 'duration'",
        ),
        (
            bad_nodepool("").replace("requirements: []", "requirements: [{key: a, operator: Near, values: [b]}]"),
            "spec.template.spec.requirements[0].operator: Unsupported value",
        ),
        (
            bad_nodepool("").replace("requirements: []", "requirements: [{key: a, operator: Gt, values: ['1.5']}]"),
            "spec.template.spec.requirements[0].values",
        ),
    ],
)
def test_bad_input_is_refused_with_a_named_field_and_changes_nothing(lab, text, message):
    karp("apply", "-f", str(ROOT / "examples" / "nodepool-kwok.yaml"))
    before = db_state()
    # A valid document first: the whole file is refused, so it must not be written either.
    good = (ROOT / "examples" / "nodepool-v1beta1.yaml").read_text()
    code, out, err = karp("apply", "-f", "-", stdin=good + "\n---\n" + text)
    assert code == 1
    assert out == ""
    assert message in err
    assert db_state() == before


def test_the_second_document_is_named_in_errors(lab):
    good = (ROOT / "examples" / "nodepool-v1beta1.yaml").read_text()
    _, _, err = karp("apply", "-f", "-", stdin=good + "\n---\n" + bad_nodepool("  weight: 0\n"))
    assert err.startswith("error: document 2 NodePool/bad: spec.weight:")


def test_get_tables_selectors_and_not_found(lab):
    karp("apply", "-f", str(ROOT / "examples"))
    code, out, _ = karp("get", "nodepools")
    assert code == 0
    assert out.splitlines()[0].split() == ["NAME", "NODECLASS", "NODES", "READY", "AGE"]
    assert [row["NAME"] for row in columns(out)] == ["default", "spot-v1beta1"]
    assert karp("get", "nodepool", "missing") == (
        1,
        "",
        'Error from server (NotFound): nodepools.karpenter.sh "missing" not found\n',
    )
    assert karp("get", "gadgets")[2] == 'error: the server doesn\'t have a resource type "gadgets"\n'
    assert karp("explode")[2] == 'error: unknown command "explode" for "karp"\n'
    assert karp("get", "np", "-o", "name")[1] == "nodepool.karpenter.sh/default\nnodepool.karpenter.sh/spot-v1beta1\n"


def test_delete_by_name_and_by_file(lab):
    karp("apply", "-f", str(ROOT / "examples"))
    assert karp("delete", "nodepool", "spot-v1beta1") == (0, 'nodepool.karpenter.sh "spot-v1beta1" deleted\n', "")
    assert karp("delete", "-f", str(ROOT / "examples" / "nodepool-kwok.yaml"))[1] == (
        'kwoknodeclass.karpenter.kwok.sh "default" deleted\nnodepool.karpenter.sh "default" deleted\n'
    )
    assert models.NodePool.objects.count() == 0
    assert karp("delete", "np", "default")[0] == 1
    assert models.AuditEvent.objects.filter(action="delete").count() == 3


def test_get_instancetypes_lists_both_catalogs_as_kubernetes_objects(lab):
    code, out, _ = karp("get", "instancetypes", "-o", "json")
    listing = json.loads(out)
    assert code == 0 and listing["kind"] == "List"
    assert len(listing["items"]) == 189
    item = next(i for i in listing["items"] if i["metadata"]["name"] == "c-8x-amd64-linux")
    assert item["metadata"]["labels"]["karpui.dev/catalog"] == "kwok"
    assert item["status"]["allocatable"] == {
        "cpu": "7900m",
        "ephemeral-storage": "20Gi",
        "memory": "16374Mi",
        "pods": "128",
    }
    assert {(o["capacityType"], round(o["price"], 6)) for o in item["spec"]["offerings"]} == {
        ("on-demand", 0.21718),
        ("spot", 0.152026),
    }
    _, table, _ = karp(
        "get", "it", "-l", "karpenter.kwok.sh/instance-family=m,kubernetes.io/arch=amd64,kubernetes.io/os=linux"
    )
    assert len(table.splitlines()) == 13
    assert table.splitlines()[1].split() == [
        "m-1x-amd64-linux",
        "kwok",
        "1",
        "8Gi",
        "16",
        "amd64",
        "linux",
        "0.033590",
        "0.023513",
    ]


UNSATISFIABLE = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: ok-first
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [arm64]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: nothing-fits
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [arm64]}
        - {key: karpenter.kwok.sh/instance-family, operator: In, values: [x]}
"""


def test_a_nodepool_no_instance_type_can_satisfy_is_refused_naming_the_requirement_and_nothing_is_written(lab):
    code, _, err = karp("apply", "-f", "-", stdin=UNSATISFIABLE)

    assert code == 1
    assert err.strip() == (
        "error: document 2 NodePool/nothing-fits: spec.template.spec.requirements[1]: no instance type of the 144 "
        "this NodePool's node class offers satisfies karpenter.kwok.sh/instance-family In [x] together with the "
        "requirements before it"
    )
    assert not models.NodePool.objects.exists()  # the valid first document was not written either


def test_get_hides_managed_fields_as_kubectl_does_unless_asked_and_so_does_the_objects_page(lab):
    from karpui.writes import objects
    from tests.integration.test_dashboard import logged_in, user
    from tests.karp import EXAMPLES

    config = yaml.safe_load((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    config["metadata"]["namespace"] = "default"
    operator = Actor(name="operator", via="cli")
    objects.object_apply(cluster=lab, config=config, namespace="default", manager="ci", force=False, actor=operator)
    code, shown, _ = karp("get", "deployment", "inflate", "-o", "json")
    assert (code, "managedFields" in json.loads(shown)["metadata"]) == (0, False)
    code, shown, _ = karp("get", "deployment", "inflate", "-o", "json", "--show-managed-fields")
    assert [e["manager"] for e in json.loads(shown)["metadata"]["managedFields"]] == ["ci"]
    page = logged_in(user()).get("/objects/Deployment/default/inflate/")
    assert (page.status_code, "managedFields" in page.content.decode()) == (200, False)

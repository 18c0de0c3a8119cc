"""The NodePool editor's form holds every field of Karpenter's v1 NodePool spec, read from its CRD schema (a field
added to the schema becomes a form field), writes only what a person changed, and shows each error at its input."""

from __future__ import annotations

import yaml

from karpui import models
from karpui.web import schemaform
from tests.integration.test_nodepool_editor import capped_lab, editor, form_for

REQUIREMENTS = "spec.template.spec.requirements"


def test_every_field_of_the_v1_spec_is_a_form_field(lab):
    capped_lab()
    form = editor("change_nodepool").get("/nodepools/capped/").context["form"]
    names = set(form.fields)
    assert {
        "spec.weight",
        "spec.replicas",
        "spec.limits",
        "spec.disruption.consolidationPolicy",
        "spec.disruption.consolidateAfter",
        "spec.disruption.budgets[0].nodes",
        "spec.disruption.budgets[0].schedule",
        "spec.disruption.budgets[0].duration",
        "spec.disruption.budgets[0].reasons",
        "spec.template.metadata.labels",
        "spec.template.metadata.annotations",
        "spec.template.spec.nodeClassRef.group",
        "spec.template.spec.nodeClassRef.kind",
        "spec.template.spec.nodeClassRef.name",
        f"{REQUIREMENTS}[2].key",
        f"{REQUIREMENTS}[2].operator",
        f"{REQUIREMENTS}[2].values",
        f"{REQUIREMENTS}[2].minValues",
        f"{REQUIREMENTS}[3].key",  # the blank row that adds one
        "spec.template.spec.taints[0].key",
        "spec.template.spec.taints[0].value",
        "spec.template.spec.taints[0].effect",
        "spec.template.spec.startupTaints[0].effect",
        "spec.template.spec.expireAfter",
        "spec.template.spec.terminationGracePeriod",
    } <= names
    assert "spec.template.spec.taints[0].timeAdded" not in names  # the system's, not a person's
    assert form.fields["spec.disruption.consolidationPolicy"].widget.choices == [
        ("", "—"),
        ("WhenEmpty", "WhenEmpty"),
        ("WhenEmptyOrUnderutilized", "WhenEmptyOrUnderutilized"),
        ("Balanced", "Balanced"),
    ]


def test_a_field_the_schema_gains_becomes_a_form_field():
    schema = {
        "type": "object",
        "properties": {
            "weight": {"type": "integer", "description": "Weight is the priority. More words."},
            "overlayRef": {"type": "object", "properties": {"name": {"type": "string"}}},
            "budgets": {
                "type": "array",
                "maxItems": 2,
                "items": {
                    "type": "object",
                    "properties": {"nodes": {"type": "string"}, "timeAdded": {"type": "string"}},
                },
            },
        },
    }
    built = schemaform.tree(schema, "spec", "spec")
    assert [leaf.path if isinstance(leaf, schemaform.Leaf) else leaf.path for leaf in schemaform.leaves(built)] == [
        "spec.weight",
        "spec.overlayRef.name",
        "spec.budgets",
    ]
    [_, _, budgets] = schemaform.leaves(built)
    assert [c.path for c in budgets.columns] == ["nodes"] and budgets.max_items == 2
    assert next(schemaform.leaves(built)).help == "Weight is the priority."


def test_taints_requirements_budgets_and_memory_limits_are_edited_in_their_fields(lab):
    capped_lab()
    client = editor("change_nodepool")
    data = {
        **form_for(client, "capped"),
        "spec.template.spec.taints[0].key": "dedicated",
        "spec.template.spec.taints[0].value": "batch",
        "spec.template.spec.taints[0].effect": "NoSchedule",
        f"{REQUIREMENTS}[3].key": "topology.kubernetes.io/zone",
        f"{REQUIREMENTS}[3].operator": "In",
        f"{REQUIREMENTS}[3].values": "test-zone-a, test-zone-b",
        "spec.disruption.budgets[0].nodes": "",  # cleared: the budget goes
        "spec.limits": "cpu=16\nmemory=64Gi",
        "spec.template.spec.expireAfter": "24h",
        "action": "save",
    }
    response = client.post("/nodepools/capped/", data)
    assert response.status_code == 302, response.context["form"].errors
    spec = models.NodePool.objects.get(name="capped").spec
    assert spec["template"]["spec"]["taints"] == [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    assert spec["template"]["spec"]["requirements"][3] == {
        "key": "topology.kubernetes.io/zone",
        "operator": "In",
        "values": ["test-zone-a", "test-zone-b"],
    }
    assert spec["limits"] == {"cpu": "16", "memory": "64Gi"}
    assert spec["template"]["spec"]["expireAfter"] == "24h"
    assert spec["disruption"].get("budgets") in (None, [{"nodes": "10%"}])  # Karpenter's default budget


def test_an_error_in_a_row_is_shown_at_its_cell_and_nothing_is_saved(lab):
    capped_lab()
    before = models.NodePool.objects.get(name="capped").resource_version
    client = editor("change_nodepool")
    data = {
        **form_for(client, "capped"),
        "spec.template.spec.taints[0].key": "dedicated",
        "spec.template.spec.taints[0].effect": "Sometimes",
        "spec.disruption.budgets[1].nodes": "lots",
        "spec.limits": "cpu",
        "action": "save",
    }
    response = client.post("/nodepools/capped/", data)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert errors["spec.template.spec.taints[0].effect"] == [
        "must be one of NoSchedule, PreferNoSchedule, NoExecute, got 'Sometimes'"
    ]
    assert errors["spec.limits"] == ["line 1: expected key=value, got 'cpu'"]
    # One error hides none of those after it: the budget's, checked after the taint's.
    assert errors["spec.disruption.budgets[1].nodes"] == [
        "invalid value 'lots': must match ^((100|[0-9]{1,2})%|[0-9]+)$"
    ]
    body = response.content.decode()
    assert (
        '<span class="error">must be one of NoSchedule, PreferNoSchedule, NoExecute, got &#x27;Sometimes&#x27;</span>'
        in body
    )
    assert models.NodePool.objects.get(name="capped").resource_version == before


def test_a_post_of_the_yaml_alone_edits_the_yaml_and_clears_no_field(lab):
    capped_lab()
    client = editor("change_nodepool")
    manifest = form_for(client, "capped")["manifest"].replace("cpu: '16'", "cpu: '24'")
    assert "cpu: '24'" in manifest

    response = client.post("/nodepools/capped/", {"approval_mode": "auto", "manifest": manifest, "action": "save"})

    assert response.status_code == 302
    spec = models.NodePool.objects.get(name="capped").spec
    assert spec["limits"] == {"cpu": "24"}
    assert [r["key"] for r in spec["template"]["spec"]["requirements"]] == [
        r["key"] for r in yaml.safe_load(manifest)["spec"]["template"]["spec"]["requirements"]
    ]
    assert (
        spec["template"]["spec"]["nodeClassRef"] == yaml.safe_load(manifest)["spec"]["template"]["spec"]["nodeClassRef"]
    )


def test_a_refused_post_of_the_yaml_alone_shows_the_fields_as_they_were(lab):
    capped_lab()
    client = editor("change_nodepool")
    manifest = form_for(client, "capped")["manifest"].replace("cpu: '16'", "cpu: '-1'")

    response = client.post("/nodepools/capped/", {"approval_mode": "auto", "manifest": manifest, "action": "save"})

    assert response.status_code == 400
    form = response.context["form"]
    assert form.errors["spec.limits"] == ["cpu: must be greater than or equal to 0, got -1"]
    assert form["spec.template.spec.nodeClassRef.name"].value() == "default"
    assert models.NodePool.objects.get(name="capped").spec["limits"] == {"cpu": "16"}

"""The karpui.dev/plan-improvement annotation on a NodePool: "enabled" or "disabled", checked at apply."""

import pytest

from provisioner import labels as wk
from provisioner.manifests import ManifestError
from provisioner.manifests.nodepool import parse_nodepool


def nodepool_annotated(value: str) -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "annotations": {wk.PLAN_IMPROVEMENT: value}},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                    "requirements": [],
                }
            }
        },
    }


@pytest.mark.parametrize("value", ["enabled", "disabled"])
def test_the_annotation_accepts_enabled_and_disabled(value):
    assert parse_nodepool(nodepool_annotated(value)).annotations[wk.PLAN_IMPROVEMENT] == value


@pytest.mark.parametrize("value", ["on", "Enabled", "true", ""])
def test_any_other_plan_improvement_value_is_refused_naming_the_field(value):
    with pytest.raises(ManifestError) as refused:
        parse_nodepool(nodepool_annotated(value))
    assert refused.value.field == "metadata.annotations.karpui.dev/plan-improvement"
    assert f'Unsupported value: "{value}": supported values: enabled, disabled' in str(refused.value)

"""Server-side apply's field ownership (provisioner.apimachinery.fieldmanager): FieldsV1, the merge, removals and
conflicts, with the outcomes kube-apiserver gives for the same writes."""

from __future__ import annotations

import pytest

from provisioner.apimachinery import fieldmanager as fm
from provisioner.apimachinery.strategic import root_type

DEPLOYMENT = root_type("apps/v1", "Deployment")
T0, T1 = "2026-12-04T10:00:00Z", "2026-12-04T10:01:00Z"


def deployment(replicas: int | None = 2, image: str = "nginx", labels: dict[str, str] | None = None) -> dict:
    spec: dict = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": image}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    metadata: dict = {"name": "web", "namespace": "default"}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}


def stored(applied: fm.Applied) -> dict:
    """The object as the API server keeps it: with its managedFields."""
    return {
        **applied.obj,
        "metadata": {**applied.obj["metadata"], "managedFields": [e.to_json() for e in applied.managed]},
    }


def test_a_first_apply_owns_every_field_it_sets_in_fieldsv1():
    result = fm.apply(None, deployment(), manager="kubectl", force=False, root_type=DEPLOYMENT, time=T0)
    [entry] = [e.to_json() for e in result.managed]
    assert entry == {
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": T0,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:spec": {
                "f:replicas": {},
                "f:selector": {"f:matchLabels": {"f:app": {}}},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}, "f:image": {}, "f:name": {}}}},
                },
            }
        },
    }
    assert fm.decode(entry["fieldsV1"]) == fm.field_set(deployment(), DEPLOYMENT)


def test_applying_again_without_a_field_removes_it_and_a_new_container_is_merged_by_name():
    first = stored(
        fm.apply(None, deployment(labels={"team": "a"}), manager="k", force=False, root_type=DEPLOYMENT, time=T0)
    )
    config = deployment(labels=None)
    config["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "envoy"})
    again = fm.apply(first, config, manager="k", force=False, root_type=DEPLOYMENT, time=T1)
    assert "labels" not in again.obj["metadata"]
    assert [c["name"] for c in again.obj["spec"]["template"]["spec"]["containers"]] == ["app", "sidecar"]
    assert [e.time for e in again.managed] == [T1]


def test_a_field_another_manager_changed_is_a_conflict_naming_the_manager_and_the_field():
    applied = stored(
        fm.apply(None, deployment(replicas=2), manager="kubectl", force=False, root_type=DEPLOYMENT, time=T0)
    )
    scaled = {**applied, "spec": {**applied["spec"], "replicas": 5}}
    scaled["metadata"] = {
        **applied["metadata"],
        "managedFields": [
            e.to_json() for e in fm.updated(applied, scaled, manager="kubectl-scale", root_type=DEPLOYMENT, time=T1)
        ],
    }
    assert [(e.manager, e.operation, sorted(e.fields)) for e in fm.entries(scaled) if e.manager == "kubectl-scale"] == [
        ("kubectl-scale", "Update", [("f:spec", "f:replicas")])
    ]
    with pytest.raises(fm.ApplyConflict) as conflict:
        fm.apply(scaled, deployment(replicas=2), manager="kubectl", force=False, root_type=DEPLOYMENT, time=T1)
    assert (
        str(conflict.value)
        == 'Apply failed with 1 conflict: conflict with "kubectl-scale" using apps/v1 at 2026-12-04T10:01:00Z: .spec.replicas'
    )
    forced = fm.apply(scaled, deployment(replicas=2), manager="kubectl", force=True, root_type=DEPLOYMENT, time=T1)
    assert forced.obj["spec"]["replicas"] == 2
    assert [e.manager for e in forced.managed] == ["kubectl"]  # the scaler owned nothing else


def test_the_same_value_is_shared_not_a_conflict_and_a_field_left_out_then_stays_with_the_other_owner():
    first = stored(fm.apply(None, deployment(replicas=3), manager="a", force=False, root_type=DEPLOYMENT, time=T0))
    both = stored(fm.apply(first, deployment(replicas=3), manager="b", force=False, root_type=DEPLOYMENT, time=T1))
    assert sorted(e.manager for e in fm.entries(both)) == ["a", "b"]
    dropped = fm.apply(both, deployment(replicas=None), manager="a", force=False, root_type=DEPLOYMENT, time=T1)
    assert dropped.obj["spec"]["replicas"] == 3  # b still owns it


def test_leaving_out_a_field_no_one_else_owns_removes_it():
    first = stored(fm.apply(None, deployment(replicas=3), manager="a", force=False, root_type=DEPLOYMENT, time=T0))
    assert (
        "replicas"
        not in fm.apply(first, deployment(replicas=None), manager="a", force=False, root_type=DEPLOYMENT, time=T1).obj[
            "spec"
        ]
    )


def test_custom_resource_lists_are_atomic_and_the_path_names_a_keyed_item():
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {"template": {"spec": {"requirements": [{"key": "a", "operator": "Exists"}]}}},
    }
    assert fm.field_set(pool, None) == {("f:spec", "f:template", "f:spec", "f:requirements")}
    assert fm.dotted(("f:spec", "f:containers", 'k:{"name":"app"}', "f:image")) == '.spec.containers[name="app"].image'
    assert fm.dotted(("f:metadata", "f:finalizers", 'v:"x"')) == '.metadata.finalizers[="x"]'


def test_an_apply_that_changes_nothing_keeps_its_entry_as_it_was():
    first = stored(fm.apply(None, deployment(), manager="k", force=False, root_type=DEPLOYMENT, time=T0))
    again = fm.apply(first, deployment(), manager="k", force=False, root_type=DEPLOYMENT, time=T1)
    assert ([e.time for e in again.managed], stored(again)) == ([T0], first)

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


# Found in review: each outcome is kube-apiserver's for the same applies.


def containers(obj: dict) -> list[dict]:
    return obj["spec"]["template"]["spec"]["containers"]


def with_container(config: dict, **fields) -> dict:
    containers(config)[0].update(fields)
    return config


def test_dropping_a_keyed_item_removes_the_whole_item():
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    config = deployment()
    config["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "envoy", "args": ["-c"]})
    first = stored(
        fm.apply(None, with_container(config, env=env), manager="k", force=False, root_type=DEPLOYMENT, time=T0)
    )
    again = fm.apply(
        first, with_container(deployment(), env=env[:1]), manager="k", force=False, root_type=DEPLOYMENT, time=T1
    )
    assert containers(again.obj) == [{"name": "app", "image": "nginx", "env": [{"name": "A", "value": "1"}]}]


def test_an_empty_map_applied_before_its_contents_keeps_them():
    first = stored(
        fm.apply(
            None, with_container(deployment(), resources={}), manager="k", force=False, root_type=DEPLOYMENT, time=T0
        )
    )
    filled = with_container(deployment(), resources={"requests": {"cpu": "2"}})
    again = fm.apply(first, filled, manager="k", force=False, root_type=DEPLOYMENT, time=T1)
    assert containers(again.obj)[0]["resources"] == {"requests": {"cpu": "2"}}


def test_lists_keyed_on_two_fields_keep_both_items_and_name_both_keys():
    ports = [{"containerPort": 53, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]
    first = stored(
        fm.apply(
            None, with_container(deployment(), ports=ports), manager="k", force=False, root_type=DEPLOYMENT, time=T0
        )
    )
    again = fm.apply(
        first, with_container(deployment(), ports=ports), manager="k", force=False, root_type=DEPLOYMENT, time=T1
    )
    assert containers(again.obj)[0]["ports"] == ports
    owned = again.managed[0].to_json()["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert sorted(owned['k:{"name":"app"}']["f:ports"]) == [
        'k:{"containerPort":53,"protocol":"TCP"}',
        'k:{"containerPort":53,"protocol":"UDP"}',
    ]
    # A port that leaves its protocol out is keyed by the default, TCP.
    assert fm.field_set(with_container(deployment(), ports=[{"containerPort": 80}]), DEPLOYMENT) >= {
        (
            "f:spec",
            "f:template",
            "f:spec",
            "f:containers",
            'k:{"name":"app"}',
            "f:ports",
            'k:{"containerPort":80,"protocol":"TCP"}',
        )
    }


def test_null_fields_set_nothing():
    config = deployment(replicas=None)
    config["spec"]["replicas"] = None
    config["metadata"]["labels"] = None
    created = fm.apply(None, config, manager="k", force=False, root_type=DEPLOYMENT, time=T0)
    assert ("replicas" in created.obj["spec"], "labels" in created.obj["metadata"]) == (False, False)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            [{"name": "A"}, {"name": "A", "value": "2"}],
            '.spec.template.spec.containers[name="app"].env: duplicate entries for key [name="A"]',
        ),
        (
            [{"value": "1"}],
            '.spec.template.spec.containers[name="app"].env: element 0: associative list with keys has an element '
            'that omits key field "name" (and doesn\'t have default value)',
        ),
        (
            [{"name": ["A"]}],
            '.spec.template.spec.containers[name="app"].env: element 0: associative list with keys has an element '
            'that omits key field "name" (and doesn\'t have default value)',
        ),
    ],
)
def test_a_keyed_list_with_a_missing_or_repeated_key_is_invalid(env, message):
    live = stored(fm.apply(None, deployment(), manager="k", force=False, root_type=DEPLOYMENT, time=T0))
    with pytest.raises(fm.ApplyInvalid) as invalid:
        fm.apply(live, with_container(deployment(), env=env), manager="k", force=False, root_type=DEPLOYMENT, time=T1)
    assert str(invalid.value) == message


def test_fields_of_an_object_without_managed_fields_belong_to_before_first_apply():
    created = {**deployment(replicas=3), "status": {"replicas": 3}}
    with pytest.raises(fm.ApplyConflict) as conflict:
        fm.apply(created, deployment(replicas=1), manager="ci", force=False, root_type=DEPLOYMENT, time=T1)
    assert (
        str(conflict.value)
        == 'Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1 at 2026-12-04T10:01:00Z: .spec.replicas'
    )
    same = fm.apply(created, deployment(replicas=3), manager="ci", force=False, root_type=DEPLOYMENT, time=T1)
    owners = {e.manager: e.operation for e in same.managed}
    assert owners == {"before-first-apply": "Update", "ci": "Apply"}
    assert not any(path[0] == "f:status" for e in same.managed for path in e.fields)


def test_values_the_store_writes_differently_are_compared_as_stored():
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {"limits": {"cpu": 1000}},
    }
    first = stored(fm.apply(None, pool, manager="ci", force=False, root_type=None, time=T0))
    first["spec"]["limits"]["cpu"] = "1000"  # as the NodePool table keeps it

    def as_stored(obj):
        return {**obj, "spec": {**obj["spec"], "limits": {k: str(v) for k, v in obj["spec"]["limits"].items()}}}

    shared = fm.apply(first, pool, manager="cd", force=False, root_type=None, time=T1, normalized=as_stored)
    assert sorted(e.manager for e in shared.managed) == ["cd", "ci"]
    with pytest.raises(fm.ApplyConflict):
        fm.apply(first, pool, manager="cd", force=False, root_type=None, time=T1)


# Tracking from creation (issue 27, point 2) ----------------------------------------------------------------------


def test_a_created_object_is_its_creators_but_for_status():
    obj = {**deployment(), "status": {"replicas": 0}}
    [entry] = fm.created(obj, manager="kubectl-create", root_type=DEPLOYMENT, time=T0)
    assert (entry.manager, entry.operation, entry.api_version, entry.time) == (
        "kubectl-create",
        "Update",
        "apps/v1",
        T0,
    )
    assert ("f:spec", "f:replicas") in entry.fields
    assert ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}', "f:image") in entry.fields
    assert not any(path[0] == "f:status" for path in entry.fields)
    assert ("f:metadata", "f:name") not in entry.fields  # the server's


def test_update_managers_past_ten_are_merged_oldest_first_into_ancient_changes_per_version():
    """kube-apiserver's capManagersManager: the eleventh manager of updates merges the two oldest of its version."""
    managed = [
        fm.ManagedEntry(f"m{i:02}", fm.UPDATE, "apps/v1", f"2026-12-04T10:{i:02}:00Z", frozenset({("f:x", f"f:l{i}")}))
        for i in range(11)
    ]
    capped = fm.capped([*managed, fm.ManagedEntry("ci", fm.APPLY, "apps/v1", T0, frozenset({("f:spec",)}))])
    assert [e.manager for e in capped] == ["ancient-changes", *[f"m{i:02}" for i in range(2, 11)], "ci"]
    assert capped[0].fields == frozenset({("f:x", "f:l0"), ("f:x", "f:l1")})
    assert capped[0].time == "2026-12-04T10:01:00Z"
    assert fm.capped(managed[:10]) == managed[:10]


def test_an_untracked_object_is_given_its_last_client_side_applys_fields_and_the_rest_before_first_apply():
    applied = deployment(replicas=2)
    live = deployment(replicas=5, labels={"team": "web"})  # kubectl scale and a label since the apply
    live["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    entries = fm.as_if_tracked(live, applied, applier="kubectl-client-side-apply", root_type=DEPLOYMENT, time=T0)
    by_manager = {e.manager: e.fields for e in entries}
    record = ("f:metadata", "f:annotations", "f:kubectl.kubernetes.io/last-applied-configuration")
    assert record in by_manager["kubectl-client-side-apply"]
    assert ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}', "f:image") in by_manager[
        "kubectl-client-side-apply"
    ]
    assert {("f:spec", "f:replicas"), ("f:metadata", "f:labels", "f:team")} <= by_manager["before-first-apply"]
    assert not by_manager["kubectl-client-side-apply"] & by_manager["before-first-apply"]

"""Strategic merge patches and kubectl apply's three-way merge, as kube-apiserver and kubectl 1.32 do them."""

from __future__ import annotations

import json

import pytest

from provisioner.apimachinery.apply import LAST_APPLIED, applied, apply_patch_of, last_applied, with_last_applied
from provisioner.apimachinery.patch import PatchError, UnsupportedPatch, apply_patch


def pod(containers: list[dict[str, object]], **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}, "finalizers": ["a", "b"]},
        "spec": {"containers": containers, **spec},
    }


def test_containers_merge_by_name_and_an_unnamed_field_is_left_alone() -> None:
    obj = pod([{"name": "app", "image": "one"}, {"name": "side", "image": "two"}])
    patched = apply_patch(obj, {"spec": {"containers": [{"name": "side", "image": "three"}]}}, "strategic")
    assert patched["spec"]["containers"] == [{"name": "app", "image": "one"}, {"name": "side", "image": "three"}]
    assert obj["spec"]["containers"][1]["image"] == "two"  # the stored object is not changed


def test_a_delete_directive_removes_one_item_and_a_replace_directive_the_whole_list() -> None:
    obj = pod([{"name": "app", "image": "one"}, {"name": "side", "image": "two"}])
    deleted = apply_patch(obj, {"spec": {"containers": [{"name": "app", "$patch": "delete"}]}}, "strategic")
    assert deleted["spec"]["containers"] == [{"name": "side", "image": "two"}]
    replaced = apply_patch(obj, {"spec": {"containers": [{"$patch": "replace"}, {"name": "x"}]}}, "strategic")
    assert replaced["spec"]["containers"] == [{"name": "x"}]


def test_lists_without_a_merge_strategy_are_replaced() -> None:
    obj = pod([{"name": "app"}], tolerations=[{"key": "a", "operator": "Exists"}])
    patched = apply_patch(obj, {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}, "strategic")
    assert patched["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_finalizers_are_a_set_and_delete_from_primitive_list_removes_one() -> None:
    obj = pod([{"name": "app"}])
    patched = apply_patch(
        obj, {"metadata": {"finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}}, "strategic"
    )
    assert patched["metadata"]["finalizers"] == ["a", "c"]


def test_set_element_order_puts_the_named_items_first_in_its_order() -> None:
    obj = pod([{"name": "a"}, {"name": "b"}, {"name": "c"}])
    patch = {"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}], "containers": []}}
    assert [c["name"] for c in apply_patch(obj, patch, "strategic")["spec"]["containers"]] == ["c", "a", "b"]


def test_null_deletes_a_key_and_a_missing_merge_key_is_an_error() -> None:
    obj = pod([{"name": "app"}])
    assert "labels" not in apply_patch(obj, {"metadata": {"labels": None}}, "strategic")["metadata"]
    with pytest.raises(PatchError, match="does not contain declared merge key: name"):
        apply_patch(obj, {"spec": {"containers": [{"image": "x"}]}}, "strategic")
    with pytest.raises(PatchError, match='Unknown patch type: "explode"'):
        apply_patch(obj, {"spec": {"$patch": "explode"}}, "strategic")


def test_kubectl_taint_replaces_a_nodes_taints() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": [{"key": "a"}]}}
    patch = {"spec": {"taints": [{"key": "a"}, {"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}}
    assert apply_patch(node, patch, "strategic")["spec"]["taints"] == patch["spec"]["taints"]


def test_custom_resources_take_no_strategic_merge_but_json_merge_and_json_patch() -> None:
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "d"}, "spec": {"weight": 1}}
    with pytest.raises(UnsupportedPatch):
        apply_patch(pool, {"spec": {"weight": 2}}, "strategic")
    assert apply_patch(pool, {"spec": {"weight": 2}}, "merge")["spec"] == {"weight": 2}
    ops = [{"op": "replace", "path": "/spec/weight", "value": 3}, {"op": "add", "path": "/spec/limits", "value": {}}]
    assert apply_patch(pool, ops, "json")["spec"] == {"weight": 3, "limits": {}}
    with pytest.raises(PatchError, match="can't replace a non-existent object 'nope'"):
        apply_patch(pool, [{"op": "replace", "path": "/spec/nope", "value": 1}], "json")
    with pytest.raises(PatchError):
        apply_patch(pool, [{"op": "test", "path": "/spec/weight", "value": 9}], "json")


def deployment(replicas: int, labels: dict[str, str], containers: list[dict[str, object]]) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "inflate", "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "template": {"metadata": {"labels": {"app": "inflate"}}, "spec": {"containers": containers}},
        },
    }


def test_apply_keeps_what_others_set_and_deletes_what_the_manifest_dropped() -> None:
    first = deployment(0, {"team": "a", "tier": "web"}, [{"name": "inflate", "image": "pause"}])
    current = with_last_applied(first)
    # Someone else labels it and injects a sidecar; the manifest then drops the tier label.
    current["metadata"]["labels"]["owner"] = "vera"
    current["spec"]["template"]["spec"]["containers"].append({"name": "mesh", "image": "proxy"})
    second = deployment(0, {"team": "a"}, [{"name": "inflate", "image": "pause:2"}])
    result = applied(current, second)
    assert result is not None
    assert result["metadata"]["labels"] == {"team": "a", "owner": "vera"}
    assert result["spec"]["template"]["spec"]["containers"] == [
        {"name": "inflate", "image": "pause:2"},
        {"name": "mesh", "image": "proxy"},
    ]
    assert last_applied(result) == second


def test_apply_sets_the_replicas_the_manifest_says_as_kubectl_does_after_a_scale() -> None:
    manifest = deployment(0, {}, [{"name": "inflate"}])
    current = with_last_applied(manifest)
    current["spec"]["replicas"] = 5  # kubectl scale
    result = applied(current, manifest)
    assert result is not None and result["spec"]["replicas"] == 0


def test_applying_the_same_manifest_again_changes_nothing() -> None:
    manifest = deployment(3, {"team": "a"}, [{"name": "inflate"}])
    current = with_last_applied(manifest)
    current["metadata"]["resourceVersion"] = "7"
    current["status"] = {"replicas": 3}
    assert apply_patch_of(current, manifest) == {}
    assert applied(current, manifest) is None


def test_a_nodepool_keeps_the_approval_mode_the_dashboard_set_through_an_apply() -> None:
    manifest = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"disruption": {"consolidateAfter": "10s"}, "weight": 10},
    }
    current = with_last_applied(manifest)
    current["metadata"]["annotations"]["karpui.dev/approval-mode"] = "manual"
    edited = {**manifest, "spec": {"disruption": {"consolidateAfter": "30s"}}}
    result = applied(current, edited)
    assert result is not None
    assert result["metadata"]["annotations"]["karpui.dev/approval-mode"] == "manual"
    assert result["spec"] == {"disruption": {"consolidateAfter": "30s"}}  # weight was applied, then dropped
    assert json.loads(result["metadata"]["annotations"][LAST_APPLIED]) == edited

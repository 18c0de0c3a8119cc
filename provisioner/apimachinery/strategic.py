"""Strategic merge patch (`application/strategic-merge-patch+json`): the patch kubectl sends for built-in kinds.

Objects merge key by key and null deletes, as in a JSON merge patch; lists differ. A list the API declares with
`x-kubernetes-patch-strategy: merge` merges: a list of objects item by item on its merge key (a pod's containers by
`name`, a node's conditions by `type`), a list of scalars as a union (finalizers); every other list is replaced.
Directives, as kube-apiserver reads them: `$patch: replace|delete` on an object or a list item,
`$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>` and `$retainKeys`. Which fields merge comes from the
served OpenAPI document, extracted into strategies.json (karpui.kubeapi.openapi.vendor writes it). Kinds without
that table (custom resources) have no strategic merge: kube-apiserver answers 415, and so does `strategic_merge`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.apimachinery.mergepatch import merge_patch

_TABLE: dict[str, Any] = json.loads(Path(__file__).with_name("strategies.json").read_text())
ROOTS: dict[str, str] = _TABLE["roots"]
_TYPES: dict[str, dict[str, list[str]]] = _TABLE["types"]
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_MAP = "map:"  # a type name for a map whose values all have the type after it


class PatchError(ValueError):
    """A patch that cannot be applied to the object (kube-apiserver answers 422)."""


class UnsupportedPatch(ValueError):
    """A strategic merge patch of a kind that has none: a custom resource (415 Unsupported Media Type)."""


@dataclass(frozen=True, slots=True)
class Field:
    """How a field merges: the type of its value (or of each item or map value), and its patch strategy."""

    type: str
    container: str  # "", "list" or "map"
    strategy: str
    key: str

    @property
    def merges(self) -> bool:
        return "merge" in self.strategy.split(",")

    @property
    def value_type(self) -> str:
        """The type to merge the field's value as: a map's value type is looked up through the map."""
        return f"{_MAP}{self.type}" if self.container == "map" else self.type


def root_type(api_version: str, kind: str) -> str | None:
    """The schema type of a served built-in kind (`v1/Pod` -> io.k8s.api.core.v1.Pod), None for the rest."""
    return ROOTS.get(f"{api_version}/{kind}")


_LISTS: dict[str, dict[str, list[str]]] = _TABLE["lists"]


def list_rule(type_name: str, name: str) -> tuple[str, tuple[str, ...]]:
    """How server-side apply merges a list field: ("map", its keys), ("set", ()) or ("atomic", ()), the default
    (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`)."""
    rule = _LISTS.get(type_name, {}).get(name)
    return (rule[0], tuple(rule[1:])) if rule else ("atomic", ())


def field_of(type_name: str, name: str) -> Field | None:
    if type_name.startswith(_MAP):
        return Field(type_name[len(_MAP) :], "", "", "")
    rule = _TYPES.get(type_name, {}).get(name)
    return Field(*rule) if rule is not None else None


def apply_strategic(obj: dict[str, Any], patch: Any) -> dict[str, Any]:
    """`obj` after a strategic merge patch, by its kind's schema; UnsupportedPatch for a kind without one."""
    root = root_type(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if root is None:
        raise UnsupportedPatch(
            f"strategic merge patch is not supported for {obj.get('kind')} ({obj.get('apiVersion')}): "
            "use a JSON merge patch (application/merge-patch+json) or a JSON patch"
        )
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    return strategic_merge(obj, patch, root)


def strategic_merge(original: dict[str, Any], patch: dict[str, Any], type_name: str | None) -> dict[str, Any]:
    """`original` after `patch`, where `type_name` says how its fields merge (None: as a JSON merge patch).
    Neither argument is changed."""
    if type_name is None:
        merged: dict[str, Any] = merge_patch(original, patch)
        return merged
    result = _merge_map(original, patch, type_name)
    return result if result is not None else {}


def _merge_map(original: Any, patch: dict[str, Any], type_name: str) -> dict[str, Any] | None:
    """The merged object, or None when the patch says `$patch: delete`."""
    patch = dict(patch)
    directive = patch.pop("$patch", None)
    if directive == "replace":
        return strip_directives(patch)  # type: ignore[no-any-return]
    if directive == "delete":
        return None
    if directive is not None:
        raise PatchError(f'Unknown patch type: "{directive}" in map: {json.dumps(patch, sort_keys=True)}')
    result = dict(original) if isinstance(original, dict) else {}
    retain = patch.pop("$retainKeys", None)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("$retainKeys must be a list of field names")
        result = {key: value for key, value in result.items() if key in retain}
    orders = {key[len(_ORDER) :]: patch.pop(key) for key in list(patch) if key.startswith(_ORDER)}
    removals = {
        key[len(_DELETE_PRIMITIVE) :]: patch.pop(key) for key in list(patch) if key.startswith(_DELETE_PRIMITIVE)
    }
    for key, value in patch.items():
        field = field_of(type_name, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and (field is None or field.container != "list"):
            merged = _merge_map(result.get(key), value, field.value_type if field is not None else "")
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and field is not None and field.merges:
            current = result.get(key)
            result[key] = _merge_list(current if isinstance(current, list) else [], value, field, key)
        else:
            result[key] = strip_directives(value)
    for key, values in removals.items():
        if not isinstance(values, list):
            raise PatchError(f"{_DELETE_PRIMITIVE}{key} must be a list")
        result[key] = [item for item in result.get(key) or [] if item not in values]
    for key, order in orders.items():
        if not isinstance(order, list):
            raise PatchError(f"{_ORDER}{key} must be a list")
        field = field_of(type_name, key)
        if isinstance(result.get(key), list):
            result[key] = _in_order(result[key], order, field.key if field is not None else "")
    return result


def _merge_list(original: list[Any], patch: list[Any], field: Field, name: str) -> list[Any]:
    if not field.key or not all(isinstance(item, dict) for item in patch):
        return [*original, *(item for item in patch if item not in original)]  # a set of scalars: a union
    if any(item.get("$patch") == "replace" for item in patch):
        return [strip_directives(item) for item in patch if item.get("$patch") != "replace"]
    result = list(original)
    for item in patch:
        if field.key not in item:
            raise PatchError(
                f"map: {json.dumps(item, sort_keys=True)} does not contain declared merge key: {field.key}"
            )
        index = next(
            (i for i, old in enumerate(result) if isinstance(old, dict) and old.get(field.key) == item[field.key]),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        merged = _merge_map(result[index] if index is not None else {}, item, field.type)
        if merged is None:
            continue
        if index is None:
            result.append(merged)
        else:
            result[index] = merged
    return result


def _in_order(items: list[Any], order: list[Any], key: str) -> list[Any]:
    """`items` with those the order names first, in its order; the others after, as they were."""

    def identity(item: Any) -> Any:
        return json.dumps(item.get(key) if key and isinstance(item, dict) else item, sort_keys=True)

    rank = {identity(item): position for position, item in enumerate(order)}
    return sorted(items, key=lambda item: rank.get(identity(item), len(rank)))


def strip_directives(value: Any) -> Any:
    """A patch value without `$` directives, as stored when it replaces what was there."""
    if isinstance(value, dict):
        return {key: strip_directives(item) for key, item in value.items() if not key.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(item) for item in value]
    return value


# kubectl apply's three-way patch --------------------------------------------------------------------------------


def three_way_patch(
    original: dict[str, Any], modified: dict[str, Any], current: dict[str, Any], type_name: str | None
) -> dict[str, Any]:
    """The patch kubectl apply sends: what `modified` changes against `current`, plus deletions of what the last
    applied configuration (`original`) had and `modified` no longer has. Fields nobody applied (set by the
    dashboard, a controller, `kubectl scale` or `label`) are kept: apply owns only what it applied."""
    patch: dict[str, Any] = {}
    for key in original:
        if key not in modified and key in current:
            patch[key] = None
    for key, wanted in modified.items():
        field = field_of(type_name, key) if type_name is not None else None
        now, before = current.get(key), original.get(key)
        if isinstance(wanted, dict) and isinstance(now, dict) and (field is None or field.container != "list"):
            child = field.value_type if field is not None else ("" if type_name is not None else None)
            nested = three_way_patch(before if isinstance(before, dict) else {}, wanted, now, child)
            if nested:
                patch[key] = nested
        elif isinstance(wanted, list) and isinstance(now, list) and field is not None and field.merges:
            patch.update(_list_patch(key, before if isinstance(before, list) else [], wanted, now, field))
        elif wanted != now:
            patch[key] = wanted
    return patch


def _list_patch(key: str, original: list[Any], modified: list[Any], current: list[Any], field: Field) -> dict[str, Any]:
    if not field.key or not all(isinstance(item, dict) for item in [*modified, *current]):
        added = [item for item in modified if item not in current]
        gone = [item for item in original if item not in modified and item in current]
        return {**({key: added} if added else {}), **({f"{_DELETE_PRIMITIVE}{key}": gone} if gone else {})}
    merge_key = field.key
    now = {item.get(merge_key): item for item in current}
    before = {item.get(merge_key): item for item in original if isinstance(item, dict)}
    wanted_keys = [item.get(merge_key) for item in modified]
    items: list[Any] = [
        {"$patch": "delete", merge_key: value} for value in before if value not in wanted_keys and value in now
    ]
    for item in modified:
        value = item.get(merge_key)
        if value not in now:
            items.append(item)
            continue
        old = before.get(value)
        nested = three_way_patch(old if isinstance(old, dict) else {}, item, now[value], field.type)
        if nested:
            items.append({merge_key: value, **nested})
    if not items and [item.get(merge_key) for item in current if item.get(merge_key) in wanted_keys] == wanted_keys:
        return {}
    return {f"{_ORDER}{key}": [{merge_key: value} for value in wanted_keys], key: items}

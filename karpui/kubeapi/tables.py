"""Server-side printing: the `Table` (meta.k8s.io/v1) kubectl asks for with `Accept: application/json;as=Table;...`,
built from the registry's columns, so `kubectl get` prints what `karp get` prints (plus the columns the lab never
fills, which kubectl always shows)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from karpui.kinds.printers import Column
from karpui.kinds.resources import Resource
from provisioner.cluster.objects import Obj

# kube-apiserver's own words for the two columns every table has.
_DESCRIPTIONS = {
    "Name": "Name must be unique within a namespace. Is required when creating resources, although some resources "
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "Age": "CreationTimestamp is a timestamp representing the server time when this object was created.",
}


def wants_table(accept: str) -> bool:
    """Whether the client asked for a Table (kubectl get does; -o json/yaml do not)."""
    return any("as=Table" in part.replace(" ", "") for part in accept.split(","))


def wants_metadata(accept: str) -> bool:
    """Whether the client asked for metadata only (client-go's metadata informers, the garbage collector)."""
    return any("as=PartialObjectMetadata" in part.replace(" ", "") for part in accept.split(","))


def metadata_only(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def column_definitions(resource: Resource, version: str) -> list[dict[str, Any]]:
    return [
        {
            "name": column.header,
            "type": column.type,
            "format": "name" if column.header == "Name" and index == 0 else "",
            "description": _DESCRIPTIONS.get(column.header, ""),
            "priority": 1 if column.wide_only else 0,
        }
        for index, column in enumerate(resource.columns_at(version))
    ]


def _cell(column: Column, obj: Obj, now: datetime) -> Any:
    text = column.value(obj, now)
    if text in ("", None):
        return None  # kubectl prints <none>
    if column.type == "integer":
        try:
            return int(text)
        except ValueError:
            return text
    return text


def row_object(obj: Obj, include: str) -> Obj | None:
    """What a row carries: the object's metadata (kubectl's default: enough for -A, --show-labels, -L), the whole
    object, or nothing."""
    if include == "None":
        return None
    if include == "Object":
        return obj
    return metadata_only(obj)


def rows(resource: Resource, version: str, items: list[Obj], now: datetime, include: str) -> list[dict[str, Any]]:
    columns = resource.columns_at(version)
    result = []
    for obj in items:
        row: dict[str, Any] = {"cells": [_cell(column, obj, now) for column in columns]}
        shown = row_object(obj, include)
        if shown is not None:
            row["object"] = shown
        result.append(row)
    return result


def table(
    resource: Resource,
    version: str,
    items: list[Obj],
    now: datetime,
    *,
    include: str = "Metadata",
    metadata: dict[str, Any] | None = None,
    headers: bool = True,
) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata or {}}
    body["columnDefinitions"] = column_definitions(resource, version) if headers else None
    body["rows"] = rows(resource, version, items, now, include)
    return body

"""Strict field validation of core Kubernetes objects, as the API server's `fieldValidation=Strict` does it.

Every field of a Pod, Node, Deployment, ... must be one its API type declares, holding the right shape (object,
list, scalar), wherever it is nested. The field lists come from the official `kubernetes` client's models, which are
generated from the API server's OpenAPI document; `tests/security/kubernetes_types.py` writes them into
kubernetes_types.json (this package may not import the client) and a test keeps the two in step.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from provisioner.manifests import fields as f
from provisioner.manifests.errors import DecodeError, ManifestError

_SCHEMA: dict[str, Any] = json.loads(Path(__file__).with_name("kubernetes_types.json").read_text())
KINDS: dict[str, str] = _SCHEMA["kinds"]
_TYPES: dict[str, dict[str, str]] = _SCHEMA["types"]
_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(str, (.+)\)$")


def check_fields(doc: dict[str, Any]) -> None:
    """Refuse the first field `doc`'s API type does not declare, or of the wrong shape, naming its path."""
    root = KINDS.get(f"{doc.get('apiVersion')}/{doc.get('kind')}")
    if root is not None:
        _check(doc, root, "")


def check_type(value: Any, kind: str, path: str) -> None:
    """Refuse the first field of `value`, an object of API type `kind` (V1PodTemplateSpec), that it does not declare."""
    _check(value, kind, path)


def _check(value: Any, kind: str, path: str) -> None:
    if value is None:  # null is "not set" for every field, as in JSON merge semantics
        return
    if list_of := _LIST.match(kind):
        for index, item in enumerate(f.sequence(value, path)):
            _check(item, list_of.group(1), f.join(path, index))
    elif dict_of := _DICT.match(kind):
        for key, item in f.mapping(value, path).items():
            _check(item, dict_of.group(1), f.join(path, str(key)))
    elif kind in _TYPES:
        declared = _TYPES[kind]
        for key, item in f.mapping(value, path, allowed=declared).items():
            if declared[key] == "str" and isinstance(item, int | float) and not isinstance(item, bool):
                _number_in_a_string_field(item, kind, str(key), f.join(path, str(key)))
            _check(item, declared[key], f.join(path, str(key)))
    else:
        _scalar(value, kind, path)


# Fields the client types `str` that hold quantities, which the API server reads from a number too (`cpu: 2` in
# resources maps is a map's value, not a field, and is not checked here).
_QUANTITY_FIELDS = {"sizeLimit", "storage", "capacity", "amount"}


def _number_in_a_string_field(value: Any, struct: str, name: str, path: str) -> None:
    """A number where Go has a string field: kube-apiserver's decoder refuses the object (a DecodeError)."""
    if name in _QUANTITY_FIELDS:
        return
    go_type = "types.UID" if name == "uid" else "string"
    go_path = re.sub(r"\[[0-9]+\]", "", path)
    raise DecodeError(
        f"json: cannot unmarshal number into Go struct field {re.sub(r'^V[0-9]+(alpha|beta)?[0-9]*', '', struct)}."
        f"{go_path} of type {go_type}",
        field=path,
    )


def _scalar(value: Any, kind: str, path: str) -> None:
    """Scalars by their JSON type. A `str` may hold a number where it is a map's value: quantities (resources) are
    typed `str` in the client, and the API server reads `cpu: 2` as a quantity."""
    if kind == "object":  # IntOrString (targetPort, maxUnavailable) and free-form fields
        return
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:  # str, datetime, date
        ok = isinstance(value, str | int | float) and not isinstance(value, bool)
    if not ok:
        expected = {"bool": "a boolean", "int": "an integer", "float": "a number"}.get(kind, "a string")
        raise ManifestError(f"expected {expected}, got {f.type_name(value)}", field=path)

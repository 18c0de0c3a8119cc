"""Small typed readers for manifest fields; each raises ManifestError naming the field's path."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from provisioner.manifests.errors import ManifestError
from provisioner.quantity import QuantityError, Resources, format_quantity, parse_resources

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_DNS_LABEL_ONLY = re.compile(rf"^{_DNS_LABEL}$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# Kubernetes' limit on all of an object's annotations together (keys and values), TotalAnnotationSizeLimitB.
MAX_ANNOTATIONS_BYTES = 256 * 1024
INT32 = (-(2**31), 2**31 - 1)

METADATA_FIELDS = frozenset(
    {
        "name",
        "namespace",
        "generateName",
        "labels",
        "annotations",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def mapping(value: Any, path: str, *, allowed: Iterable[str] | None = None, required: bool = False) -> dict[str, Any]:
    """A mapping (an absent value is {}), refusing keys outside `allowed`."""
    if value is None:
        if required:
            raise ManifestError("Required value", field=path)
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(f"expected an object, got {type_name(value)}", field=path)
    if allowed is not None:
        allowed = frozenset(allowed)
        for key in value:
            if key not in allowed:
                raise ManifestError(f'unknown field "{key}"', field=join(path, str(key)))
    return dict(value)


def sequence(value: Any, path: str, *, max_items: int | None = None) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(f"expected a list, got {type_name(value)}", field=path)
    if max_items is not None and len(value) > max_items:
        raise ManifestError(f"must have at most {max_items} items", field=path)
    return value


def string(value: Any, path: str, *, required: bool = False, pattern: re.Pattern[str] | None = None) -> str | None:
    if value is None or value == "":
        if required:
            raise ManifestError("Required value", field=path)
        return None
    if not isinstance(value, str):
        raise ManifestError(f"expected a string, got {type_name(value)}", field=path)
    if pattern is not None and not pattern.match(value):
        raise ManifestError(f"invalid value {value!r}: must match {pattern.pattern}", field=path)
    return value


def integer(value: Any, path: str, *, minimum: int | None = None, maximum: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(f"expected an integer, got {type_name(value)}", field=path)
    if minimum is not None and value < minimum:
        raise ManifestError(f"must be greater than or equal to {minimum}, got {value}", field=path)
    if maximum is not None and value > maximum:
        raise ManifestError(f"must be less than or equal to {maximum}, got {value}", field=path)
    return value


def resources(value: Any, path: str, *, numbers: bool = True) -> Resources:
    """A ResourceList (requests, limits, capacity): quantities, none negative, as the API server requires. A JSON
    number is a quantity, as in the API's own types; `numbers=False` refuses one with a fraction, as a custom
    resource's int-or-string field does."""
    try:
        result = parse_resources(mapping(value, path), field=path, numbers=numbers)
    except QuantityError as error:
        field, _, message = str(error).partition(": ")
        raise ManifestError(message, field=field) from None
    for name, amount in result.items():
        if amount < 0:
            raise ManifestError(
                f"must be greater than or equal to 0, got {format_quantity(amount, name)}", field=join(path, name)
            )
    return result


def string_map(value: Any, path: str) -> dict[str, str]:
    result = {}
    for key, item in mapping(value, path).items():
        if not isinstance(item, str):
            raise ManifestError(f"expected a string, got {type_name(item)}", field=join(path, str(key)))
        result[str(key)] = item
    return result


def qualified_name(key: str, path: str, *, what: str = "key") -> None:
    """Kubernetes' qualified name: optional DNS-subdomain prefix, a slash, a name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        # validation.IsQualifiedName: "/name" has a slash, so a prefix, and it is empty.
        raise ManifestError(f"invalid {what} {key!r}: prefix part must be non-empty", field=path)
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ManifestError(f"invalid {what} {key!r}: prefix must be a DNS subdomain", field=path)
    if not name or len(name) > 63 or not _NAME_PART.match(name):
        raise ManifestError(
            f"invalid {what} {key!r}: name part must be at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric",
            field=path,
        )


def label_value(value: str, path: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ManifestError(
            f"invalid label value {value!r}: at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric",
            field=path,
        )


def object_name(value: Any, path: str, *, max_length: int = 253) -> str:
    """A lowercase RFC 1123 subdomain, as most objects' names are."""
    name = string(value, path, required=True)
    assert name is not None
    if len(name) > max_length:
        raise ManifestError(f"must be no more than {max_length} characters, got {len(name)}", field=path)
    if not _DNS_SUBDOMAIN.match(name):
        raise ManifestError(
            f"invalid name {name!r}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character",
            field=path,
        )
    return name


def dns_label(value: Any, path: str, *, what: str = "name") -> str:
    """A lowercase RFC 1123 label (a namespace, a Namespace's name): at most 63 characters, no dots."""
    text = string(value, path, required=True)
    assert text is not None
    if len(text) > 63 or not _DNS_LABEL_ONLY.match(text):
        raise ManifestError(
            f"invalid {what} {text!r}: a lowercase RFC 1123 label must consist of at most 63 lower case "
            "alphanumeric characters or '-', and must start and end with an alphanumeric character",
            field=path,
        )
    return text


def label_map(value: Any, path: str) -> dict[str, str]:
    """A label map: qualified-name keys, values of at most 63 characters (Kubernetes' ValidateLabels)."""
    result = string_map(value, path)
    for key, item in result.items():
        qualified_name(key, join(path, key))
        label_value(item, join(path, key))
    return result


def annotation_map(value: Any, path: str) -> dict[str, str]:
    """An annotation map: qualified-name keys (case-insensitive), at most 256 KiB all together."""
    result = string_map(value, path)
    total = 0
    for key, item in result.items():
        qualified_name(key.lower(), join(path, key))
        total += len(key.encode()) + len(item.encode())
    if total > MAX_ANNOTATIONS_BYTES:
        raise ManifestError(f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes, got {total}", field=path)
    return result


def metadata(doc: Mapping[str, Any], *, max_name: int = 253) -> dict[str, Any]:
    meta = mapping(doc.get("metadata"), "metadata", allowed=METADATA_FIELDS, required=True)
    object_name(meta.get("name"), "metadata.name", max_length=max_name)
    if meta.get("namespace") is not None:
        dns_label(meta["namespace"], "metadata.namespace", what="namespace")
    label_map(meta.get("labels"), "metadata.labels")
    annotation_map(meta.get("annotations"), "metadata.annotations")
    return meta


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "integer", float: "number"}.get(
        type(value), type(value).__name__
    )

"""kube-apiserver's validation of the built-in objects the lab stores, in its words: what karpui's field checks
(manifests.cluster) let through and kube-apiserver refuses. Ported from k8s.io/kubernetes pkg/apis/core/validation
(ValidatePodSpec: containers, ports, host ports, env, volumes, policies, nodeName), pkg/apis/apps/validation
(Deployment, ReplicaSet and DaemonSet specs and strategies) and k8s.io/apimachinery's ObjectMeta validation (owner
references, finalizers): each error reads `spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "-5%": ...`,
and several are given together, `[a, b]`, as kube-apiserver's 422 lists them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from provisioner.manifests.errors import DecodeError, ManifestError

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE = re.compile(rf"^{_DNS_LABEL}$")
_DNS_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PERCENT_RE = re.compile(r"^[0-9]+%$")
_PORT_NAME_RE = re.compile(r"^[-a-z0-9]+$")
_PORT_NAME_LETTER_RE = re.compile(r"[a-z]")
_ENV_NAME_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used "
    "for validation is '[0-9]+%')"
)
ENV_NAME_MESSAGE = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must "
    "not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is "
    "'[-._a-zA-Z][-._a-zA-Z0-9]*')"
)
PORT_RANGE_MESSAGE = "must be between 1 and 65535, inclusive"
NONNEGATIVE_MESSAGE = "must be greater than or equal to 0"
INT32_MAX = 2**31 - 1

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """`text` as Go's %q (strconv.Quote) prints it, which kube-apiserver's field errors quote values with."""
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return "".join(out) + '"'


class GoStruct(dict[str, Any]):
    """A Go struct's fields in their declared order (json.Marshal keeps a struct's order, sorts a map's keys)."""


def go_value(value: Any) -> str:
    """A bad value as field.Error prints it: numbers and booleans plainly, strings quoted, anything else as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=not isinstance(value, GoStruct))


class FieldErrors:
    """A field.ErrorList: each error as `path: body`, raised together (the first alone when there is one)."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.errors.append((path, f"Invalid value: {go_value(value)}: {detail}"))

    def required(self, path: str, detail: str = "") -> None:
        self.errors.append((path, "Required value" + (f": {detail}" if detail else "")))

    def duplicate(self, path: str, value: Any) -> None:
        self.errors.append((path, f"Duplicate value: {go_value(value)}"))

    def not_found(self, path: str, value: Any) -> None:
        self.errors.append((path, f"Not found: {go_value(value)}"))

    def not_supported(self, path: str, value: Any, supported: Sequence[str]) -> None:
        listed = ", ".join(go_quote(s) for s in supported)
        self.errors.append((path, f"Unsupported value: {go_value(value)}: supported values: {listed}"))

    def forbidden(self, path: str, detail: str) -> None:
        self.errors.append((path, f"Forbidden: {detail}"))

    def raise_any(self) -> None:
        if not self.errors:
            return
        if len(self.errors) == 1:
            path, body = self.errors[0]
            raise ManifestError(body, field=path)
        raise ManifestError("[" + ", ".join(f"{path}: {body}" for path, body in self.errors) + "]")


_INT32_FIELDS = {
    "Deployment": (
        "DeploymentSpec",
        ("replicas", "minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"),
    ),
    "ReplicaSet": ("ReplicaSetSpec", ("replicas", "minReadySeconds")),
    "DaemonSet": ("DaemonSetSpec", ("minReadySeconds", "revisionHistoryLimit")),
}


def _int32(value: Any, struct: str, path: str) -> None:
    """A number Go cannot hold in its int32 field: the object cannot even be decoded (a DecodeError)."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**31) <= value <= INT32_MAX:
        go_path = re.sub(r"\[[0-9]+\]", "", path)
        raise DecodeError(
            f"json: cannot unmarshal number {value} into Go struct field {struct}.{go_path} of type int32", field=path
        )


def _decodable(doc: Mapping[str, Any]) -> None:
    kind = str(doc.get("kind"))
    spec = doc.get("spec") or {}
    if kind in _INT32_FIELDS:
        struct, names = _INT32_FIELDS[kind]
        for name in names:
            _int32(spec.get(name), struct, f"spec.{name}")
    pod_spec, path = (
        (spec, "spec") if kind == "Pod" else ((spec.get("template") or {}).get("spec") or {}, "spec.template.spec")
    )
    for section in ("containers", "initContainers"):
        for index, container in enumerate(pod_spec.get(section) or []):
            for number, port in enumerate(
                (container or {}).get("ports") or [] if isinstance(container, Mapping) else []
            ):
                if isinstance(port, Mapping):
                    for name in ("containerPort", "hostPort"):
                        _int32(port.get(name), "ContainerPort", f"{path}.{section}[{index}].ports[{number}].{name}")


def validate_api_object(doc: Mapping[str, Any]) -> None:
    """kube-apiserver's validation of `doc` (already checked field by field for shape), raising what it refuses."""
    _decodable(doc)
    errors = FieldErrors()
    _object_meta(doc.get("metadata") or {}, errors)
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        _pod_spec(spec, "spec", errors)
    elif kind in ("Deployment", "ReplicaSet", "DaemonSet"):
        _workload(str(kind), spec, errors)
    elif kind == "Node":
        _node_taints(spec.get("taints") or [], errors)
    errors.raise_any()


# ObjectMeta --------------------------------------------------------------------------------------------------------


def _object_meta(meta: Mapping[str, Any], errors: FieldErrors) -> None:
    controller = ""
    references = meta.get("ownerReferences") or []
    for index, reference in enumerate(references):
        path = f"metadata.ownerReferences[{index}]"
        if not isinstance(reference, Mapping):
            continue
        version = reference.get("apiVersion") or ""
        if not version:
            errors.required(f"{path}.apiVersion", "must not be empty")
        elif version.count("/") > 1 or version.endswith("/") or version.startswith("/"):
            errors.invalid(f"{path}.apiVersion", version, "must be <group>/<version> or <version>")
        for name in ("kind", "name", "uid"):
            if not reference.get(name):
                errors.required(f"{path}.{name}", "must not be empty")
        if reference.get("controller") is True:
            current = f"{reference.get('kind', '')}/{reference.get('name', '')}"
            if controller:
                errors.invalid(
                    "metadata.ownerReferences",
                    references,
                    f'Only one reference can have Controller set to true. Found "true" in references for {controller} '
                    f"and {current}",
                )
            else:
                controller = current
    for finalizer in meta.get("finalizers") or []:
        for message in qualified_name_problems(str(finalizer)):
            errors.invalid("metadata.finalizers", finalizer, message)


def qualified_name_problems(value: str) -> list[str]:
    """validation.IsQualifiedName's messages for `value` (empty: it is one)."""
    prefix, slash, name = value.rpartition("/")
    problems = []
    if slash and not prefix:
        problems.append("prefix part must be non-empty")
    elif slash:
        problems += [f"prefix part {m}" for m in dns_subdomain_problems(prefix)]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 bytes")
    if name and not _QUALIFIED_NAME_RE.match(name):
        problems.append(QUALIFIED_NAME_MESSAGE)
    return problems


def dns_subdomain_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 253:
        problems.append("must be no more than 253 characters")
    if not _DNS_SUBDOMAIN_RE.match(value):
        problems.append(DNS1123_SUBDOMAIN_MESSAGE)
    return problems


def dns_label_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _DNS_LABEL_RE.match(value):
        problems.append(DNS1123_LABEL_MESSAGE)
    return problems


# PodSpec -------------------------------------------------------------------------------------------------------------

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")


def _pod_spec(spec: Mapping[str, Any], path: str, errors: FieldErrors) -> None:
    volumes = _volumes(spec.get("volumes") or [], f"{path}.volumes", errors)
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    init = [c for c in spec.get("initContainers") or [] if isinstance(c, Mapping)]
    names: set[str] = set()  # an init container may not take a container's name either
    for section, listed in (("containers", containers), ("initContainers", init)):
        for index, container in enumerate(listed):
            here = f"{path}.{section}[{index}]"
            _container(container, here, volumes, errors)
            name = container.get("name") or ""
            if name in names:
                errors.duplicate(f"{here}.name", name)
            names.add(name)
    host_ports: set[str] = set()
    for section, listed in (("containers", containers), ("initContainers", init)):
        for index, container in enumerate(listed):
            for number, port in enumerate(container.get("ports") or []):
                if not isinstance(port, Mapping) or not port.get("hostPort"):
                    continue
                key = f"{port.get('protocol') or 'TCP'}/{port.get('hostIP') or ''}/{port['hostPort']}"
                if key in host_ports:
                    errors.duplicate(f"{path}.{section}[{index}].ports[{number}].hostPort", key)
                host_ports.add(key)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in RESTART_POLICIES:
        errors.not_supported(f"{path}.restartPolicy", policy, RESTART_POLICIES)
    dns = spec.get("dnsPolicy")
    if dns is not None and dns not in DNS_POLICIES:
        errors.not_supported(f"{path}.dnsPolicy", dns, DNS_POLICIES)
    for field in ("serviceAccountName",):
        if spec.get(field):
            for message in dns_subdomain_problems(str(spec[field])):
                errors.invalid(f"{path}.{field}", spec[field], message)
    if spec.get("nodeName"):
        for message in dns_subdomain_problems(str(spec["nodeName"])):
            errors.invalid(f"{path}.nodeName", spec["nodeName"], message)
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= INT32_MAX:
        errors.invalid(f"{path}.activeDeadlineSeconds", deadline, f"must be between 1 and {INT32_MAX}, inclusive")
    for field in ("hostname", "subdomain"):
        if spec.get(field):
            for message in dns_label_problems(str(spec[field])):
                errors.invalid(f"{path}.{field}", spec[field], message)
    if spec.get("priorityClassName"):
        for message in dns_subdomain_problems(str(spec["priorityClassName"])):
            errors.invalid(f"{path}.priorityClassName", spec["priorityClassName"], message)


def _volumes(volumes: Sequence[Any], path: str, errors: FieldErrors) -> set[str]:
    names: set[str] = set()
    for index, volume in enumerate(volumes):
        if not isinstance(volume, Mapping):
            continue
        name = volume.get("name") or ""
        here = f"{path}[{index}].name"
        if not name:
            errors.required(here)
        else:
            for message in dns_label_problems(name):
                errors.invalid(here, name, message)
        if name in names:
            errors.duplicate(here, name)
        names.add(name)
    return names


def _container(container: Mapping[str, Any], path: str, volumes: set[str], errors: FieldErrors) -> None:
    name = container.get("name") or ""
    if not name:
        errors.required(f"{path}.name")
    else:
        for message in dns_label_problems(name):
            errors.invalid(f"{path}.name", name, message)
    if not container.get("image"):
        errors.required(f"{path}.image")
    port_names: set[str] = set()
    for index, port in enumerate(container.get("ports") or []):
        if not isinstance(port, Mapping):
            continue
        here = f"{path}.ports[{index}]"
        if port.get("name"):
            problems = port_name_problems(str(port["name"]))
            for message in problems:
                errors.invalid(f"{here}.name", port["name"], message)
            if not problems and port["name"] in port_names:
                errors.duplicate(f"{here}.name", port["name"])
            port_names.add(port["name"])
        number = port.get("containerPort")
        if not number:
            errors.required(f"{here}.containerPort")
        elif isinstance(number, int) and not 1 <= number <= 65535:
            errors.invalid(f"{here}.containerPort", number, PORT_RANGE_MESSAGE)
        host = port.get("hostPort")
        if isinstance(host, int) and host and not 1 <= host <= 65535:
            errors.invalid(f"{here}.hostPort", host, PORT_RANGE_MESSAGE)
        protocol = port.get("protocol")
        if protocol is not None and protocol not in PROTOCOLS:
            errors.not_supported(f"{here}.protocol", protocol, PROTOCOLS)
    for index, variable in enumerate(container.get("env") or []):
        if not isinstance(variable, Mapping):
            continue
        here = f"{path}.env[{index}].name"
        env_name = variable.get("name") or ""
        if not env_name:
            errors.required(here)
        elif not _ENV_NAME_RE.match(env_name):
            errors.invalid(here, env_name, ENV_NAME_MESSAGE)
    for index, mount in enumerate(container.get("volumeMounts") or []):
        if not isinstance(mount, Mapping):
            continue
        here = f"{path}.volumeMounts[{index}]"
        mount_name = mount.get("name") or ""
        if not mount_name:
            errors.required(f"{here}.name")
        elif mount_name not in volumes:
            errors.not_found(f"{here}.name", mount_name)
        if not mount.get("mountPath"):
            errors.required(f"{here}.mountPath")
    pull = container.get("imagePullPolicy")
    if pull is not None and pull not in PULL_POLICIES:
        errors.not_supported(f"{path}.imagePullPolicy", pull, PULL_POLICIES)


def port_name_problems(name: str) -> list[str]:
    """validation.IsValidPortName (an IANA_SVC_NAME)."""
    problems = []
    if len(name) > 15:
        problems.append("must be no more than 15 characters")
    if not _PORT_NAME_RE.match(name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens")
    if not _PORT_NAME_LETTER_RE.search(name):
        problems.append("must contain at least one letter (a-z)")
    if name.startswith("-") or name.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


# Workloads -----------------------------------------------------------------------------------------------------------


def _workload(kind: str, spec: Mapping[str, Any], errors: FieldErrors) -> None:
    template = spec.get("template") or {}
    template_spec = template.get("spec") or {}
    _pod_spec(template_spec, "spec.template.spec", errors)
    policy = template_spec.get("restartPolicy")
    if policy is not None and policy != "Always":
        errors.not_supported("spec.template.spec.restartPolicy", policy, ("Always",))
    if kind == "DaemonSet" and template_spec.get("activeDeadlineSeconds") is not None:
        errors.forbidden(
            "spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in DaemonSet is not Supported"
        )
    elif kind != "DaemonSet" and template_spec.get("activeDeadlineSeconds") is not None:
        errors.forbidden(
            "spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in ReplicaSet is not Supported"
        )
    if kind == "Deployment":
        _deployment_strategy(spec.get("strategy") or {}, errors)
    elif kind == "DaemonSet":
        _daemonset_strategy(spec.get("updateStrategy") or {}, errors)
    _nonnegative(spec, "minReadySeconds", errors)
    if kind != "ReplicaSet":
        _nonnegative(spec, "revisionHistoryLimit", errors)
    deadline = spec.get("progressDeadlineSeconds", 600)  # validated after kube-apiserver's default
    if kind == "Deployment" and isinstance(deadline, int):
        _nonnegative(spec, "progressDeadlineSeconds", errors)
        minimum = spec.get("minReadySeconds") or 0
        if isinstance(minimum, int) and deadline <= minimum:
            errors.invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds")


def _nonnegative(spec: Mapping[str, Any], name: str, errors: FieldErrors) -> None:
    value = spec.get(name)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        errors.invalid(f"spec.{name}", value, NONNEGATIVE_MESSAGE)


def _int_or_percent(value: Any, path: str, errors: FieldErrors) -> int:
    """ValidatePositiveIntOrPercent; the value as a number (a percentage's number), 0 when it is not one."""
    if isinstance(value, str):
        if not _PERCENT_RE.match(value):
            errors.invalid(path, value, PERCENT_MESSAGE)
            return 0
        return int(value[:-1])
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            errors.invalid(path, value, NONNEGATIVE_MESSAGE)
        return value
    return 0


def _not_over_100_percent(value: Any, path: str, errors: FieldErrors) -> None:
    if isinstance(value, str) and _PERCENT_RE.match(value) and int(value[:-1]) > 100:
        errors.invalid(path, value, "must not be greater than 100%")


def _deployment_strategy(strategy: Mapping[str, Any], errors: FieldErrors) -> None:
    kind = strategy.get("type", "RollingUpdate")
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            errors.forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")
    elif kind == "RollingUpdate":
        rolling = rolling if isinstance(rolling, Mapping) else {}
        path = "spec.strategy.rollingUpdate"
        unavailable = rolling.get("maxUnavailable", "25%")
        surge = rolling.get("maxSurge", "25%")
        unavailable_value = _int_or_percent(unavailable, f"{path}.maxUnavailable", errors)
        surge_value = _int_or_percent(surge, f"{path}.maxSurge", errors)
        if unavailable_value == 0 and surge_value == 0:
            errors.invalid(f"{path}.maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0")
        _not_over_100_percent(unavailable, f"{path}.maxUnavailable", errors)
    else:
        # NotSupported with the internal strategy struct as its value, which Go prints as JSON of its fields.
        errors.not_supported("spec.strategy", _strategy_struct(kind, rolling), ("Recreate", "RollingUpdate"))


def _strategy_struct(kind: Any, rolling: Any) -> GoStruct:
    """A strategy as the internal type kube-apiserver's NotSupported prints (its fields, in their order)."""
    if isinstance(rolling, Mapping):
        rolling = GoStruct(MaxUnavailable=rolling.get("maxUnavailable"), MaxSurge=rolling.get("maxSurge"))
    return GoStruct(Type=kind, RollingUpdate=rolling)


def _daemonset_strategy(strategy: Mapping[str, Any], errors: FieldErrors) -> None:
    kind = strategy.get("type", "RollingUpdate")
    rolling = strategy.get("rollingUpdate")
    if kind == "OnDelete":
        return
    if kind != "RollingUpdate":
        errors.not_supported("spec.updateStrategy", _strategy_struct(kind, rolling), ("RollingUpdate", "OnDelete"))
        return
    rolling = rolling if isinstance(rolling, Mapping) else {}
    path = "spec.updateStrategy.rollingUpdate"
    unavailable = rolling.get("maxUnavailable", 1)
    surge = rolling.get("maxSurge", 0)
    has_unavailable = _int_or_percent(unavailable, f"{path}.maxUnavailable", errors) != 0
    has_surge = _int_or_percent(surge, f"{path}.maxSurge", errors) != 0
    _not_over_100_percent(unavailable, f"{path}.maxUnavailable", errors)
    _not_over_100_percent(surge, f"{path}.maxSurge", errors)
    if has_unavailable and has_surge:
        errors.invalid(f"{path}.maxSurge", surge, "may not be set when maxUnavailable is non-zero")
    elif not has_unavailable and not has_surge:
        errors.required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0")


# Node ----------------------------------------------------------------------------------------------------------------


def _node_taints(taints: Sequence[Any], errors: FieldErrors) -> None:
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(taints):
        if not isinstance(taint, Mapping):
            continue
        key = (str(taint.get("key", "")), str(taint.get("effect", "")))
        if key in seen:
            value = {"key": key[0], "effect": key[1], **({"value": taint["value"]} if taint.get("value") else {})}
            errors.duplicate(f"spec.taints[{index}]", value)
        seen.add(key)

"""Karpenter's operator options that change decisions (pkg/operator/options/options.go at v1.14): FEATURE_GATES with
its defaults, PREFERENCE_POLICY, MIN_VALUES_POLICY, IGNORE_DRA_REQUESTS and the provisioning batch window
(BATCH_IDLE_DURATION, BATCH_MAX_DURATION), parsed and refused as Karpenter does. One departure: a batch duration Go
cannot parse, or a negative one, is refused naming its variable, where Karpenter would silently fall back to its
default (env.WithDefaultDuration), so a change someone made is never quietly lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from provisioner.durations import DurationError, parse_go_duration
from provisioner.overlays import label_key_problems
from provisioner.pods import DO_NOT_SCHEDULE, HONOR, SCHEDULE_ANYWAY, TopologySpreadConstraint
from provisioner.pods import IGNORE as IGNORE_TAINTS

NODE_REPAIR = "NodeRepair"
RESERVED_CAPACITY = "ReservedCapacity"
SPOT_TO_SPOT_CONSOLIDATION = "SpotToSpotConsolidation"
NODE_OVERLAY = "NodeOverlay"
STATIC_CAPACITY = "StaticCapacity"
CAPACITY_BUFFER = "CapacityBuffer"
# DefaultFeatureGates(): a gate FEATURE_GATES does not name keeps its default; a name Karpenter does not know is
# ignored, as ParseFeatureGates ignores it.
DEFAULT_FEATURE_GATES: Mapping[str, bool] = {
    NODE_REPAIR: False,
    RESERVED_CAPACITY: True,
    SPOT_TO_SPOT_CONSOLIDATION: False,
    NODE_OVERLAY: False,
    STATIC_CAPACITY: False,
    CAPACITY_BUFFER: False,
}
RESPECT, IGNORE = "Respect", "Ignore"
PREFERENCE_POLICIES = (RESPECT, IGNORE)
STRICT, BEST_EFFORT = "Strict", "BestEffort"
MIN_VALUES_POLICIES = (STRICT, BEST_EFFORT)
# The provisioning batch window's defaults, in seconds (BATCH_IDLE_DURATION=1s, BATCH_MAX_DURATION=10s).
BATCH_IDLE_SECONDS = 1.0
BATCH_MAX_SECONDS = 10.0
# strconv.ParseBool's spellings.
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class OptionsError(ValueError):
    """An option Karpenter would refuse at start-up; the message is Karpenter's."""


def parse_bool(name: str, value: str) -> bool:
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise OptionsError(f'invalid boolean value "{value}" for {name}: parse error')


def parse_feature_gates(text: str) -> dict[str, bool]:
    """FEATURE_GATES as Karpenter reads it (component-base's MapStringBool over the defaults): `Name=bool` pairs
    separated by commas, spaces around either side ignored, every known gate present in the result."""
    gates = dict(DEFAULT_FEATURE_GATES)
    for item in text.split(","):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise OptionsError("parsing feature gates, malformed pair, expect string=bool")
        name, value = name.strip(), value.strip()
        if value not in _TRUE + _FALSE:
            raise OptionsError(
                f'parsing feature gates, invalid value of {name}: {value}, err: strconv.ParseBool: parsing "{value}": '
                "invalid syntax"
            )
        if name in gates:
            gates[name] = value in _TRUE
    return gates


def parse_batch_duration(name: str, value: str) -> float:
    """A batch window's duration in seconds, as Go's time.ParseDuration reads it; not negative."""
    try:
        seconds = parse_go_duration(value)
    except DurationError as error:
        raise OptionsError(f'validating cli flags / env vars, invalid {name} "{value[:64]}": {error}') from None
    if seconds < 0:
        raise OptionsError(
            f'validating cli flags / env vars, invalid {name} "{value}": a batch window cannot be negative'
        )
    return seconds


# The fields a SCHEDULER_CONFIG document may have (sigs.k8s.io/yaml's UnmarshalStrict refuses any other).
_SCHEDULER_CONFIG_FIELDS = ("podTopologySpread",)
_SPREAD_ARGS_FIELDS = ("defaultConstraints",)
_CONSTRAINT_FIELDS = (
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "labelSelector",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
    "matchLabelKeys",
)


def _strict(doc: object, known: tuple[str, ...]) -> Mapping[str, Any]:
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise OptionsError(
            "parsing scheduler config, decoding scheduler config, error unmarshaling JSON: while decoding JSON: json: "
            f"cannot unmarshal {type(doc).__name__} into a struct"
        )
    for name in doc:
        if name not in known:
            raise OptionsError(
                "parsing scheduler config, decoding scheduler config, error unmarshaling JSON: while decoding JSON: "
                f'json: unknown field "{name}"'
            )
    return doc


def parse_scheduler_config(text: str) -> tuple[TopologySpreadConstraint, ...]:
    """SCHEDULER_CONFIG (options.go:358): the cluster's default topology spread constraints, refused as Karpenter's
    Validate (kube-scheduler's ValidatePodTopologySpreadArgs) refuses them; empty means none."""
    if not text:
        return ()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise OptionsError(f"parsing scheduler config, decoding scheduler config, {error}") from None
    spread = _strict(_strict(doc, _SCHEDULER_CONFIG_FIELDS).get("podTopologySpread"), _SPREAD_ARGS_FIELDS)
    result: list[TopologySpreadConstraint] = []
    for index, item in enumerate(spread.get("defaultConstraints") or ()):
        constraint = _default_constraint(_strict(item, _CONSTRAINT_FIELDS), index)
        for earlier, other in enumerate(result):
            if (other.topology_key, other.when_unsatisfiable) == (
                constraint.topology_key,
                constraint.when_unsatisfiable,
            ):
                raise OptionsError(
                    f"parsing scheduler config, validating scheduler config, podTopologySpread.defaultConstraints"
                    f"[{index}] is a duplicate of [{earlier}], {{{constraint.topology_key}, "
                    f"{constraint.when_unsatisfiable}}}"
                )
        result.append(constraint)
    return tuple(result)


def _default_constraint(spec: Mapping[str, Any], index: int) -> TopologySpreadConstraint:
    """validateDefaultConstraint (options.go:400), whose fragments follow the constraint's field path."""
    prefix = f"parsing scheduler config, validating scheduler config, podTopologySpread.defaultConstraints[{index}]"
    max_skew = spec.get("maxSkew") or 0
    key = str(spec.get("topologyKey") or "")
    when = str(spec.get("whenUnsatisfiable") or "")
    if not isinstance(max_skew, int) or max_skew <= 0:
        raise OptionsError(f"{prefix}.maxSkew must be greater than 0")
    if not key:
        raise OptionsError(f"{prefix}.topologyKey must be set")
    problems = label_key_problems(key)
    if problems:
        raise OptionsError(f'{prefix}.topologyKey "{key}" is not a valid label name, {", ".join(problems)}')
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise OptionsError(
            f'{prefix}.whenUnsatisfiable "{when}" must be one of "{DO_NOT_SCHEDULE}" or "{SCHEDULE_ANYWAY}"'
        )
    if spec.get("labelSelector") is not None:
        raise OptionsError(f"{prefix}.labelSelector must not be set, as selectors are deduced for each pod")
    if spec.get("matchLabelKeys"):
        raise OptionsError(f"{prefix}.matchLabelKeys must not be set, as it has no effect on default constraints")
    min_domains = spec.get("minDomains")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=when,
        selector=None,  # deduced for each pod (provisioner/scheduling/defaultspread.py)
        min_domains=min_domains if isinstance(min_domains, int) else None,
        node_affinity_policy=str(spec.get("nodeAffinityPolicy") or HONOR),
        node_taints_policy=str(spec.get("nodeTaintsPolicy") or IGNORE_TAINTS),
    )


def format_feature_gates(gates: Mapping[str, bool]) -> str:
    """The FEATURE_GATES text that gives these gates, in Karpenter's default string's order."""
    return ",".join(f"{name}={'true' if gates.get(name, d) else 'false'}" for name, d in DEFAULT_FEATURE_GATES.items())


@dataclass(frozen=True)
class KarpenterOptions:
    """The options a cluster's controllers decide with. karpui's one deliberate default that differs from
    Karpenter's: IGNORE_DRA_REQUESTS is false (DRA works), see the README."""

    feature_gates: Mapping[str, bool] = field(default_factory=lambda: dict(DEFAULT_FEATURE_GATES))
    preference_policy: str = RESPECT
    min_values_policy: str = STRICT
    ignore_dra_requests: bool = False
    # LEGACY_NODE_REPAIR (v1.15, default false): with NodeRepair on, v1.14's node.health controller repairs instead
    # of the disruption method (no budgets, do-not-repair or drain bounds; the toleration from lastTransitionTime).
    legacy_node_repair: bool = False
    # The provisioning batcher's window (Batcher.idle and .maximum): it closes this long after the last new pending
    # pod, and at the latest this long after it opened.
    batch_idle_duration: float = BATCH_IDLE_SECONDS
    batch_max_duration: float = BATCH_MAX_SECONDS
    # SCHEDULER_CONFIG's podTopologySpread.defaultConstraints: the spread a pod without its own is scheduled with.
    default_spread: tuple[TopologySpreadConstraint, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str], defaults: KarpenterOptions | None = None) -> KarpenterOptions:
        """Options from Karpenter's environment variables; what `env` leaves out keeps `defaults`."""
        base = defaults or cls()
        gates = dict(base.feature_gates)
        if "FEATURE_GATES" in env:
            gates = parse_feature_gates(env["FEATURE_GATES"])
        preference = env.get("PREFERENCE_POLICY", base.preference_policy)
        if preference not in PREFERENCE_POLICIES:
            raise OptionsError(f'validating cli flags / env vars, invalid PREFERENCE_POLICY "{preference}"')
        min_values = env.get("MIN_VALUES_POLICY", base.min_values_policy)
        if min_values not in MIN_VALUES_POLICIES:
            raise OptionsError(f'validating cli flags / env vars, invalid MIN_VALUES_POLICY "{min_values}"')
        ignore_dra = base.ignore_dra_requests
        if "IGNORE_DRA_REQUESTS" in env:
            ignore_dra = parse_bool("IGNORE_DRA_REQUESTS", env["IGNORE_DRA_REQUESTS"])
        legacy_repair = base.legacy_node_repair
        if "LEGACY_NODE_REPAIR" in env:
            legacy_repair = parse_bool("LEGACY_NODE_REPAIR", env["LEGACY_NODE_REPAIR"])
        idle, maximum = base.batch_idle_duration, base.batch_max_duration
        if "BATCH_IDLE_DURATION" in env:
            idle = parse_batch_duration("BATCH_IDLE_DURATION", env["BATCH_IDLE_DURATION"])
        if "BATCH_MAX_DURATION" in env:
            maximum = parse_batch_duration("BATCH_MAX_DURATION", env["BATCH_MAX_DURATION"])
        default_spread = base.default_spread
        if "SCHEDULER_CONFIG" in env:
            default_spread = parse_scheduler_config(env["SCHEDULER_CONFIG"])
        return cls(
            feature_gates=gates,
            preference_policy=preference,
            min_values_policy=min_values,
            ignore_dra_requests=ignore_dra,
            legacy_node_repair=legacy_repair,
            batch_idle_duration=idle,
            batch_max_duration=maximum,
            default_spread=default_spread,
        )

    def gate(self, name: str) -> bool:
        return bool(self.feature_gates.get(name, DEFAULT_FEATURE_GATES.get(name, False)))


# Karpenter's options as a Deployment's environment ------------------------------------------------------------

OPTION_VARIABLES = (
    "FEATURE_GATES",
    "PREFERENCE_POLICY",
    "MIN_VALUES_POLICY",
    "IGNORE_DRA_REQUESTS",
    "LEGACY_NODE_REPAIR",
    "BATCH_IDLE_DURATION",
    "BATCH_MAX_DURATION",
    "SCHEDULER_CONFIG",
)


def env_positions(deployment: Mapping[str, Any], container: str) -> dict[str, tuple[str, str]]:
    """The option variables a Deployment's pod template gives `container`, each with its field path
    (`spec.template.spec.containers[0].env[3].value`). `value`s only: a `valueFrom` is resolved by the kubelet from
    what karpui never has. As the kubelet does, the last entry of a repeated name wins."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    found: dict[str, tuple[str, str]] = {}
    for index, item in enumerate(spec.get("containers") or []):
        if not isinstance(item, dict) or item.get("name") != container:
            continue
        for position, entry in enumerate(item.get("env") or []):
            if isinstance(entry, dict) and entry.get("name") in OPTION_VARIABLES and "valueFrom" not in entry:
                found[entry["name"]] = (
                    str(entry.get("value") or ""),
                    f"spec.template.spec.containers[{index}].env[{position}].value",
                )
    return found


def container_env(deployment: Mapping[str, Any], container: str) -> dict[str, str]:
    """The option variables a Deployment's `container` sets."""
    return {name: value for name, (value, _) in env_positions(deployment, container).items()}


def env_problem(deployment: Mapping[str, Any], container: str) -> tuple[str, str] | None:
    """(field, Karpenter's message) of the first option variable Karpenter could not start with, or None."""
    for name, (value, path) in env_positions(deployment, container).items():
        try:
            KarpenterOptions.from_env({name: value})
        except OptionsError as error:
            return path, f"{name}: {error}"
    return None

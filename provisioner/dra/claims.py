"""DeviceClasses, device requests from ResourceClaims, DRAConfigs, and allocating devices to requests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from provisioner.dra.cel import CELError, Device, evaluate, validate
from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.requirements import Requirement, RequirementError, Requirements

MAX_DEVICES_PER_CLAIM = 32


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceRequest:
    claim: str
    name: str
    device_class: str
    count: int = 1
    all: bool = False  # allocationMode: All
    selectors: tuple[str, ...] = ()
    # firstAvailable: the subrequests after this one, tried in order when this one cannot be met; every name is
    # qualified "<request>/<subrequest>", as allocation results name the subrequest that was chosen.
    alternatives: tuple[DeviceRequest, ...] = ()
    # The claim's matchAttribute constraints this request is under: (constraint's index in the claim, attribute).
    match: tuple[tuple[int, str], ...] = ()

    def describe(self) -> str:
        return f'request "{self.name}" of claim "{self.claim}" (DeviceClass {self.device_class})'

    def shape(self) -> tuple[object, ...]:
        """What allocation depends on, leaving out the names (pods of one shape share their verdicts)."""
        return (
            self.device_class,
            self.count,
            self.all,
            self.selectors,
            tuple(alternative.shape() for alternative in self.alternatives),
            self.match,
        )


def merged(held: Sequence[DeviceRequest], added: Sequence[DeviceRequest]) -> tuple[DeviceRequest, ...]:
    """The requests of pods sharing a node: a claim two pods share is allocated once (Karpenter's allocator
    allocates each ResourceClaim once per scheduling loop), so its requests count once."""
    seen = {(r.claim, r.name) for r in held}
    return (*held, *(r for r in added if (r.claim, r.name) not in seen))


DeviceKey = tuple[str, str, str]  # driver, pool, device


def key(device: Device) -> DeviceKey:
    return (device.driver, device.pool, device.name)


def _selectors(items: Any, path: str) -> tuple[str, ...]:
    expressions = []
    for index, item in enumerate(f.sequence(items, path)):
        item_path = f"{path}[{index}]"
        spec = f.mapping(
            f.mapping(item, item_path, allowed=("cel",), required=True).get("cel"),
            f"{item_path}.cel",
            allowed=("expression",),
            required=True,
        )
        expression = f.string(spec.get("expression"), f"{item_path}.cel.expression", required=True)
        assert expression is not None
        try:
            validate(expression)
        except CELError as error:
            raise ManifestError(f"invalid CEL expression: {error}", field=f"{item_path}.cel.expression") from None
        expressions.append(expression)
    return tuple(expressions)


def device_class_from_manifest(doc: Mapping[str, Any]) -> DeviceClass:
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "spec", "status"))
    meta = f.metadata(doc)
    spec = f.mapping(doc.get("spec"), "spec", allowed=("selectors", "config", "extendedResourceName"))
    return DeviceClass(meta["name"], _selectors(spec.get("selectors"), "spec.selectors"))


def requests_from_claim_spec(spec: Mapping[str, Any], claim: str, path: str) -> list[DeviceRequest]:
    """A ResourceClaimSpec's requests (`exactly`, or the first of `firstAvailable`), validated."""
    devices = f.mapping(
        f.mapping(spec, path).get("devices"), f"{path}.devices", allowed=("requests", "constraints", "config")
    )
    constraints = _constraints(devices.get("constraints"), f"{path}.devices.constraints")
    requests = []
    for index, item in enumerate(
        f.sequence(devices.get("requests"), f"{path}.devices.requests", max_items=MAX_DEVICES_PER_CLAIM)
    ):
        item_path = f"{path}.devices.requests[{index}]"
        request = f.mapping(item, item_path, allowed=("name", "exactly", "firstAvailable"), required=True)
        name = f.string(request.get("name"), f"{item_path}.name", required=True) or ""
        if "exactly" in request:
            exact = _exact_request(request["exactly"], f"{item_path}.exactly", claim, name, _EXACT_FIELDS)
            requests.append(_constrained(exact, name, constraints))
        elif request.get("firstAvailable"):
            options = [
                _exact_request(
                    sub,
                    f"{item_path}.firstAvailable[{sub_index}]",
                    claim,
                    f"{name}/{_subrequest_name(sub, f'{item_path}.firstAvailable[{sub_index}]')}",
                    _SUBREQUEST_FIELDS,
                )
                for sub_index, sub in enumerate(
                    f.sequence(request["firstAvailable"], f"{item_path}.firstAvailable", max_items=8)
                )
            ]
            options = [_constrained(option, name, constraints) for option in options]
            requests.append(replace(options[0], alternatives=tuple(options[1:])))
        else:
            raise ManifestError("one of exactly or firstAvailable is required", field=f"{item_path}.exactly")
    return requests


def _constraints(items: Any, path: str) -> list[tuple[int, str, frozenset[str]]]:
    """A claim's matchAttribute constraints: (index, fully qualified attribute, the requests it names, or none for
    all). distinctAttribute is left as it was: read by nothing."""
    constraints = []
    for index, item in enumerate(f.sequence(items, path)):
        item_path = f"{path}[{index}]"
        constraint = f.mapping(item, item_path, required=True)
        attribute = f.string(constraint.get("matchAttribute"), f"{item_path}.matchAttribute")
        if attribute:
            names = f.sequence(constraint.get("requests"), f"{item_path}.requests")
            constraints.append((index, attribute, frozenset(str(n) for n in names)))
    return constraints


def _constrained(
    request: DeviceRequest, parent: str, constraints: Sequence[tuple[int, str, frozenset[str]]]
) -> DeviceRequest:
    """The request under the constraints that name it, by its own name or (a subrequest) its parent's, or name none
    (constraint.go matches)."""
    match = tuple(
        (index, attribute)
        for index, attribute, names in constraints
        if not names or parent in names or request.name in names
    )
    return replace(request, match=match) if match else request


def _subrequest_name(item: Any, path: str) -> str:
    return f.string(f.mapping(item, path, required=True).get("name"), f"{path}.name", required=True) or ""


# ExactDeviceRequest's fields ("name" is tolerated there as it always was) and DeviceSubRequest's.
_EXACT_FIELDS = (
    "name",
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "capacity",
    "adminAccess",
    "tolerations",
)
_SUBREQUEST_FIELDS = ("name", "deviceClassName", "selectors", "allocationMode", "count", "capacity", "tolerations")


def _exact_request(item: Any, path: str, claim: str, name: str, allowed: tuple[str, ...]) -> DeviceRequest:
    """An ExactDeviceRequest or a firstAvailable DeviceSubRequest, validated."""
    exact = f.mapping(item, path, allowed=allowed, required=True)
    device_class = f.string(exact.get("deviceClassName"), f"{path}.deviceClassName", required=True) or ""
    mode = exact.get("allocationMode", "ExactCount")
    if mode not in ("ExactCount", "All"):
        raise ManifestError(
            f'Unsupported value: "{mode}": supported values: ExactCount, All', field=f"{path}.allocationMode"
        )
    count = f.integer(exact.get("count", 1), f"{path}.count", minimum=1, maximum=MAX_DEVICES_PER_CLAIM)
    if mode == "All" and "count" in exact:
        raise ManifestError("count may only be set with allocationMode ExactCount", field=f"{path}.count")
    return DeviceRequest(
        claim, name, device_class, count or 1, mode == "All", _selectors(exact.get("selectors"), f"{path}.selectors")
    )


def validate_claim(doc: Mapping[str, Any]) -> None:
    meta = f.metadata(doc)
    spec = f.mapping(doc.get("spec"), "spec", required=True)
    requests_from_claim_spec(spec, meta["name"], "spec")


def validate_claim_template(doc: Mapping[str, Any]) -> None:
    meta = f.metadata(doc)
    spec = f.mapping(doc.get("spec"), "spec", allowed=("metadata", "spec"), required=True)
    requests_from_claim_spec(f.mapping(spec.get("spec"), "spec.spec", required=True), meta["name"], "spec.spec")


@dataclass(frozen=True)
class DriverPool:
    """One pool of a DRAConfig: the nodes it covers and the devices it publishes there."""

    driver: str
    name: str
    node_terms: tuple[Requirements, ...]
    slices: tuple[tuple[Mapping[str, Any], ...], ...]  # per ResourceSlice, the device specs

    def covers(self, labels: Mapping[str, str]) -> bool:
        node = Requirements.from_labels(labels)
        return (
            any(node.compatible(term, allow_undefined=frozenset()) for term in self.node_terms)
            if self.node_terms
            else True
        )

    def devices(self, pool: str) -> list[Device]:
        return [Device.from_spec(spec, self.driver, pool) for entries in self.slices for spec in entries]


def dra_config_pools(doc: Mapping[str, Any]) -> list[DriverPool]:
    """A test.karpenter.sh/v1alpha1 DRAConfig, validated; errors name the field."""
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "spec", "status"))
    f.metadata(doc)
    spec = f.mapping(doc.get("spec"), "spec", allowed=("driver", "pools"), required=True)
    driver = f.string(spec.get("driver"), "spec.driver", required=True) or ""
    pools = []
    for index, item in enumerate(f.sequence(spec.get("pools"), "spec.pools")):
        path = f"spec.pools[{index}]"
        pool = f.mapping(item, path, allowed=("name", "nodeSelectorTerms", "resourceSlices"), required=True)
        terms = []
        for term_index, term in enumerate(f.sequence(pool.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")):
            term_path = f"{path}.nodeSelectorTerms[{term_index}]"
            term = f.mapping(term, term_path, allowed=("matchExpressions", "matchFields"))
            requirements = []
            for expr_index, expression in enumerate(
                f.sequence(term.get("matchExpressions"), f"{term_path}.matchExpressions")
            ):
                expr_path = f"{term_path}.matchExpressions[{expr_index}]"
                expression = f.mapping(expression, expr_path, allowed=("key", "operator", "values"), required=True)
                try:
                    requirements.append(
                        Requirement.from_operator(
                            str(expression.get("operator")),
                            str(expression.get("key")),
                            [str(v) for v in expression.get("values") or []],
                        )
                    )
                except RequirementError as error:
                    raise ManifestError(str(error), field=f"{expr_path}.operator") from None
            terms.append(Requirements(requirements))
        slices = []
        for slice_index, entry in enumerate(f.sequence(pool.get("resourceSlices"), f"{path}.resourceSlices")):
            entry = f.mapping(entry, f"{path}.resourceSlices[{slice_index}]", allowed=("devices",))
            devices = tuple(
                f.mapping(d, f"{path}.resourceSlices[{slice_index}].devices[{i}]", required=True)
                for i, d in enumerate(f.sequence(entry.get("devices"), f"{path}.resourceSlices[{slice_index}].devices"))
            )
            for i, device in enumerate(devices):
                f.string(device.get("name"), f"{path}.resourceSlices[{slice_index}].devices[{i}].name", required=True)
            slices.append(devices)
        pools.append(DriverPool(driver, str(pool.get("name") or f"pool-{index}"), tuple(terms), tuple(slices)))
    return pools


def _selected(selectors: Sequence[str], device: Device, errors: list[str]) -> bool:
    """Every selector picks the device; a selector that cannot decide (a CEL runtime error) adds why to `errors`."""
    for selector in selectors:
        verdict = evaluate(selector, device)
        if verdict.error:
            errors.append(f'device "{device.name}": {verdict.error}')
        if not verdict.matched:
            return False
    return True


def allocate(
    requests: Sequence[DeviceRequest],
    devices: Iterable[Device],
    classes: Mapping[str, DeviceClass],
    taken: set[DeviceKey] | frozenset[DeviceKey] = frozenset(),
) -> list[tuple[DeviceRequest, Device]] | str:
    """Devices for every request (each device used once), or why not. Requests are filled in order, greedily; where
    that breaks a claim's matchAttribute constraint, a search backtracks."""
    devices = list(devices)
    available = [d for d in devices if key(d) not in taken]
    held = [d for d in devices if key(d) in taken]
    chosen: list[tuple[DeviceRequest, Device]] = []
    used: set[DeviceKey] = set()
    per_claim: dict[str, int] = {}
    for request in requests:
        # firstAvailable: the first subrequest that can be met wins (allocator.go tries them in order).
        outcome = ""
        for option in (request, *request.alternatives):
            picked = _pick(option, available, held, used, classes)
            if not isinstance(picked, str) and per_claim.get(option.claim, 0) + len(picked) > MAX_DEVICES_PER_CLAIM:
                picked = _too_many(option, per_claim.get(option.claim, 0) + len(picked))
            if not isinstance(picked, str):
                break
            outcome = outcome or picked  # why the preferred one could not be met
        if isinstance(picked, str):
            return outcome
        per_claim[option.claim] = per_claim.get(option.claim, 0) + len(picked)
        for device in picked:
            used.add(key(device))
            chosen.append((option, device))
    if not any(option.match for request in requests for option in (request, *request.alternatives)):
        return chosen
    if _pins(chosen) is not None:
        return chosen
    # The greedy choice breaks a matchAttribute constraint: search as Karpenter's allocator does (a DFS that
    # backtracks over devices and subrequests, allocator.go), within a budget.
    found = _search(requests, available, held, classes)
    if found is not None:
        return found
    claims = sorted(
        {request.claim for request in requests if request.match or any(a.match for a in request.alternatives)}
    )
    return f'cannot allocate the devices of claim "{claims[0]}": no choice of devices satisfies its matchAttribute constraints'


def _too_many(request: DeviceRequest, total: int) -> str:
    """An allocation result holds at most 32 devices (AllocationResultsMaxSize): ValidateClaimRequest prunes an
    instance type whose All-mode devices would take a claim past it (scheduling/dynamicresources/request.go:207-245)."""
    return (
        f'cannot allocate {request.describe()}: claim "{request.claim}" would hold {total} devices, exceeding '
        f"maximum of {MAX_DEVICES_PER_CLAIM}"
    )


# Devices tried before a constrained search gives up: a deterministic stand-in for allocator.go's 5 s allocateTimeout.
_SEARCH_BUDGET = 20_000
Pins = dict[tuple[str, int], tuple[str, Any]]


def _attribute(device: Device, name: str) -> tuple[str, Any] | None:
    """A device's attribute by its fully qualified name (typed, so "1" and 1 differ), or None (constraint.go
    LookupAttribute: an unqualified device attribute is the driver's)."""
    domain, _, short = name.rpartition("/")
    values = device.attributes.get(domain or device.driver) or {}
    return (type(values[short]).__name__, values[short]) if short in values else None


def _pin(request: DeviceRequest, device: Device, pins: Pins) -> Pins | None:
    """The pins with the device's values for the request's constraints added, or None when it breaks one: the
    first device pins a constraint's value, a device lacking the attribute never fits (MatchAttributeConstraint)."""
    for index, attribute in request.match:
        value = _attribute(device, attribute)
        pinned = pins.get((request.claim, index))
        if value is None or (pinned is not None and pinned != value):
            return None
        if pinned is None:
            pins = {**pins, (request.claim, index): value}
    return pins


def _pins(chosen: Sequence[tuple[DeviceRequest, Device]]) -> Pins | None:
    pins: Pins | None = {}
    for request, device in chosen:
        pins = _pin(request, device, pins) if pins is not None else None
    return pins


def _search(
    requests: Sequence[DeviceRequest],
    available: Sequence[Device],
    held: Sequence[Device],
    classes: Mapping[str, DeviceClass],
) -> list[tuple[DeviceRequest, Device]] | None:
    """Devices for every request meeting every constraint, trying subrequests in order; None if there are none (or
    the budget ran out)."""
    budget = [_SEARCH_BUDGET]
    matching: dict[DeviceRequest, list[Device]] = {}

    def candidates(option: DeviceRequest) -> list[Device]:
        if option not in matching:
            device_class = classes.get(option.device_class)
            selectors = (*device_class.selectors, *option.selectors) if device_class else ()
            matching[option] = [d for d in available if device_class and _selected(selectors, d, [])]
            # All mode cannot be met while a matching device is allocated already: leave it no candidates.
            if option.all and any(_selected(selectors, d, []) for d in held):
                matching[option] = []
        return matching[option]

    def place(index: int, used: frozenset[DeviceKey], pins: Pins) -> list[tuple[DeviceRequest, Device]] | None:
        if index == len(requests):
            return []
        for option in (requests[index], *requests[index].alternatives):
            free = [d for d in candidates(option) if key(d) not in used]
            if option.all and len(free) < len(candidates(option)):
                continue  # an earlier request here took one of the devices All mode needs
            need = len(free) if option.all else option.count
            if free and need <= len(free):
                found = choose(option, free, 0, need, (), used, pins, index)
                if found is not None:
                    return found
        return None

    def choose(
        option: DeviceRequest,
        free: list[Device],
        start: int,
        need: int,
        picked: tuple[Device, ...],
        used: frozenset[DeviceKey],
        pins: Pins,
        index: int,
    ) -> list[tuple[DeviceRequest, Device]] | None:
        if need == 0:
            rest = place(index + 1, used, pins)
            return None if rest is None else [(option, d) for d in picked] + rest
        for position in range(start, len(free) - need + 1):
            budget[0] -= 1
            if budget[0] < 0:
                return None
            pinned = _pin(option, free[position], pins)
            if pinned is None:
                continue
            device = free[position]
            found = choose(option, free, position + 1, need - 1, (*picked, device), used | {key(device)}, pinned, index)
            if found is not None:
                return found
        return None

    return place(0, frozenset(), {})


def _pick(
    request: DeviceRequest,
    available: Sequence[Device],
    held: Sequence[Device],
    used: set[DeviceKey],
    classes: Mapping[str, DeviceClass],
) -> list[Device] | str:
    """The free devices one request takes, or why it cannot be met."""
    device_class = classes.get(request.device_class)
    if device_class is None:
        return f'DeviceClass "{request.device_class}" not found ({request.describe()})'
    selectors = (*device_class.selectors, *request.selectors)
    errors: list[str] = []
    matching = [d for d in available if _selected(selectors, d, errors)]
    fitting = [d for d in matching if key(d) not in used]
    if request.all:
        # All mode takes every matching device, so one allocated already (by a claim, or by an earlier request
        # here) makes it unsatisfiable (allocator.go dfsAllMode: each matching device is a slot to fill).
        busy = len(matching) - len(fitting) + sum(1 for d in held if _selected(selectors, d, []))
        if busy:
            total = len(fitting) + busy
            return (
                f"cannot allocate {request.describe()}: allocationMode All needs every matching device, and {busy} "
                f"of {total} are allocated already"
            )
    wanted = len(fitting) if request.all else request.count
    if not fitting or len(fitting) < wanted:
        why = f"; {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "") if errors else ""
        return f"cannot allocate {request.describe()}: {len(fitting)} matching device(s) free, {wanted} needed{why}"
    return fitting[:wanted]

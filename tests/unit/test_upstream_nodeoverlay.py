"""Karpenter v1.15.0's NodeOverlay suites (pkg/apis/v1alpha1/nodeoverlay_validation_test.go; pkg/controllers/nodeoverlay
suite_test.go and store_test.go) ported onto karpui, each test naming the It it follows.

The CRD's schema and rules are `parse_nodeoverlay` (env.Client.Create), RuntimeValidate is `runtime_problems`. The
controller suite runs NodeOverlayController over an in-memory cluster and a fake provider whose types, like the Go
suite's BeforeEach, are one default-instance-type with one spot offering in test-zone-1 at 1.02 (DEFAULT_TYPE);
`cloudProvider.InstanceTypes = nil` there is the fake provider's six types here (fake_catalog). store.ApplyAll is
`ClusterContext.instance_types_for`; a provider error for a NodePool is the provider answering None. Overlays the Go
suite names at random get fixed names (their order then matches nothing the test depends on).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, replace
from typing import Any

import pytest

from provisioner import overlays as overlays_module
from provisioner.catalog import InstanceType, Offering
from provisioner.cluster.memory import ObjectStore
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.nodeoverlay import NodeOverlayController
from provisioner.manifests import ManifestError
from provisioner.manifests.nodeoverlay import parse_nodeoverlay
from provisioner.objects import NodePool, NodeSelectorRequirement
from provisioner.options import KarpenterOptions, parse_feature_gates
from provisioner.overlays import NodeOverlay, evaluate, runtime_problems
from provisioner.quantity import MILLI, parse_quantity, parse_resources
from provisioner.requirements import Requirement
from tests.builders import fake_catalog, instance_type, nodepool, req
from tests.lab_builders import condition

ON = KarpenterOptions(feature_gates=parse_feature_gates("NodeOverlay=true"))
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODEPOOL = "karpenter.sh/nodepool"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
FUSE = "smarter-devices/fuse"
GI = 2**30 * MILLI
TOO_LONG_NAME = "test.com.test/test-" + "a1b2c3d4e5" * 25  # randomdata.Alphanumeric(250), lowercased
SUCCEEDED = ("True", "ValidationSucceeded", "")
CONFLICT = ("False", "Conflict", "conflict with another overlay")


def fake_type(
    name: str, *offerings: Offering, arch: str = "amd64", oses: tuple[str, ...] = ("linux", "windows", "darwin")
) -> InstanceType:
    """fake.NewInstanceType: 4 CPU, 4Gi, 5 pods, the given offerings (or the fake's five), and its OS set."""
    base = instance_type(name, "4", "4Gi", arch=arch)
    labels = {k: v for k, v in base.labels.items() if k != OS}
    return replace(
        base,
        offerings=tuple(offerings) or base.offerings,
        labels=labels if len(oses) > 1 else {**labels, OS: oses[0]},
        extra_requirements=(Requirement(OS, frozenset(oses)),) if len(oses) > 1 else (),
    )


def spot(zone: str, price: float) -> Offering:
    return Offering(zone, "spot", price)


DEFAULT_TYPE = fake_type("default-instance-type", spot("test-zone-1", 1.02))


class FakeCloud:
    """fake.CloudProvider's GetInstanceTypes: the same types for every NodePool, None for one that errors."""

    name = "fake"

    def __init__(self, types: list[InstanceType]) -> None:
        self.types = types
        self.errors: set[str] = set()

    def instance_types(self, pool: NodePool) -> list[InstanceType] | None:
        return None if pool.name in self.errors else self.types


def overlay_doc(name: str, *requirements: NodeSelectorRequirement, weight: int | None = 10, **spec: Any) -> dict:
    body: dict[str, Any] = {"requirements": [r.to_spec() for r in requirements], **spec}
    if weight is not None:
        body["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": body}


@dataclass
class Run:
    store: ObjectStore
    ctx: ClusterContext
    cloud: FakeCloud
    controller: NodeOverlayController

    def verdict(self, name: str) -> tuple[str, str, str] | None:
        stored = self.store.get("NodeOverlay", name)
        assert stored is not None
        return condition(stored, "ValidationSucceeded")

    def types(self, pool: NodePool) -> list[InstanceType] | None:
        """store.ApplyAll(pool, cloudProvider.GetInstanceTypes(pool))."""
        return self.ctx.instance_types_for(pool)

    def by_name(self, pool: NodePool) -> dict[str, InstanceType]:
        return {it.name: it for it in self.types(pool) or []}

    def reconcile(self) -> None:
        self.ctx = replace(self.ctx, overlays=None)
        self.controller.reconcile(self.ctx)


def reconcile(*docs: dict, pools: tuple[NodePool, ...] | None = None, types: list[InstanceType] | None = None) -> Run:
    """ExpectApplied(nodePools..., overlays...) then ExpectReconciled(nodeOverlayController)."""
    store = ObjectStore(clock=lambda: 0.0)
    for doc in docs:
        store.create(copy.deepcopy(doc))
    cloud = FakeCloud(list(types) if types is not None else [DEFAULT_TYPE])
    ctx = ClusterContext(
        api=store,
        cloud=cloud,  # type: ignore[arg-type]
        now=0.0,
        rng=random.Random(0),
        nodepools=list(pools or (nodepool("default"),)),
        nodepool_uids={},
        nodeclasses={},
        catalogs={},
        options=ON,
    )
    run = Run(store, ctx, cloud, NodeOverlayController())
    run.controller.reconcile(ctx)
    return run


def prices(it: InstanceType) -> dict[tuple[str, str], float]:
    return {(o.zone, o.capacity_type): o.price for o in it.offerings}


def only_offering_price(types: list[InstanceType] | None) -> float:
    assert types is not None
    [it] = types
    [offering] = it.offerings
    return offering.price


PRICE_CHANGES = pytest.mark.parametrize(
    ("change", "expected"), [({"price": "13234.223"}, 13234.223), ({"priceAdjustment": "+1000"}, 1001.020)]
)

# nodeoverlay_validation_test.go: Describe("CEL/Validation") -------------------------------------------------------


def cel_doc(*requirements: dict, **spec: Any) -> dict:
    """The BeforeEach NodeOverlay (a capacity-type Exists requirement) with `requirements` instead, if given."""
    body = {"requirements": list(requirements) or [{"key": CAPACITY_TYPE, "operator": "Exists"}], **spec}
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"}, "spec": body}


def runtime(*requirements: tuple[str, str, tuple[str, ...]], capacity: dict[str, int] | None = None) -> str | None:
    """nodeOverlay.RuntimeValidate(ctx) on a NodeOverlay the API server may have refused."""
    made = tuple(NodeSelectorRequirement(key, op, values) for key, op, values in requirements)
    made = made or (NodeSelectorRequirement(CAPACITY_TYPE, "Exists"),)
    return runtime_problems(NodeOverlay("o", made, capacity=capacity or {}))


def refused(doc: dict) -> tuple[str, str]:
    with pytest.raises(ManifestError) as error:
        parse_nodeoverlay(doc)
    return error.value.field, error.value.message


GT_MESSAGE = "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"
KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
PRICE_PATTERN = r"^\d+(\.\d+)?$"
RESTRICTED_TAIL = (
    "is not allowed as it might interfere with the internal provisioning logic; specify a well known label: "
    "[karpenter.k8s.aws/capacity-reservation-id karpenter.k8s.aws/capacity-reservation-type "
    "karpenter.k8s.aws/instance-category karpenter.k8s.aws/instance-cpu karpenter.k8s.aws/instance-family "
    "karpenter.k8s.aws/instance-generation karpenter.k8s.aws/instance-hypervisor karpenter.k8s.aws/instance-memory "
    "karpenter.k8s.aws/instance-size karpenter.kwok.sh/instance-cpu karpenter.kwok.sh/instance-family "
    "karpenter.kwok.sh/instance-memory karpenter.kwok.sh/instance-size karpenter.sh/capacity-type "
    "karpenter.sh/nodepool kubernetes.io/arch kubernetes.io/os node.kubernetes.io/instance-type "
    "node.kubernetes.io/windows-build topology.kubernetes.io/region topology.kubernetes.io/zone], or a custom label "
    "that does not use a restricted domain: [karpenter.kwok.sh karpenter.sh]"
)


def test_cel_requirements_fail_for_no_values_for_in_operator():
    """Context("Requirements") It("should fail for no values for In operator")."""
    assert refused(cel_doc({"key": "Test", "operator": "In"})) == (
        "spec.requirements",
        "requirements with operator 'In' must have a value defined",
    )
    assert runtime(("Test", "In", ())) == (
        "invalid value: key Test with operator In must have a value defined in requirements, restricted"
    )


def test_cel_requirements_fail_for_no_values_for_notin_operator():
    """Context("Requirements") It("should fail for no values for NotIn operator")."""
    assert refused(cel_doc({"key": "Test", "operator": "NotIn"})) == (
        "spec.requirements",
        "requirements with operator 'NotIn' must have a value defined",
    )
    assert runtime(("Test", "NotIn", ())) == "key Test with operator NotIn must have a value defined"


def test_cel_requirements_succeed_for_a_valid_requirement_key():
    """Context("Requirements") It("should succeed for valid requirement keys") (the first, one key)."""
    assert [r.key for r in parse_nodeoverlay(cel_doc({"key": "Test", "operator": "Exists"})).requirements] == ["Test"]
    assert runtime(("Test", "Exists", ())) is None


def test_cel_requirements_succeed_for_valid_requirement_keys():
    """Context("Requirements") It("should succeed for valid requirement keys") (the second, four keys)."""
    keys = ["Test", "test.com/Test", "test.com.com/test", "key-only"]
    parsed = parse_nodeoverlay(cel_doc(*({"key": key, "operator": "Exists"} for key in keys)))
    assert [r.key for r in parsed.requirements] == keys
    assert runtime(*((key, "Exists", ()) for key in keys)) is None


@pytest.mark.parametrize(
    ("key", "crd", "problem"),
    [
        (
            "test.com.com}",
            f"Invalid value: \"test.com.com}}\": spec.requirements[0].key in body should match '{KEY_PATTERN}'",
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "Test.com/test",
            f"Invalid value: \"Test.com/test\": spec.requirements[0].key in body should match '{KEY_PATTERN}'",
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
            "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            "test/test/test",
            f"Invalid value: \"test/test/test\": spec.requirements[0].key in body should match '{KEY_PATTERN}'",
            "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
            "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
            "'example.com/MyName')",
        ),
        (
            "test/",
            f"Invalid value: \"test/\": spec.requirements[0].key in body should match '{KEY_PATTERN}'",
            "name part must be non-empty; key test/ is not a qualified name, name part must consist of alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
            "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "/test",
            f"Invalid value: \"/test\": spec.requirements[0].key in body should match '{KEY_PATTERN}'",
            "prefix part must be non-empty",
        ),
    ],
)
def test_cel_requirements_fail_for_invalid_requirement_keys(key, crd, problem):
    """Context("Requirements") It("should fail for invalid requirement keys")."""
    assert refused(cel_doc({"key": key, "operator": "Exists"})) == ("spec.requirements[0].key", crd)
    assert runtime((key, "Exists", ())) == (
        f"invalid value: key {key} is not a qualified name, {problem} in requirements, restricted"
    )


def test_cel_requirements_allow_the_nodepool_label():
    """Context("Requirements") It("should allow for the karpenter.sh/nodepool label")."""
    parsed = parse_nodeoverlay(cel_doc({"key": NODEPOOL, "operator": "In", "values": ["silly-name"]}))
    assert parsed.requirements == (NodeSelectorRequirement(NODEPOOL, "In", ("silly-name",)),)
    assert runtime((NODEPOOL, "In", ("silly-name",))) is None


def test_cel_requirements_fail_at_runtime_for_keys_that_are_too_long():
    """Context("Requirements") It("should fail at runtime for requirement keys that are too long"): the API server
    takes both (the key's 316-byte limit and pattern hold), RuntimeValidate refuses the 264-byte prefix and the
    269-byte name."""
    long_prefix = "test.com.test." + "a1b2c3d4e5" * 25 + "/test"
    for key in (long_prefix, TOO_LONG_NAME):
        assert [r.key for r in parse_nodeoverlay(cel_doc({"key": key, "operator": "Exists"})).requirements] == [key]
    assert runtime((long_prefix, "Exists", ())) == (
        f"invalid value: key {long_prefix} is not a qualified name, prefix part must be no more than 253 bytes in "
        "requirements, restricted"
    )
    assert runtime((TOO_LONG_NAME, "Exists", ())) == (
        f"invalid value: key {TOO_LONG_NAME} is not a qualified name, name part must be no more than 63 bytes in "
        "requirements, restricted"
    )


def test_cel_requirements_allow_supported_ops():
    """Context("Requirements") It("should allow supported ops")."""
    specs = [
        ("In", ("test",)),
        ("Gt", ("1",)),
        ("Lt", ("1",)),
        ("Gte", ("1",)),
        ("Lte", ("1",)),
        ("NotIn", ("1",)),
        ("Exists", ()),
    ]
    parsed = parse_nodeoverlay(cel_doc(*(NodeSelectorRequirement(ZONE, op, v).to_spec() for op, v in specs)))
    assert [r.operator for r in parsed.requirements] == ["In", "Gt", "Lt", "Gte", "Lte", "NotIn", "Exists"]
    assert runtime(*((ZONE, op, v) for op, v in specs)) is None


def test_cel_requirements_fail_for_unsupported_ops():
    """Context("Requirements") It("should fail for unsupported ops")."""
    assert refused(cel_doc({"key": ZONE, "operator": "unknown", "values": ["test"]})) == (
        "spec.requirements[0].operator",
        'Unsupported value: "unknown": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", '
        '"Lte"',
    )
    assert runtime((ZONE, "unknown", ("test",))) == (
        f"invalid value: key {ZONE} has an unsupported operator unknown not in [In NotIn Exists DoesNotExist Gt Lt "
        "Gte Lte] in requirements, restricted"
    )


def test_cel_requirements_fail_for_restricted_domains():
    """Context("Requirements") It("should fail for restricted domains"): v1.RestrictedLabelDomains is karpenter.sh
    (the kwok provider adds karpenter.kwok.sh, which the CRD's rule does not know)."""
    assert refused(cel_doc({"key": "karpenter.sh/test", "operator": "In", "values": ["test"]})) == (
        "spec.requirements[0].key",
        'label domain "karpenter.sh" is restricted',
    )
    assert runtime(("karpenter.sh/test", "In", ("test",))) == (
        f"invalid value: using label karpenter.sh/test {RESTRICTED_TAIL} in requirements, restricted"
    )


@pytest.mark.parametrize("domain", ["kubernetes.io", "k8s.io"])
def test_cel_requirements_allow_kubernetes_domains_exceptions(domain):
    """Context("Requirements") It("should allow kubernetes domains exceptions")."""
    parsed = parse_nodeoverlay(cel_doc({"key": f"{domain}/test", "operator": "In", "values": ["test"]}))
    assert parsed.requirements[0].key == f"{domain}/test"
    assert runtime((f"{domain}/test", "In", ("test",))) is None


@pytest.mark.parametrize("domain", ["kubernetes.io", "k8s.io"])
def test_cel_requirements_allow_kubernetes_subdomains_exceptions(domain):
    """Context("Requirements") It("should allow kubernetes subdomains exceptions")."""
    key = f"subdomain.{domain}/test"
    assert parse_nodeoverlay(cel_doc({"key": key, "operator": "In", "values": ["test"]})).requirements[0].key == key
    assert runtime((key, "In", ("test",))) is None


@pytest.mark.parametrize(
    "key",
    [
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        INSTANCE_TYPE,
        ARCH,
        OS,
        "node.kubernetes.io/windows-build",
    ],
)
def test_cel_requirements_allow_well_known_label_exceptions(key):
    """Context("Requirements") It("should allow well known label exceptions") (v1.WellKnownLabels but the NodePool
    and capacity-type keys)."""
    assert parse_nodeoverlay(cel_doc({"key": key, "operator": "In", "values": ["test"]})).requirements[0].key == key
    assert runtime((key, "In", ("test",))) is None


def test_cel_requirements_capacity_type_is_runtime_validated():
    """The reason It("should allow well known label exceptions") leaves the capacity type out: v1.ValidateRequirement's
    well-known values (an In needs one of on-demand, spot, reserved)."""
    assert parse_nodeoverlay(cel_doc({"key": CAPACITY_TYPE, "operator": "In", "values": ["test"]}))
    assert runtime((CAPACITY_TYPE, "In", ("test",))) == (
        "invalid value: no valid values found in [test] for karpenter.sh/capacity-type, expected one of: "
        "map[on-demand:{} reserved:{} spot:{}], got: [test] in requirements, restricted"
    )
    assert runtime((CAPACITY_TYPE, "In", ("test", "spot"))) is None


def test_cel_requirements_allow_non_empty_set_after_removing_overlapped_value():
    """Context("Requirements") It("should allow non-empty set after removing overlapped value")."""
    zone_in = {"key": ZONE, "operator": "In", "values": ["test", "foo"]}
    zone_not_in = {"key": ZONE, "operator": "NotIn", "values": ["test", "bar"]}
    assert len(parse_nodeoverlay(cel_doc(zone_in, zone_not_in)).requirements) == 2
    assert runtime((ZONE, "In", ("test", "foo")), (ZONE, "NotIn", ("test", "bar"))) is None


def test_cel_requirements_allow_empty_requirements():
    """Context("Requirements") It("should allow empty requirements") (a key with Exists)."""
    assert parse_nodeoverlay(cel_doc({"key": "test", "operator": "Exists"})).requirements[0].key == "test"
    assert runtime(("test", "Exists", ())) is None


@pytest.mark.parametrize("operator", ["Gt", "Lt", "Gte", "Lte"])
@pytest.mark.parametrize("values", [(), ("1", "2"), ("a",), ("-1",)])
def test_cel_requirements_fail_with_invalid_gt_lt_gte_or_lte_values(operator, values):
    """Context("Requirements") It("should fail with invalid GT or LT values") and It("should fail with invalid GTE or
    LTE values")."""
    spec = NodeSelectorRequirement(ZONE, operator, values).to_spec()
    if values == ("-1",):  # not a label value either: the schema's pattern refuses it before the list's rule
        assert refused(cel_doc(spec)) == (
            "spec.requirements[0].values[0]",
            'Invalid value: "-1": spec.requirements[0].values[0] in body should match '
            "'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'",
        )
    else:
        assert refused(cel_doc(spec)) == ("spec.requirements", GT_MESSAGE)
    problem = runtime((ZONE, operator, values))
    assert problem is not None
    assert problem.endswith(
        f"key {ZONE} with operator {operator} must have a single positive integer value in requirements, restricted"
    )


def test_cel_cannot_set_both_price_and_price_adjustment():
    """It("shout not be able to set both price and priceAdjustment")."""
    assert refused(cel_doc(price="0.432", priceAdjustment="+10%")) == (
        "spec",
        "cannot set both 'price' and 'priceAdjustment'",
    )


INVALID_PRICES = [
    "+42",
    ".5",
    "42.",
    "42%",
    "3,14",
    "1e10",
    "0x42",
    "forty-two",
    "42a",
    "42 ",
    " 42",
    "42.0.0",
    "-",
    ".",
]


@pytest.mark.parametrize("value", [*INVALID_PRICES, "-100.0%", "-101.1%", "-129"])
def test_cel_price_adjustment_invalid_input(value):
    """Context("priceAdjustment") DescribeTable("Invalid Input"): its entries set spec.price, as the Go table does."""
    assert refused(cel_doc(price=value)) == (
        "spec.price",
        f"Invalid value: {json_quote(value)}: spec.price in body should match '{PRICE_PATTERN}'",
    )


def json_quote(value: str) -> str:
    return '"' + value + '"'


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1%", id="should not allow an unsigned priceAdjustment percentage"),
        pytest.param("1", id="should not allow an unsigned priceAdjustment integer"),
        pytest.param("1.3", id="should not allow an unsigned priceAdjustment float"),
    ],
)
def test_cel_price_adjustment_must_be_signed(value):
    """Context("priceAdjustment") It("should not allow an unsigned priceAdjustment percentage/integer/float")."""
    field, message = refused(cel_doc(priceAdjustment=value))
    assert field == "spec.priceAdjustment"
    assert message == (
        f'Invalid value: "{value}": spec.priceAdjustment in body should match '
        "'^(([+-]{1}(\\d*\\.?\\d+))|(\\+{1}\\d*\\.?\\d+%)|(^(-\\d{1,2}(\\.\\d+)?%)$)|(-100%))$'"
    )


# Context("priceAdjustment")'s nine It("should allow ...") are test_nodeoverlay.py's
# test_a_price_adjustment_is_signed (its valid cases), which parses each value exactly so.


@pytest.mark.parametrize("value", [*INVALID_PRICES, "-.42"])
def test_cel_price_invalid_input(value):
    """Context("price") DescribeTable("Invalid Input")."""
    assert refused(cel_doc(price=value)) == (
        "spec.price",
        f"Invalid value: {json_quote(value)}: spec.price in body should match '{PRICE_PATTERN}'",
    )


@pytest.mark.parametrize(
    "value", [pytest.param("43", id="should allow integer value"), pytest.param("34.43", id="should allow float value")]
)
def test_cel_price_allows(value):
    """Context("price") It("should allow integer value") and It("should allow float value")."""
    assert parse_nodeoverlay(cel_doc(price=value)).price == value


def test_cel_capacity_allows_custom_resources():
    """Context("Capacity") It("should allow custom resources")."""
    assert parse_nodeoverlay(cel_doc(capacity={FUSE: "1"})).capacity == {FUSE: 1000}
    assert runtime(capacity={FUSE: 1000}) is None


@pytest.mark.parametrize(
    ("resource", "amount"),
    [
        pytest.param("cpu", "1", id="should not allow cpu resources override"),
        pytest.param("memory", "34Gi", id="should not allow memory resources override"),
        pytest.param("pods", "324", id="should not allow pod resources override"),
    ],
)
def test_cel_capacity_refuses_well_known_resources(resource, amount):
    """Context("Capacity") It("should not allow cpu/memory/pod resources override")."""
    assert refused(cel_doc(capacity={resource: amount})) == ("spec.capacity", "invalid resource restricted")
    assert runtime(capacity={resource: parse_quantity(amount)}) == (
        f"invalid capacity: {resource} in resource, restricted"
    )


def test_cel_the_karpenter_domain_rule_reads_a_key_without_a_slash_whole():
    """The CRD's rule `!self.find("^([^/]+)").endsWith("karpenter.sh")`: with no slash the whole key is the domain."""
    assert refused(cel_doc({"key": "karpenter.sh", "operator": "Exists"})) == (
        "spec.requirements[0].key",
        'label domain "karpenter.sh" is restricted',
    )


# suite_test.go: Describe("Validation") ---------------------------------------------------------------------------


def test_validation_returns_the_same_instance_type_when_zero_overlays_are_applied():
    """It("should return the same instance type when zero overlay are applied")."""
    run = reconcile()
    assert only_offering_price(run.types(nodepool("default"))) == 1.020


def test_validation_passes_with_a_single_overlay():
    """It("should pass with a single overlay")."""
    run = reconcile(overlay_doc("single", req(INSTANCE_TYPE, "In", "default-instance-type")))
    assert run.verdict("single") == SUCCEEDED


def test_runtime_validation_fails_for_invalid_requirements_values():
    """Context("Runtime Validation") It("should fail validation for invalid requirements values")."""
    run = reconcile(overlay_doc("invalid", req(TOO_LONG_NAME, "Exists")))
    assert run.verdict("invalid") == (
        "False",
        "RuntimeValidation",
        f"invalid value: key {TOO_LONG_NAME} is not a qualified name, name part must be no more than 63 bytes in "
        "requirements, restricted",
    )


def test_runtime_validation_fails_for_invalid_capacity_values(monkeypatch):
    """Context("Runtime Validation") It("should fail validation for invalid capacity values"): testResource joins
    v1.WellKnownResources (the CRD's rule keeps its own list)."""
    monkeypatch.setattr(
        overlays_module, "RESTRICTED_RESOURCES", (*overlays_module.RESTRICTED_RESOURCES, "testResource")
    )
    run = reconcile(
        overlay_doc("capacity", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity={"testResource": "5"})
    )
    assert run.verdict("capacity") == (
        "False",
        "RuntimeValidation",
        "invalid capacity: testResource in resource, restricted",
    )


def test_instance_type_requirements_fail_when_overlays_overlap():
    """Context("Requirements Validations") Describe("Instance types Requirements") It("should fail when requirements
    overlays overlap"): overlay-b (capacity type Exists) prices every type first, overlay-a's arm64 type clashes."""
    run = reconcile(
        overlay_doc("overlay-a", req(ARCH, "In", "arm64"), price="1.03"),
        overlay_doc("overlay-b", req(CAPACITY_TYPE, "Exists"), price="23"),
        types=fake_catalog(),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)


def test_instance_type_requirements_succeed_when_overlays_do_not_overlap():
    """Describe("Instance types Requirements") It("should succeed with requirements overlays don't overlap")."""
    types = [
        fake_type("arm-instance-type", arch="arm64"),
        fake_type("amd-instance-type", arch="amd64", oses=("ios",)),
    ]
    run = reconcile(
        overlay_doc("overlay-a", req(ARCH, "In", "arm64"), price="1.03"),
        overlay_doc("overlay-b", req(OS, "In", "ios"), price="23"),
        types=types,
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (SUCCEEDED, SUCCEEDED)
    by_name = run.by_name(nodepool("default"))
    assert {o.price for o in by_name["arm-instance-type"].offerings} == {1.03}
    assert {o.price for o in by_name["amd-instance-type"].offerings} == {23.0}


FOUR_OFFERINGS = fake_type(
    "default-instance-type",
    Offering("test-zone-1", "spot", 1.020),
    Offering("test-zone-2", "on-demand", 2.020),
    Offering("test-zone-3", "spot", 3.020),
    Offering("test-zone-4", "reserved", 4.020),
)


@pytest.mark.parametrize(
    ("a", "b", "verdicts"),
    [
        pytest.param(
            req(ZONE, "In", "test-zone-1", "test-zone-4"),
            req(CAPACITY_TYPE, "Exists"),
            (CONFLICT, SUCCEEDED),
            id="should fail with requirements overlays overlap on zone",
        ),
        pytest.param(
            req(CAPACITY_TYPE, "Exists"),
            req(CAPACITY_TYPE, "In", "spot"),
            (CONFLICT, SUCCEEDED),
            id="should fail with requirements overlays overlap on capacity type",
        ),
        pytest.param(
            req(ZONE, "In", "test-zone-6", "test-zone-4"),
            req(CAPACITY_TYPE, "In", "spot"),
            (SUCCEEDED, SUCCEEDED),
            id="should succeed with requirements overlays don't overlap",
        ),
        pytest.param(
            req(ZONE, "In", "test-zone-1", "test-zone-4"),
            req(CAPACITY_TYPE, "In", "spot"),
            (CONFLICT, SUCCEEDED),
            id="should fail with requirements overlays overlap",
        ),
    ],
)
def test_offering_requirements(a, b, verdicts):
    """Context("Requirements Validations") Describe("Offering Requirements"): its four Its."""
    run = reconcile(
        overlay_doc("overlay-a", a, price="1.03"), overlay_doc("overlay-b", b, price="23"), types=[FOUR_OFFERINGS]
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == verdicts


PRICE_PAIRS = {
    "fail-overlapping": [({"price": "1.03"}, {"price": "23"}), ({"priceAdjustment": "+54"}, {"priceAdjustment": "-2"})],
    "same": [({"price": "100"}, {"price": "100"}), ({"priceAdjustment": "+100"}, {"priceAdjustment": "+100"})],
    "exclusive": [({"price": "54"}, {"price": "23"}), ({"priceAdjustment": "+54"}, {"priceAdjustment": "-2"})],
    "weights": [({"price": "34"}, {"price": "2"}), ({"priceAdjustment": "-4"}, {"priceAdjustment": "-2"})],
}
PRICE_IDS = ["Price", "PriceAdjustment"]


@pytest.mark.parametrize(("a", "b"), PRICE_PAIRS["fail-overlapping"], ids=PRICE_IDS)
def test_pricing_updates_fail_when_conflicting_with_overlapping_requirements(a, b):
    """Context("Pricing Updates") DescribeTable("should fail with conflicting pricing updates overlays with
    overlapping requirements")."""
    run = reconcile(
        overlay_doc("overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type"), **a),
        overlay_doc("overlay-b", req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"), **b),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)


@pytest.mark.parametrize(("a", "b"), PRICE_PAIRS["same"], ids=PRICE_IDS)
def test_pricing_updates_fail_when_the_same_with_overlapping_requirements(a, b):
    """Context("Pricing Updates") DescribeTable("should fail with pricing updates are the same overlays with
    overlapping requirements")."""
    run = reconcile(
        overlay_doc("overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type"), **a),
        overlay_doc("overlay-b", req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"), **b),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)


@pytest.mark.parametrize(("a", "b"), PRICE_PAIRS["exclusive"], ids=PRICE_IDS)
def test_pricing_updates_pass_with_mutually_exclusive_requirements(a, b):
    """Context("Pricing Updates") DescribeTable("should pass with conflicting pricing updates overlays with mutually
    exclusive requirements")."""
    run = reconcile(
        overlay_doc("overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type"), **a),
        overlay_doc("overlay-b", req(INSTANCE_TYPE, "NotIn", "default-instance-type"), **b),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (SUCCEEDED, SUCCEEDED)


@pytest.mark.parametrize(("a", "b"), PRICE_PAIRS["weights"], ids=PRICE_IDS)
def test_pricing_updates_pass_with_mutually_exclusive_weights(a, b):
    """Context("Pricing Updates") DescribeTable("should pass with conflicting pricing update overlays with mutually
    exclusive weights")."""
    run = reconcile(
        overlay_doc("overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type"), **a),
        overlay_doc(
            "overlay-b", req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"), weight=20, **b
        ),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (SUCCEEDED, SUCCEEDED)


def fuse(amount: str) -> dict[str, str]:
    return {FUSE: amount}


def test_capacity_adjustment_fails_when_conflicting_with_overlapping_requirements():
    """Context("Capacity Adjustment") It("should fail with conflicting capacity overlays with overlapping
    requirements")."""
    run = reconcile(
        overlay_doc(
            "overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type"), capacity=fuse("1")
        ),
        overlay_doc(
            "overlay-b",
            req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"),
            capacity=fuse("54"),
        ),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)


def test_capacity_adjustment_fails_with_multiple_overlays():
    """Context("Capacity Adjustment") It("should fail with conflicting capacity overlays with multiple overlays"):
    good-overlay-1 (fuse) then conflicting-overlay-2 (hugepage, a resource the lighter-or-equal overlay before it did
    not set) apply; conflicting-overlay-1 sets the hugepage conflicting-overlay-2 set at its weight."""
    run = reconcile(
        overlay_doc(
            "conflicting-overlay-1",
            req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type"),
            capacity={"hugepage-1Gi": "2Gi"},
        ),
        overlay_doc("good-overlay-1", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("1")),
        overlay_doc(
            "conflicting-overlay-2",
            req(INSTANCE_TYPE, "In", "default-instance-type"),
            capacity={"hugepage-1Gi": "3Gi"},
        ),
    )
    assert [run.verdict(n) for n in ("conflicting-overlay-1", "good-overlay-1", "conflicting-overlay-2")] == [
        CONFLICT,
        SUCCEEDED,
        SUCCEEDED,
    ]
    [it] = run.types(nodepool("default")) or []
    assert (it.capacity[FUSE], it.capacity["hugepage-1Gi"]) == (1000, 3 * GI)


def test_capacity_adjustment_the_same_overlays_with_overlapping_requirements_conflict():
    """Context("Capacity Adjustment") It("should pass with capacity adjustment are the same overlays with overlapping
    requirements") (it expects overlay-a to conflict)."""
    run = reconcile(
        overlay_doc(
            "overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type"), capacity=fuse("54")
        ),
        overlay_doc(
            "overlay-b",
            req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"),
            capacity=fuse("54"),
        ),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)


def test_capacity_adjustment_passes_with_mutually_exclusive_requirements():
    """Context("Capacity Adjustment") It("should pass with conflicting capacity overlays with mutually exclusive
    requirements")."""
    run = reconcile(
        overlay_doc("overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("54")),
        overlay_doc("overlay-b", req(INSTANCE_TYPE, "NotIn", "default-instance-type"), capacity=fuse("5")),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (SUCCEEDED, SUCCEEDED)


def test_capacity_adjustment_passes_with_mutually_exclusive_weights():
    """Context("Capacity Adjustment") It("should pass with conflicting capacity overlays with mutually exclusive
    weights"): the heavier overlay-b's 5 wins."""
    run = reconcile(
        overlay_doc("overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("55")),
        overlay_doc(
            "overlay-b",
            req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"),
            weight=20,
            capacity=fuse("5"),
        ),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (SUCCEEDED, SUCCEEDED)
    [it] = run.types(nodepool("default")) or []
    assert it.capacity[FUSE] == 5000


def test_capacity_adjustment_passes_with_non_conflicting_resources():
    """Context("Capacity Adjustment") It("should pass with non conflicting capacity overlays with overlapping
    requirements")."""
    run = reconcile(
        overlay_doc("overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("55")),
        overlay_doc(
            "overlay-b",
            req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type"),
            weight=20,
            capacity={"smarter-devices/buz": "5"},
        ),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (SUCCEEDED, SUCCEEDED)
    [it] = run.types(nodepool("default")) or []
    assert (it.capacity[FUSE], it.capacity["smarter-devices/buz"]) == (55000, 5000)


# suite_test.go: Describe("Instance Type Controller") Context("Price Updates") ---------------------------------------

POOL = nodepool("default")
POOL_TWO = nodepool("nodepool-two")


@PRICE_CHANGES
def test_price_updates_apply_to_the_nodepool_the_overlay_selects(change, expected):
    """Context("Requirements") DescribeTable("should pass with conflicting pricing update overlays with mutually
    exclusive weights"): an overlay on karpenter.sh/nodepool reprices that NodePool's types only."""
    run = reconcile(overlay_doc("overlay", req(NODEPOOL, "In", "default"), **change), pools=(POOL, POOL_TWO))
    assert only_offering_price(run.types(POOL)) == expected
    assert only_offering_price(run.types(POOL_TWO)) == 1.020


@pytest.mark.parametrize(
    ("a", "b", "one", "two"),
    [
        ({"price": "13234.223"}, {"price": "232.11"}, 13234.223, 232.11),
        ({"priceAdjustment": "+1000"}, {"priceAdjustment": "+2500"}, 1001.020, 2501.020),
    ],
    ids=PRICE_IDS,
)
def test_price_updates_pass_with_conflicting_overlays_for_all_nodepools(a, b, one, two):
    """Context("Requirements") DescribeTable("should pass with conflicting pricing update overlays for all
    nodepools")."""
    run = reconcile(
        overlay_doc("overlay-a", req(NODEPOOL, "In", "default"), **a),
        overlay_doc("overlay-b", req(NODEPOOL, "In", "nodepool-two"), **b),
        pools=(POOL, POOL_TWO),
    )
    assert (only_offering_price(run.types(POOL)), only_offering_price(run.types(POOL_TWO))) == (one, two)


@PRICE_CHANGES
def test_price_updates_apply_only_for_nodepool_template_labels_the_overlay_requires(change, expected):
    """Context("Requirements") DescribeTable("should only apply pricing updates for nodeclaim spec labels that defined
    in the overlay requirements")."""
    labelled = nodepool("nodepool-two", labels={"test-label": "test-value"})
    run = reconcile(overlay_doc("overlay", req("test-label", "In", "test-value"), **change), pools=(POOL, labelled))
    assert only_offering_price(run.types(POOL)) == 1.020
    assert only_offering_price(run.types(labelled)) == expected


@PRICE_CHANGES
def test_price_updates_do_not_apply_for_invalid_overlays(change, expected):
    """DescribeTable("should not apply pricing updates for invalid overlays")."""
    run = reconcile(overlay_doc("overlay", req(TOO_LONG_NAME, "Exists"), **change))
    assert run.verdict("overlay")[:2] == ("False", "RuntimeValidation")  # type: ignore[index]
    assert only_offering_price(run.types(POOL)) == 1.02


@PRICE_CHANGES
def test_price_updates_do_not_apply_to_types_the_overlay_does_not_select(change, expected):
    """DescribeTable("should not apply adjustments for overlays that do not overlap with instance types
    requirements")."""
    run = reconcile(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type-not-found"), **change))
    assert only_offering_price(run.types(POOL)) == 1.020
    assert run.verdict("overlay") == SUCCEEDED


@PRICE_CHANGES
def test_price_updates_apply_for_instance_types(change, expected):
    """DescribeTable("should apply pricing updates for instances types")."""
    run = reconcile(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), **change))
    assert only_offering_price(run.types(POOL)) == expected


@pytest.mark.parametrize(
    ("change", "expected"), [({"price": "12321.32"}, 12321.32), ({"priceAdjustment": "+1000"}, 1005.020)], ids=PRICE_IDS
)
def test_price_updates_apply_for_a_capacity_type(change, expected):
    """DescribeTable("should apply pricing updates for instances types for capacity type")."""
    two = fake_type("default-instance-type", spot("test-zone-1", 1.020), Offering("test-zone-1", "on-demand", 5.020))
    run = reconcile(overlay_doc("overlay", req(CAPACITY_TYPE, "In", "on-demand"), **change), types=[two])
    [it] = run.types(POOL) or []
    assert prices(it) == {("test-zone-1", "spot"): 1.020, ("test-zone-1", "on-demand"): pytest.approx(expected)}


@pytest.mark.parametrize(
    ("change", "expected"), [({"price": "121.421"}, 121.421), ({"priceAdjustment": "+1000"}, 1001.020)], ids=PRICE_IDS
)
def test_price_updates_apply_for_an_availability_zone(change, expected):
    """DescribeTable("should apply pricing updates for instances types for availability zone")."""
    two = fake_type("default-instance-type", spot("test-zone-1", 1.020), spot("test-zone-2", 5.020))
    run = reconcile(overlay_doc("overlay", req(ZONE, "In", "test-zone-1"), **change), types=[two])
    [it] = run.types(POOL) or []
    assert prices(it) == {("test-zone-1", "spot"): pytest.approx(expected), ("test-zone-2", "spot"): 5.020}


THREE_OFFERINGS = fake_type(
    "default-instance-type",
    Offering("test-zone-1", "spot", 1.020),
    Offering("test-zone-2", "on-demand", 2.020),
    Offering("test-zone-4", "reserved", 4.020),
)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({"price": "121.421"}, {"price": "165.421"}, (121.421, 121.421, 165.421)),
        ({"priceAdjustment": "+201"}, {"priceAdjustment": "-0.5"}, (203.020, 205.020, 0.52)),
    ],
    ids=PRICE_IDS,
)
def test_price_updates_offerings_from_multiple_overlays(a, b, expected):
    """DescribeTable("should update price updates offerings instance types from multiple overlays")."""
    run = reconcile(
        overlay_doc("overlay-zones", req(ZONE, "In", "test-zone-2", "test-zone-4"), **a),
        overlay_doc("overlay-spot", req(CAPACITY_TYPE, "In", "spot"), **b),
        types=[THREE_OFFERINGS],
    )
    [it] = run.types(POOL) or []
    assert prices(it) == {
        ("test-zone-2", "on-demand"): pytest.approx(expected[0]),
        ("test-zone-4", "reserved"): pytest.approx(expected[1]),
        ("test-zone-1", "spot"): pytest.approx(expected[2]),
    }


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({"price": "121.421"}, {"price": "165.421"}, (121.421, 165.421)),
        ({"priceAdjustment": "+201"}, {"priceAdjustment": "-1.5"}, (203.020, 2.520)),
    ],
    ids=PRICE_IDS,
)
def test_price_updates_offerings_from_multiple_overlays_with_different_weights(a, b, expected):
    """DescribeTable("should update price updates offerings instance types from multiple overlays with different
    weights"): a-test-100 (weight 20) prices zone 2 first, b-test-100 only zone 4 then."""
    run = reconcile(
        overlay_doc("a-test-100", req(ZONE, "In", "test-zone-2"), weight=20, **a),
        overlay_doc("b-test-100", req(ZONE, "In", "test-zone-2", "test-zone-4"), **b),
        types=[THREE_OFFERINGS],
    )
    [it] = run.types(POOL) or []
    assert prices(it) == {
        ("test-zone-1", "spot"): 1.020,
        ("test-zone-2", "on-demand"): pytest.approx(expected[0]),
        ("test-zone-4", "reserved"): pytest.approx(expected[1]),
    }


OVERLAID = {
    "default-instance-type": False,
    "small-instance-type": True,
    "gpu-vendor-instance-type": True,
    "gpu-vendor-b-instance-type": False,
    "arm-instance-type": False,
    "single-pod-instance-type": False,
}


@pytest.mark.parametrize(
    ("a", "b"),
    [({"price": "382"}, {"price": "100"}), ({"priceAdjustment": "-23"}, {"priceAdjustment": "+10"})],
    ids=PRICE_IDS,
)
def test_price_updates_do_not_partially_apply_instance_types_in_a_nodepool(a, b):
    """DescribeTable("should not partial apply instance types in a nodepool"): overlay-a conflicts on
    small-instance-type and so changes none of its types."""
    run = reconcile(
        overlay_doc(
            "overlay-a",
            req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type", "gpu-vendor-b-instance-type"),
            **a,
        ),
        overlay_doc("overlay-b", req(INSTANCE_TYPE, "In", "small-instance-type", "gpu-vendor-instance-type"), **b),
        types=fake_catalog(),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)
    assert {name: it.price_overlaid for name, it in run.by_name(POOL).items()} == OVERLAID


@pytest.mark.parametrize(
    ("a", "b"),
    [({"price": "382"}, {"price": "100"}), ({"priceAdjustment": "+10"}, {"priceAdjustment": "-23"})],
    ids=PRICE_IDS,
)
def test_price_updates_do_not_partially_apply_for_a_subset_of_nodepools(a, b):
    """DescribeTable("should not partial apply for a subset of nodepools") (the fake provider gives each NodePool all
    six types, whatever its requirements)."""
    pool = nodepool(
        "default",
        req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type", "gpu-vendor-b-instance-type"),
    )
    two = nodepool("nodepool-two", req(INSTANCE_TYPE, "In", "gpu-vendor-b-instance-type"))
    run = reconcile(
        overlay_doc(
            "overlay-a",
            req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type", "gpu-vendor-b-instance-type"),
            **a,
        ),
        overlay_doc("overlay-b", req(INSTANCE_TYPE, "In", "small-instance-type", "gpu-vendor-instance-type"), **b),
        pools=(pool, two),
        types=fake_catalog(),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)
    assert {name: it.price_overlaid for name, it in run.by_name(pool).items()} == OVERLAID
    assert {name: it.price_overlaid for name, it in run.by_name(two).items()} == OVERLAID


# suite_test.go: Describe("Instance Type Controller") Context("Capacity") -------------------------------------------


def test_capacity_applies_only_for_the_nodepool_the_overlay_requires():
    """Context("Requirements") It("should only apply override for nodepool that defined in the overlay
    requirements")."""
    run = reconcile(overlay_doc("overlay", req(NODEPOOL, "In", "default"), capacity=fuse("1")), pools=(POOL, POOL_TWO))
    [it] = run.types(POOL) or []
    assert it.capacity[FUSE] == 1000
    [other] = run.types(POOL_TWO) or []
    assert FUSE not in other.capacity


def test_capacity_passes_with_conflicting_overlays_for_all_nodepools():
    """Context("Requirements") It("should pass with conflicting capcaity update overlays for all nodepools")."""
    run = reconcile(
        overlay_doc("overlay-a", req(NODEPOOL, "In", "default"), capacity=fuse("1")),
        overlay_doc("overlay-b", req(NODEPOOL, "In", "nodepool-two"), capacity={"dumb-devices/bar": "2"}),
        pools=(POOL, POOL_TWO),
    )
    [one] = run.types(POOL) or []
    [two] = run.types(POOL_TWO) or []
    assert (one.capacity[FUSE], two.capacity["dumb-devices/bar"]) == (1000, 2000)
    assert "dumb-devices/bar" not in one.capacity and FUSE not in two.capacity


def test_capacity_applies_only_for_nodepool_template_labels_the_overlay_requires():
    """Context("Requirements") It("should only apply price adjustments for nodeclaim spec labels that defined in the
    overlay requirements") (a capacity overlay)."""
    labelled = nodepool("nodepool-two", labels={"test-label": "test-value"})
    run = reconcile(
        overlay_doc("overlay", req("test-label", "In", "test-value"), capacity=fuse("1")), pools=(POOL, labelled)
    )
    [one] = run.types(POOL) or []
    [two] = run.types(labelled) or []
    assert FUSE not in one.capacity and two.capacity[FUSE] == 1000


def test_capacity_adjustments_do_not_apply_for_an_invalid_overlay():
    """It("should not apply capacity adjustments for invalid overlay")."""
    run = reconcile(overlay_doc("overlay", req(TOO_LONG_NAME, "Exists"), capacity=fuse("1")))
    [it] = run.types(POOL) or []
    assert FUSE not in it.capacity and not it.capacity_overlaid


def test_capacity_adjustments_do_not_apply_for_types_that_do_not_overlap():
    """It("should not apply capacity adjustments for instances types that do not overlap")."""
    run = reconcile(
        overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type-not-found"), capacity=fuse("1"))
    )
    [it] = run.types(POOL) or []
    assert FUSE not in it.capacity and not it.capacity_overlaid


def test_capacity_adjustments_apply_for_instance_types():
    """It("should apply capacity adjustments for instances types")."""
    run = reconcile(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("1")))
    [it] = run.types(POOL) or []
    assert (it.capacity[FUSE], it.capacity_overlaid) == (1000, True)
    assert it.capacity["cpu"] == 4000  # what the overlay does not name stays


ZONE_TYPES = [
    fake_type("default-instance-type-zone-one", Offering("test-zone-1", "spot", 1.020)),
    fake_type("default-instance-type-zone-two", Offering("test-zone-2", "on-demand", 2.020)),
    fake_type("default-instance-type-zone-four", Offering("test-zone-4", "reserved", 4.020)),
]


def test_capacity_updates_instance_types_from_multiple_overlays():
    """It("should update capacity for instance types from multiple overlays")."""
    run = reconcile(
        overlay_doc("overlay-zones", req(ZONE, "In", "test-zone-2", "test-zone-4"), capacity=fuse("1")),
        overlay_doc("overlay-spot", req(CAPACITY_TYPE, "In", "spot"), capacity={"hugepages-1Gi": "2Gi"}),
        types=ZONE_TYPES,
    )
    by_name = run.by_name(POOL)
    assert [only_offering_price([by_name[it.name]]) for it in ZONE_TYPES] == [1.020, 2.020, 4.020]
    assert by_name["default-instance-type-zone-one"].capacity["hugepages-1Gi"] == 2 * GI
    assert FUSE not in by_name["default-instance-type-zone-one"].capacity
    assert by_name["default-instance-type-zone-two"].capacity[FUSE] == 1000
    assert by_name["default-instance-type-zone-four"].capacity[FUSE] == 1000


def test_capacity_updates_one_instance_type_from_multiple_overlays():
    """It("should update capacity for one instance types from multiple overlays")."""
    run = reconcile(
        overlay_doc("overlay-fuse", req(INSTANCE_TYPE, "In", "default-instance-type-zone-one"), capacity=fuse("1")),
        overlay_doc(
            "overlay-pages",
            req(INSTANCE_TYPE, "In", "default-instance-type-zone-one"),
            capacity={"hugepages-1Gi": "2Gi"},
        ),
        types=ZONE_TYPES[:1],
    )
    [it] = run.types(POOL) or []
    assert only_offering_price([it]) == 1.020
    assert (it.capacity["hugepages-1Gi"], it.capacity[FUSE]) == (2 * GI, 1000)


def test_capacity_updates_from_multiple_overlays_with_different_weights():
    """It("should update price offerings instance types from multiple overlays with different weights") (capacity
    overlays)."""
    run = reconcile(
        overlay_doc("overlay-heavy", req(ZONE, "In", "test-zone-2"), weight=20, capacity=fuse("1")),
        overlay_doc("overlay-light", req(ZONE, "In", "test-zone-2", "test-zone-4"), capacity={"hugepages-1Gi": "2Gi"}),
        types=ZONE_TYPES,
    )
    by_name = run.by_name(POOL)
    two, four = by_name["default-instance-type-zone-two"], by_name["default-instance-type-zone-four"]
    assert (only_offering_price([two]), two.capacity[FUSE], two.capacity["hugepages-1Gi"]) == (2.020, 1000, 2 * GI)
    assert (only_offering_price([four]), four.capacity["hugepages-1Gi"]) == (4.020, 2 * GI)
    assert FUSE not in four.capacity


def test_capacity_applies_the_higher_weight_overlay_on_the_same_instance_type():
    """It("should apply higher weight overlay when multiple overlays match the same instance type")."""
    run = reconcile(
        overlay_doc("overlay-a", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("5")),
        overlay_doc("overlay-b", req(INSTANCE_TYPE, "In", "default-instance-type"), weight=20, capacity=fuse("99")),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (SUCCEEDED, SUCCEEDED)
    [it] = run.types(POOL) or []
    assert it.capacity[FUSE] == 99000


CAPACITY_OVERLAID = OVERLAID


def test_capacity_is_not_partially_applied_to_instance_types():
    """It("should that there is not a partial application for instance types")."""
    run = reconcile(
        overlay_doc(
            "overlay-a",
            req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type", "gpu-vendor-b-instance-type"),
            capacity={"smarter-devices/buz": "54"},
        ),
        overlay_doc(
            "overlay-b",
            req(INSTANCE_TYPE, "In", "small-instance-type", "gpu-vendor-instance-type"),
            capacity={"smarter-devices/buz": "21"},
        ),
        types=fake_catalog(),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)
    assert {name: it.capacity_overlaid for name, it in run.by_name(POOL).items()} == CAPACITY_OVERLAID
    assert run.by_name(POOL)["small-instance-type"].capacity["smarter-devices/buz"] == 21000


def test_capacity_is_not_partially_applied_to_nodepools():
    """It("should that there is not a partial application for nodepools")."""
    pool = nodepool(
        "default",
        req(INSTANCE_TYPE, "In", "default-instance-type", "gpu-vendor-instance-type", "gpu-vendor-b-instance-type"),
    )
    two = nodepool("nodepool-two", req(INSTANCE_TYPE, "In", "gpu-vendor-b-instance-type"))
    run = reconcile(
        overlay_doc(
            "overlay-a",
            req(INSTANCE_TYPE, "In", "default-instance-type", "small-instance-type"),
            capacity={"smarter-devices/buz": "54"},
        ),
        overlay_doc(
            "overlay-b",
            req(INSTANCE_TYPE, "In", "small-instance-type", "gpu-vendor-instance-type"),
            capacity={"smarter-devices/buz": "21"},
        ),
        pools=(pool, two),
        types=fake_catalog(),
    )
    assert (run.verdict("overlay-a"), run.verdict("overlay-b")) == (CONFLICT, SUCCEEDED)
    assert {name: it.capacity_overlaid for name, it in run.by_name(pool).items()} == CAPACITY_OVERLAID
    assert {name: it.capacity_overlaid for name, it in run.by_name(two).items()} == CAPACITY_OVERLAID


def test_pricing_and_capacity_from_two_overlays_on_the_same_instance_type():
    """It("should apply pricing and capacity adjustment from two overlays on the same instance type")."""
    run = reconcile(
        overlay_doc("overlay-price", req(INSTANCE_TYPE, "In", "default-instance-type"), priceAdjustment="+1000.0"),
        overlay_doc("overlay-capacity", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("1")),
    )
    [it] = run.types(POOL) or []
    assert only_offering_price([it]) == pytest.approx(1001.020)
    assert (it.capacity[FUSE], it.price_overlaid, it.capacity_overlaid) == (1000, True, True)


def test_an_empty_instance_type_set_when_the_provider_returns_none():
    """It("should have an empty instance types set when cloudprovider does not return instance types")."""
    run = reconcile(
        overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("1")), types=[]
    )
    assert run.types(POOL) == []
    assert run.verdict("overlay") == SUCCEEDED


def test_no_instance_types_when_the_provider_fails_for_the_nodepool():
    """It("should have an empty instance types set when cloudprovider return an error"): the overlay is still judged
    (statuses are written before the reconcile returns its error)."""
    store = ObjectStore(clock=lambda: 0.0)
    store.create(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("1")))
    cloud = FakeCloud([DEFAULT_TYPE])
    cloud.errors.add("default")
    ctx = ClusterContext(store, cloud, 0.0, random.Random(0), [POOL], {}, {}, {}, options=ON)  # type: ignore[arg-type]
    run = Run(store, ctx, cloud, NodeOverlayController())
    run.controller.reconcile(ctx)
    assert run.types(POOL) is None
    assert run.verdict("overlay") == SUCCEEDED


def test_overlaid_types_carry_no_nodepool_nodeclass_or_template_label_requirements():
    """It("should not return instance type requirements with nodepool, nodeclass, and custom nodepool labels")."""
    labelled = nodepool("default", labels={"test-label": "test-value"})
    run = reconcile(
        overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("1")),
        pools=(labelled,),
    )
    [it] = run.types(labelled) or []
    assert it.capacity_overlaid
    assert set(it.requirements.keys()) == set(DEFAULT_TYPE.requirements.keys())
    assert not {NODEPOOL, "test-label", "karpenter.kwok.sh/kwoknodeclass"} & set(it.requirements.keys())


# suite_test.go: Describe("Failure Isolation") ----------------------------------------------------------------------

BROKEN = nodepool("broken")


def broken_run(*docs: dict) -> Run:
    store = ObjectStore(clock=lambda: 0.0)
    for doc in docs:
        store.create(copy.deepcopy(doc))
    cloud = FakeCloud([DEFAULT_TYPE])
    cloud.errors.add("broken")
    ctx = ClusterContext(store, cloud, 0.0, random.Random(0), [POOL, BROKEN], {}, {}, {}, options=ON)  # type: ignore[arg-type]
    run = Run(store, ctx, cloud, NodeOverlayController())
    run.controller.reconcile(ctx)
    return run


def test_failure_isolation_evaluates_healthy_nodepools_when_one_fails():
    """It("should evaluate healthy NodePools when one NodePool fails GetInstanceTypes")."""
    run = broken_run(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), price="7"))
    assert only_offering_price(run.types(POOL)) == 7.0
    assert run.types(BROKEN) is None


def test_failure_isolation_updates_the_store_even_when_one_nodepool_fails():
    """It("should update the store even when one NodePool fails"): the healthy NodePool's types are overlaid."""
    run = broken_run(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), capacity=fuse("1")))
    assert run.ctx.overlays is not None
    [it] = run.types(POOL) or []
    assert it.capacity[FUSE] == 1000
    assert run.verdict("overlay") == SUCCEEDED


def test_failure_isolation_recovers_when_a_failing_nodepool_becomes_healthy():
    """It("should recover when a previously failing NodePool becomes healthy") (with an overlay on every NodePool, so
    the recovered NodePool's evaluation shows)."""
    run = broken_run(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), price="7"))
    assert run.types(BROKEN) is None
    run.cloud.errors.clear()
    run.reconcile()
    assert only_offering_price(run.types(POOL)) == 7.0
    assert only_offering_price(run.types(BROKEN)) == 7.0


def test_failure_isolation_a_nodepool_is_unevaluated_before_the_first_reconcile():
    """It("should update the store even when one NodePool fails") (its first half, after store.Reset(): "Before
    reconcile, healthy pool should be unevaluated"): ApplyAll answers UnevaluatedNodePoolError, so no types."""
    store = ObjectStore(clock=lambda: 0.0)
    ctx = ClusterContext(store, FakeCloud([DEFAULT_TYPE]), 0.0, random.Random(0), [POOL], {}, {}, {}, options=ON)  # type: ignore[arg-type]
    assert ctx.awaiting_overlays(POOL)
    assert ctx.instance_types_for(POOL) is None
    NodeOverlayController().reconcile(ctx)
    assert not ctx.awaiting_overlays(POOL)
    assert ctx.instance_types_for(POOL) == [DEFAULT_TYPE]


def test_failure_isolation_a_failing_nodepool_is_not_evaluated():
    """It("should evaluate healthy NodePools when one NodePool fails GetInstanceTypes"): "The broken NodePool should
    NOT be in evaluatedNodePools", while the healthy one is."""
    run = broken_run()
    assert run.ctx.overlays is not None
    assert run.ctx.overlays.evaluated == frozenset({"default"})
    assert run.ctx.awaiting_overlays(BROKEN) and not run.ctx.awaiting_overlays(POOL)


def test_without_the_gate_no_nodepool_awaits_overlays():
    """The undecorated provider (options.FeatureGates.NodeOverlay false, overlay/cloudprovider.go:50): the store is
    never asked, so no NodePool waits for an evaluation."""
    store = ObjectStore(clock=lambda: 0.0)
    off = KarpenterOptions(feature_gates=parse_feature_gates("NodeOverlay=false"))
    ctx = ClusterContext(store, FakeCloud([DEFAULT_TYPE]), 0.0, random.Random(0), [POOL], {}, {}, {}, options=off)  # type: ignore[arg-type]
    assert not ctx.awaiting_overlays(POOL)
    assert ctx.instance_types_for(POOL) == [DEFAULT_TYPE]


# controller.go Reconcile: the store is swapped in only after every status is written -------------------------------


def failing_status_writes(run: Run, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every NodeOverlay status write fails (the API server refuses the patch); the names it was tried for."""
    tried: list[str] = []
    update = run.store.update

    def refuse(obj: dict, **kwargs: Any) -> dict:
        if obj["kind"] == "NodeOverlay":
            tried.append(obj["metadata"]["name"])
            raise RuntimeError("the server is currently unable to handle the request")
        return update(obj, **kwargs)

    monkeypatch.setattr(run.store, "update", refuse)
    return tried


def test_a_failed_status_write_keeps_the_last_store(monkeypatch):
    """updateOverlayStatuses failing returns before UpdateStore (controller.go:120-128): the new overlay's price is
    not applied, the last evaluation's is; once the write succeeds, the new store is swapped in."""
    run = reconcile(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), price="7"))
    assert only_offering_price(run.types(POOL)) == 7.0
    kept = run.ctx.overlays
    run.store.create(overlay_doc("heavier", req(INSTANCE_TYPE, "In", "default-instance-type"), weight=20, price="3"))
    tried = failing_status_writes(run, monkeypatch)
    run.controller.reconcile(run.ctx)
    assert tried == ["heavier"]
    assert run.ctx.overlays is kept
    assert only_offering_price(run.types(POOL)) == 7.0
    assert run.verdict("heavier") is None
    monkeypatch.undo()
    run.ctx.now = 1.0  # past the failed write's backoff
    run.controller.reconcile(run.ctx)
    assert only_offering_price(run.types(POOL)) == 3.0
    assert run.verdict("heavier") == SUCCEEDED


def test_a_nodepool_added_while_status_writes_fail_stays_unevaluated(monkeypatch):
    """A NodePool the store in force did not evaluate has no instance types (UnevaluatedNodePoolError) until a
    reconcile's statuses are all written; the evaluated one keeps its overlaid types meanwhile."""
    run = reconcile(overlay_doc("overlay", req(INSTANCE_TYPE, "In", "default-instance-type"), price="7"))
    run.store.create(overlay_doc("other", req(INSTANCE_TYPE, "In", "default-instance-type"), weight=20, price="3"))
    run.ctx.nodepools = [POOL, POOL_TWO]
    failing_status_writes(run, monkeypatch)
    run.controller.reconcile(run.ctx)
    assert run.ctx.awaiting_overlays(POOL_TWO)
    assert run.types(POOL_TWO) is None
    assert only_offering_price(run.types(POOL)) == 7.0
    monkeypatch.undo()
    run.ctx.now = 1.0
    run.controller.reconcile(run.ctx)
    assert only_offering_price(run.types(POOL_TWO)) == 3.0


# store_test.go ------------------------------------------------------------------------------------------------------

M5_LARGE = fake_type("m5.large", Offering("us-west-2a", "on-demand", 0.096), Offering("us-west-2b", "on-demand", 0.096))


def test_store_applies_a_price_overlay_to_specific_offerings():
    """Describe("Store Apply Correctness") It("should correctly apply price overlay to specific offerings")."""
    result = evaluate(
        [
            NodeOverlay(
                "o", (NodeSelectorRequirement(ZONE, "In", ("us-west-2a",)),), price_adjustment="+0.01", weight=10
            )
        ],
        [(POOL, [M5_LARGE])],
    )
    [it] = result.apply("default", [M5_LARGE])
    assert [(o.price, o.price_overlaid) for o in it.offerings] == [(pytest.approx(0.106), True), (0.096, False)]
    assert it.offerings[1] is M5_LARGE.offerings[1]
    assert M5_LARGE.offerings[0].price == 0.096


def test_store_carries_over_dynamic_resources():
    """Describe("Store Apply Correctness") It("should carry over DynamicResources when overlays are applied")."""
    devices = ({"driver": "gpu.example.com", "pool": "m5.large", "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]},)
    gpu = replace(M5_LARGE, devices=devices)
    result = evaluate(
        [
            NodeOverlay(
                "o",
                (NodeSelectorRequirement(INSTANCE_TYPE, "In", ("m5.large",)),),
                price_adjustment="+0.01",
                capacity=parse_resources({"hugepages-2Mi": "100Mi"}),
            )
        ],
        [(POOL, [gpu])],
    )
    [it] = result.apply("default", [gpu])
    assert it.devices == devices and it.capacity_overlaid and it.price_overlaid


def test_store_applies_a_capacity_overlay():
    """Describe("Store Apply Correctness") It("should correctly apply capacity overlay")."""
    base = replace(M5_LARGE, capacity={**M5_LARGE.capacity, "memory": 8 * GI, "cpu": 2000})
    result = evaluate(
        [
            NodeOverlay(
                "o",
                (NodeSelectorRequirement(INSTANCE_TYPE, "In", ("m5.large",)),),
                capacity=parse_resources({"hugepages-2Mi": "100Mi"}),
            )
        ],
        [(POOL, [base])],
    )
    [it] = result.apply("default", [base])
    assert (it.capacity["hugepages-2Mi"], it.capacity["memory"]) == (100 * 2**20 * MILLI, 8 * GI)
    assert "hugepages-2Mi" not in base.capacity


def test_store_applies_different_overlays_to_different_nodepools():
    """Describe("Store Apply Isolation Between NodePools") It("should apply different overlays to different node
    pools")."""
    one = fake_type("m5.large", Offering("us-west-2a", "on-demand", 0.096))
    a, b = nodepool("nodepool-a"), nodepool("nodepool-b")
    result = evaluate(
        [
            NodeOverlay("up", (NodeSelectorRequirement(NODEPOOL, "In", ("nodepool-a",)),), price_adjustment="+10%"),
            NodeOverlay("down", (NodeSelectorRequirement(NODEPOOL, "In", ("nodepool-b",)),), price_adjustment="-5%"),
        ],
        [(a, [one]), (b, [one])],
    )
    [for_a], [for_b] = result.apply("nodepool-a", [one]), result.apply("nodepool-b", [one])
    assert (for_a.offerings[0].price, for_b.offerings[0].price) == (pytest.approx(0.1056), pytest.approx(0.0912))
    assert one.offerings[0].price == 0.096


def test_store_integrates_overlays_through_the_public_interface():
    """Describe("NodeOverlay Store Integration") It("should integrate overlays through the public interface"): hugepages
    on m5.large and its spot offering repriced, m5.xlarge untouched."""
    large = fake_type("m5.large", Offering("us-west-2a", "on-demand", 0.096), Offering("us-west-2a", "spot", 0.0288))
    xlarge = fake_type("m5.xlarge", Offering("us-west-2a", "on-demand", 0.192))
    result = evaluate(
        [
            NodeOverlay(
                "o",
                (
                    NodeSelectorRequirement(INSTANCE_TYPE, "In", ("m5.large",)),
                    NodeSelectorRequirement(CAPACITY_TYPE, "In", ("spot",)),
                ),
                weight=100,
                capacity=parse_resources({"hugepages-2Mi": "100Mi"}),
            )
        ],
        [(POOL, [large, xlarge])],
    )
    got_large, got_xlarge = result.apply("default", [large, xlarge])
    assert got_large.capacity["hugepages-2Mi"] == 100 * 2**20 * MILLI
    assert "hugepages-2Mi" not in got_xlarge.capacity and got_xlarge is xlarge
    assert "hugepages-2Mi" not in large.capacity

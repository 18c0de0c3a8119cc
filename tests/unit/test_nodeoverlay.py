"""NodeOverlay (karpenter.sh/v1alpha1, Karpenter v1.7, gate NodeOverlay): its schema, how overlays combine and
conflict, and their effect on what the lab launches.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/apis/v1alpha1/nodeoverlay_validation_test.go, pkg/controllers/nodeoverlay
suite_test.go (Describe "Validation": Runtime Validation, Pricing Updates, Capacity Adjustment; Describe "Instance Type
Controller") and pkg/cloudprovider/types.go's AdjustedPrice.
"""

import copy

import pytest

from provisioner.controllers.nodeoverlay import NodeOverlayController
from provisioner.lab import Lab
from provisioner.manifests import ManifestError
from provisioner.manifests.nodeoverlay import parse_nodeoverlay
from provisioner.objects import NodeSelectorRequirement
from provisioner.options import KarpenterOptions, parse_feature_gates
from provisioner.overlays import NodeOverlay, adjusted_price, evaluate
from provisioner.quantity import parse_resources
from tests.builders import fake_catalog, nodepool
from tests.lab_builders import KWOK_CLASS, condition, config_of, deployment, lab, nodepool_doc

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ON = KarpenterOptions(feature_gates=parse_feature_gates("NodeOverlay=true"))


def doc(**spec):
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "overlay"},
        "spec": {"requirements": [], **spec},
    }


# The CRD's schema and rules (nodeoverlay_validation_test.go) --------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"requirements": [{"key": "a", "operator": "In"}]},
            "spec.requirements",
            "requirements with operator 'In' must have a value defined",
        ),
        (
            {"requirements": [{"key": "a", "operator": "NotIn"}]},
            "spec.requirements",
            "requirements with operator 'NotIn' must have a value defined",
        ),
        (
            {"requirements": [{"key": "karpenter.sh/custom", "operator": "Exists"}]},
            "spec.requirements[0].key",
            'label domain "karpenter.sh" is restricted',
        ),
        (
            {"requirements": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]},
            "spec.requirements[0].key",
            'label "kubernetes.io/hostname" is restricted',
        ),
        (
            {"requirements": [{"key": "a", "operator": "Gte", "values": ["x"]}]},
            "spec.requirements",
            "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",
        ),
        ({"price": "1", "priceAdjustment": "+10%"}, "spec", "cannot set both 'price' and 'priceAdjustment'"),
        ({"capacity": {"cpu": "1"}}, "spec.capacity", "invalid resource restricted"),
        ({"weight": 10001}, "spec.weight", "must be less than or equal to 10000, got 10001"),
    ],
)
def test_the_crd_refuses_what_kube_apiserver_would(spec, field, message):
    with pytest.raises(ManifestError) as error:
        parse_nodeoverlay(doc(**spec))
    assert (error.value.field, error.value.message) == (field, message)


def test_requirements_are_required():
    with pytest.raises(ManifestError) as error:
        parse_nodeoverlay({**doc(), "spec": {"price": "1"}})
    assert (error.value.field, error.value.message) == ("spec.requirements", "Required value")


def test_the_nodepool_label_and_capacity_type_may_be_selected():  # "should allow for the karpenter.sh/nodepool label"
    overlay = parse_nodeoverlay(
        doc(
            requirements=[
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["a"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            ]
        )
    )
    assert [r.key for r in overlay.requirements] == ["karpenter.sh/nodepool", "karpenter.sh/capacity-type"]


@pytest.mark.parametrize(
    "value", ["+42", ".5", "42.", "42%", "3,14", "1e10", "0x42", "forty-two", "42a", "42 ", " 42", "42.0.0", "-", "."]
)
def test_a_price_is_a_plain_non_negative_number(value):  # Context("price") Invalid Input
    with pytest.raises(ManifestError) as error:
        parse_nodeoverlay(doc(price=value))
    assert error.value.field == "spec.price"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("+1%", True),
        ("-1%", True),
        ("-100%", True),
        ("+100.102%", True),
        ("+298%", True),
        ("+43", True),
        ("-43", True),
        ("+34.43", True),
        ("-34.43", True),
        ("1%", False),
        ("1", False),
        ("1.3", False),
        ("-100.0%", False),
        ("-101.1%", False),
        ("-129%", False),
    ],
)
def test_a_price_adjustment_is_signed(value, valid):  # Context("priceAdjustment")
    if valid:
        assert parse_nodeoverlay(doc(priceAdjustment=value)).price_adjustment == value
    else:
        with pytest.raises(ManifestError):
            parse_nodeoverlay(doc(priceAdjustment=value))


@pytest.mark.parametrize(
    ("price", "change", "expected"),
    [
        (1.02, "13234.223", 13234.223),
        (1.02, "+1000", 1001.02),
        (10.0, "-10%", 9.0),
        (10.0, "+50%", 15.0),
        (10.0, "-100%", 0.0),
        (1.0, "-5", 0.0),
        (1.0, None, 1.0),
    ],
)
def test_adjusted_prices(price, change, expected):
    assert adjusted_price(price, change) == pytest.approx(expected)


# How overlays combine (nodeoverlay/suite_test.go) ----------------------------------------------------------------


def overlay(name, *types, weight=10, **spec):
    requirements = (NodeSelectorRequirement(INSTANCE_TYPE, "In", tuple(types)),) if types else ()
    return NodeOverlay(name, requirements, weight=weight, **spec)


POOL = [(nodepool("default"), fake_catalog())]


@pytest.mark.parametrize(
    ("a", "b"), [({"price": "1.03"}, {"price": "23"}), ({"price_adjustment": "+54"}, {"price_adjustment": "-2"})]
)
def test_two_overlays_of_one_weight_pricing_one_type_conflict_and_the_later_is_refused(a, b):
    """ "should fail with conflicting pricing updates overlays with overlapping requirements": equal weights go in
    name order, descending, so overlay-b applies and overlay-a conflicts."""
    result = evaluate(
        [
            overlay("overlay-a", "default-instance-type", "small-instance-type", **a),
            overlay("overlay-b", "default-instance-type", "gpu-vendor-instance-type", **b),
        ],
        POOL,
    )
    assert result.conflicts == ["overlay-a"]
    applied = {it.name: it for it in result.apply("default", fake_catalog())}
    assert applied["small-instance-type"].offerings == fake_catalog()[1].offerings  # nothing of overlay-a applies


def test_overlays_of_different_weights_do_not_conflict_and_the_heavier_prices():
    """ "should apply higher weight overlay when multiple overlays match the same instance type"."""
    result = evaluate(
        [
            overlay("light", "default-instance-type", weight=10, price="5"),
            overlay("heavy", "default-instance-type", weight=20, price="1"),
        ],
        POOL,
    )
    assert result.conflicts == []
    [default] = [it for it in result.apply("default", fake_catalog()) if it.name == "default-instance-type"]
    assert {o.price for o in default.offerings} == {1.0} and all(o.price_overlaid for o in default.offerings)


def test_overlays_on_types_apart_do_not_conflict():  # "should pass ... with mutually exclusive requirements"
    result = evaluate(
        [overlay("a", "small-instance-type", price="1"), overlay("b", "default-instance-type", price="2")], POOL
    )
    assert result.conflicts == [] and result.invalid == {}


def test_an_overlay_reaches_only_the_offerings_its_requirements_allow():
    """Offering requirements: a capacity-type requirement reprices only those offerings."""
    spot = NodeOverlay(
        "spot-discount",
        (NodeSelectorRequirement("karpenter.sh/capacity-type", "In", ("spot",)),),
        price_adjustment="-50%",
    )
    [small] = [it for it in evaluate([spot], POOL).apply("default", fake_catalog()) if it.name == "small-instance-type"]
    original = {(o.zone, o.capacity_type): o.price for o in fake_catalog()[1].offerings}
    assert {(o.zone, o.capacity_type): o.price for o in small.offerings} == {
        key: price / 2 if key[1] == "spot" else price for key, price in original.items()
    }


def test_capacity_overlays_merge_per_resource_and_one_weight_on_one_resource_conflicts():
    """ "should update capacity for one instance types from multiple overlays" and "should fail with conflicting
    capacity overlays with overlapping requirements"."""
    fuse = parse_resources({"smarter-devices/fuse": "1"})
    pages = parse_resources({"hugepages-1Gi": "2Gi"})
    result = evaluate(
        [
            overlay("a", "small-instance-type", weight=20, capacity=fuse),
            overlay(
                "b",
                "small-instance-type",
                weight=10,
                capacity={**pages, **parse_resources({"smarter-devices/fuse": "5"})},
            ),
        ],
        POOL,
    )
    [small] = [it for it in result.apply("default", fake_catalog()) if it.name == "small-instance-type"]
    assert (small.capacity["smarter-devices/fuse"], small.capacity["hugepages-1Gi"]) == (1000, 2 * 2**30 * 1000)
    assert small.capacity_overlaid
    clash = evaluate(
        [overlay("a", "small-instance-type", capacity=fuse), overlay("b", "small-instance-type", capacity=fuse)], POOL
    )
    assert clash.conflicts == ["a"]


def test_an_overlay_selecting_a_key_no_type_defines_reaches_nothing():
    result = evaluate([NodeOverlay("x", (NodeSelectorRequirement("example.com/team", "In", ("a",)),), price="1")], POOL)
    assert result.updates == {} and result.conflicts == []


def test_an_overlay_selecting_a_nodepool_reaches_only_its_types():
    """ "should only apply override for nodepool that defined in the overlay requirements"."""
    pools = [(nodepool("a"), fake_catalog()), (nodepool("b"), fake_catalog())]
    only_a = NodeOverlay("x", (NodeSelectorRequirement("karpenter.sh/nodepool", "In", ("a",)),), price="7")
    result = evaluate([only_a], pools)
    assert {o.price for it in result.apply("a", fake_catalog()) for o in it.offerings} == {7.0}
    assert result.apply("b", fake_catalog()) == fake_catalog()


# In the lab ----------------------------------------------------------------------------------------------------------

CHEAP_M = {
    "apiVersion": "karpenter.sh/v1alpha1",
    "kind": "NodeOverlay",
    "metadata": {"name": "cheap-m-family"},
    "spec": {
        "requirements": [{"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": ["m"]}],
        "priceAdjustment": "-90%",
    },
}
ON_DEMAND_AMD64 = [
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
]


def test_a_price_overlay_changes_what_consolidation_decides_and_marks_the_nodeclaims():
    """The kwok provider launches by its own prices (Karpenter decorates only GetInstanceTypes), so the first node is
    c-2x; Karpenter's decisions use the overlaid prices, so c-2x at $1.054/h is replaced by s-2x at $0.0586/h."""
    pricier_c2x = {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "pricier-c-2x"},
        "spec": {
            "requirements": [{"key": INSTANCE_TYPE, "operator": "In", "values": ["c-2x-amd64-linux"]}],
            "priceAdjustment": "+1",
        },
    }
    made = lab(
        nodepool_doc(template_spec={"requirements": ON_DEMAND_AMD64}), deployment(replicas=1), pricier_c2x, options=ON
    )
    made.advance(5)
    [claim] = made.store.list("NodeClaim")
    assert claim["metadata"]["labels"][INSTANCE_TYPE] == "c-2x-amd64-linux"
    assert claim["metadata"]["annotations"]["karpenter.sh/price-overlay-applied"] == "true"
    assert "karpenter.sh/capacity-overlay-applied" not in claim["metadata"]["annotations"]
    made.advance(120)
    [command] = made.store.list("DisruptionCommand")
    assert (command["spec"]["decision"], command["status"]["phase"]) == ("replace", "Succeeded")
    assert command["spec"]["candidates"][0]["price"] == pytest.approx(1.054295, abs=1e-6)
    [claim] = made.store.list("NodeClaim")
    assert claim["metadata"]["labels"][INSTANCE_TYPE] == "s-2x-amd64-linux"
    stored = made.store.get("NodeOverlay", "pricier-c-2x")
    assert condition(stored, "ValidationSucceeded") == ("True", "ValidationSucceeded", "")
    assert condition(stored, "Ready") == ("True", "Ready", "")


def test_without_the_gate_overlays_change_nothing_and_get_no_status():
    made = lab(nodepool_doc(template_spec={"requirements": ON_DEMAND_AMD64}), deployment(replicas=1), CHEAP_M)
    made.advance(5)
    [claim] = made.store.list("NodeClaim")
    assert claim["metadata"]["labels"][INSTANCE_TYPE] == "c-2x-amd64-linux"
    assert "status" not in made.store.get("NodeOverlay", "cheap-m-family") or not condition(
        made.store.get("NodeOverlay", "cheap-m-family"), "Ready"
    )


def test_a_conflicting_overlay_says_so_in_its_status():
    twin = {**CHEAP_M, "metadata": {"name": "another"}, "spec": {**CHEAP_M["spec"], "priceAdjustment": "-50%"}}
    made = lab(nodepool_doc(), CHEAP_M, twin, options=ON)
    made.advance(1)
    assert condition(made.store.get("NodeOverlay", "another"), "ValidationSucceeded") == (
        "False",
        "Conflict",
        "conflict with another overlay",
    )
    assert condition(made.store.get("NodeOverlay", "another"), "Ready") == (
        "False",
        "UnhealthyDependents",
        "ValidationSucceeded=False",
    )
    assert condition(made.store.get("NodeOverlay", "cheap-m-family"), "Ready")[0] == "True"


def test_a_capacity_overlay_lets_pods_asking_for_an_extended_resource_run():
    fuse = {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "fuse"},
        "spec": {"requirements": [], "capacity": {"smarter-devices/fuse": "1"}},
    }
    wants_fuse = deployment(replicas=1)
    wants_fuse["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["smarter-devices/fuse"] = "1"
    made = lab(nodepool_doc(template_spec={"requirements": ON_DEMAND_AMD64}), wants_fuse, fuse, options=ON)
    made.advance(30)
    [claim] = made.store.list("NodeClaim")
    assert claim["metadata"]["annotations"]["karpenter.sh/capacity-overlay-applied"] == "true"
    assert claim["status"]["capacity"]["smarter-devices/fuse"] == "1"
    assert [p["status"]["phase"] for p in made.store.list("Pod")] == ["Running"]


def _refuse_overlay_status(made, monkeypatch) -> None:
    """Every NodeOverlay status write fails from now on (the API server refuses the patch)."""
    update = made.store.update

    def refuse(obj, **kwargs):
        if obj["kind"] == "NodeOverlay":
            raise RuntimeError("the server is currently unable to handle the request")
        return update(obj, **kwargs)

    monkeypatch.setattr(made.store, "update", refuse)


def test_nothing_is_provisioned_for_a_nodepool_the_overlays_have_not_evaluated(monkeypatch):
    """Until the overlay controller's statuses are written it swaps in no store (controller.go:120-128), so every
    NodePool awaits evaluation and the provisioner skips it ("skipping, awaiting nodeoverlay evaluation",
    provisioner.go:305): the pod pends. Once the write goes through, the pod gets its node (launched, as the other
    tests here say, by the kwok provider's own prices)."""
    made = lab(
        nodepool_doc(template_spec={"requirements": ON_DEMAND_AMD64}), deployment(replicas=1), CHEAP_M, options=ON
    )
    _refuse_overlay_status(made, monkeypatch)
    made.advance(30)
    assert made.store.list("NodeClaim") == []
    assert [p["status"].get("phase") for p in made.store.list("Pod")] == ["Pending"]
    monkeypatch.undo()
    made.advance(30)
    [claim] = made.store.list("NodeClaim")
    assert claim["metadata"]["labels"][INSTANCE_TYPE] == "c-2x-amd64-linux"  # the kwok provider's cheapest


def test_disruption_leaves_the_nodes_of_a_nodepool_the_overlays_have_not_evaluated(monkeypatch):
    """BuildNodePoolMap skips a NodePool awaiting evaluation (disruption/helpers.go:324), so its nodes are no
    candidates ("NodePool not found"): an empty node stays while the overlay controller, restarted with an empty
    store, cannot write a new overlay's status, and goes once it can."""
    made = lab(
        nodepool_doc(template_spec={"requirements": ON_DEMAND_AMD64}), deployment(replicas=1), CHEAP_M, options=ON
    )
    made.advance(5)
    [claim] = made.store.list("NodeClaim")
    made.store.delete("Deployment", "inflate", "default")
    for obj in made.store.list("Pod"):
        made.store.delete("Pod", obj["metadata"]["name"], "default")
    made.manager.overlays = NodeOverlayController()  # a restart: the store is empty
    made.ctx.overlays = None
    made.store.create({**CHEAP_M, "metadata": {"name": "second"}, "spec": {**CHEAP_M["spec"], "weight": 5}})
    _refuse_overlay_status(made, monkeypatch)
    made.advance(300)
    assert [c["metadata"]["name"] for c in made.store.list("NodeClaim")] == [claim["metadata"]["name"]]
    assert made.store.list("DisruptionCommand") == []  # not even proposed, then refused at validation
    monkeypatch.undo()
    made.advance(300)
    assert made.store.list("NodeClaim") == []


def test_a_lab_loaded_from_its_state_has_the_last_evaluation_in_force():
    """A lab restored from its saved state is the same Karpenter going on, not one starting: its NodePools are
    evaluated before any step (the first step that writes statuses evaluates again), with the overlays' prices."""
    made = lab(nodepool_doc(template_spec={"requirements": ON_DEMAND_AMD64}), CHEAP_M, options=ON)
    made.advance(1)
    [pool] = made.ctx.nodepools
    loaded = Lab(
        copy.deepcopy(made.store.all_objects()),
        config_of([KWOK_CLASS, nodepool_doc(template_spec={"requirements": ON_DEMAND_AMD64})], ON),
        made.to_state(),
        now=made.now,
    )
    assert not loaded.ctx.awaiting_overlays(pool)
    m2x = next(it for it in loaded.ctx.instance_types_for(pool) or [] if it.name == "m-2x-amd64-linux")
    assert all(o.price_overlaid for o in m2x.offerings)
    fresh = lab(nodepool_doc(template_spec={"requirements": ON_DEMAND_AMD64}), CHEAP_M, options=ON)
    assert fresh.ctx.awaiting_overlays(pool)  # a Karpenter starting: nothing evaluated before its first reconcile

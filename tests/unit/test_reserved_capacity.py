"""Reserved capacity (Karpenter v1.3-v1.6, gate ReservedCapacity on by default): reserved offerings are preferred while
their reservations have instances left, a simulation never counts one instance twice, provisioning waits rather than
fall back past reserved capacity other NodeClaims hold, and consolidation moves between reservations.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go Describe("Reserved
Instance Types") and reservationmanager_test.go, and pkg/controllers/disruption/consolidation_test.go
Context("Reserved Capacity").
"""

import pytest

from provisioner.catalog import InstanceType, Offering
from provisioner.catalog.files import catalog_from_manifest
from provisioner.manifests import ManifestError
from provisioner.options import KarpenterOptions, parse_feature_gates
from provisioner.scheduling.reservations import RESERVATION_STRICT, ReservationManager
from tests.builders import instance_type, nodepool, pod, r, schedule, term
from tests.lab_builders import deployment, lab, nodepool_doc

RESERVATION = "karpenter.k8s.aws/capacity-reservation-id"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def _reserved(it: InstanceType, capacity: int = 1, rid: str | None = None) -> InstanceType:
    """The type with one more offering: a reservation in test-zone-1 at a price 100,000 times lower."""
    price = min(o.price for o in it.offerings) / 100_000.0
    extra = Offering(
        "test-zone-1", "reserved", price, reservation_id=rid or f"r-{it.name}", reservation_capacity=capacity
    )
    return InstanceType(it.name, it.capacity, (*it.offerings, extra), it.labels, it.overhead)


def _types(small_capacity: int = 1, medium_capacity: int = 1) -> list[InstanceType]:
    return [
        instance_type("large-instance-type", "6", "6Gi", pods=110),
        _reserved(instance_type("medium-instance-type", "3", "3Gi", pods=110), medium_capacity),
        _reserved(instance_type("small-instance-type", "2", "2Gi", pods=110), small_capacity),
    ]


# ReservationManager (reservationmanager_test.go) ------------------------------------------------------------------


def test_a_reservation_is_held_once_per_nodeclaim_and_given_back():
    [small] = [it for it in _types(small_capacity=2) if it.name == "small-instance-type"]
    offering = small.offerings[-1]
    manager = ReservationManager([[small]])
    assert manager.can_reserve("a", offering) and manager.remaining("r-small-instance-type") == 2
    manager.reserve("a", [offering])
    manager.reserve("a", [offering])  # "should not double-reserve for the same hostname and reservation"
    assert manager.remaining("r-small-instance-type") == 1
    manager.reserve("b", [offering])
    assert not manager.can_reserve("c", offering)  # "should return false when capacity is exhausted"
    assert manager.can_reserve("a", offering)  # "should return true for existing hostname even when exhausted"
    with pytest.raises(ValueError, match="no capacity left"):  # "should panic when trying to over-reserve"
        manager.reserve("c", [offering])
    manager.release("a", [offering])
    manager.release("a", [offering])  # "should handle releasing non-existent reservations gracefully"
    assert manager.remaining("r-small-instance-type") == 1


def test_offerings_sharing_a_reservation_count_its_least_capacity():
    one = _reserved(instance_type("a", "2", "2Gi"), capacity=3, rid="shared")
    other = _reserved(instance_type("b", "2", "2Gi"), capacity=1, rid="shared")
    assert ReservationManager([[one], [other]]).remaining("shared") == 1


# Scheduling ---------------------------------------------------------------------------------------------------------


def test_lab_never_falls_back_to_on_demand_or_spot_while_compatible_reserved_offerings_are_left():
    """ "shouldn't fallback to on-demand or spot when compatible reserved offerings are available": each batch makes
    one reserved NodeClaim (it holds both reservations it could launch into), and only once both reservations are
    in use does the last pod go to on-demand or spot."""
    made = lab(nodepool_doc(), deployment(replicas=3, cpu="1800m"), types=_types())
    made.advance(1)
    first = [c["metadata"]["labels"] for c in made.store.list("NodeClaim")]
    assert [(ls[CAPACITY_TYPE], ls[RESERVATION], ls[INSTANCE_TYPE]) for ls in first] == [
        ("reserved", "r-small-instance-type", "small-instance-type")
    ]
    made.advance(10)  # the pending pods are tried again 10 s later
    labels = sorted((c["metadata"]["labels"] for c in made.store.list("NodeClaim")), key=lambda ls: ls[INSTANCE_TYPE])
    assert [(ls[CAPACITY_TYPE], ls.get(RESERVATION)) for ls in labels] == [
        ("reserved", "r-medium-instance-type"),
        ("reserved", "r-small-instance-type"),
    ]
    made.advance(10)
    last = [
        c["metadata"]["labels"] for c in made.store.list("NodeClaim") if not c["metadata"]["labels"].get(RESERVATION)
    ]
    assert [(ls[CAPACITY_TYPE] != "reserved", ls[INSTANCE_TYPE]) for ls in last] == [(True, "small-instance-type")]
    assert {p["status"]["phase"] for p in made.store.list("Pod")} == {"Running"}
    deferred = [r.record for r in made.logs if r.record.message.startswith("deferring scheduling decision")]
    assert deferred and not [r for r in made.logs if r.record.message == "could not schedule pod"]


def test_without_the_gate_reserved_offerings_are_not_offered():
    off = KarpenterOptions(feature_gates=parse_feature_gates("ReservedCapacity=false"))
    made = lab(nodepool_doc(), deployment(replicas=3, cpu="1800m"), types=_types(), options=off)
    made.advance(1)
    assert {c["metadata"]["labels"][CAPACITY_TYPE] for c in made.store.list("NodeClaim")} <= {"spot", "on-demand"}
    assert not [c for c in made.store.list("NodeClaim") if RESERVATION in c["metadata"]["labels"]]


def _anti_pods(*requirements, preferred=()):
    return [
        pod(
            labels={"app": "test"},
            anti_affinity=[term("kubernetes.io/hostname", app="test")],
            required=[list(requirements)] if requirements else (),
            preferred=preferred,
        )
        for _ in range(2)
    ]


def test_a_reservation_shared_by_two_nodepools_is_counted_once():
    """ "should correctly track reservations shared across nodepools"."""
    types = _types()
    pools = [nodepool("np-1"), nodepool("np-2")]
    pods = [
        pod(
            labels={"app": "test"},
            anti_affinity=[term("kubernetes.io/hostname", app="test")],
            required=[[r(INSTANCE_TYPE, "In", "small-instance-type"), r("karpenter.sh/nodepool", "In", f"np-{i}")]],
        )
        for i in (1, 2)
    ]
    result = schedule(pods, pools=pools, types=types, reservation_mode=RESERVATION_STRICT)
    [plan] = result.new_nodeclaims
    assert plan.requirements[RESERVATION].values == frozenset({"r-small-instance-type"})
    assert plan.requirements[CAPACITY_TYPE].values == frozenset({"reserved"})
    [failure] = result.failures.values()
    assert failure.reasons[-1].kind == "reserved-capacity"
    assert failure.reasons[-1].message == (
        "one or more instance types with compatible reserved offerings are available, but could not be reserved"
    )


def test_provisioning_does_not_fall_back_to_a_lower_weight_nodepool_past_a_held_reservation():
    """ "shouldn't fallback to a lower weight NodePool if a reserved offering is available"."""
    small = instance_type("small-instance-type", "2", "2Gi", pods=110)
    primary = nodepool("np-primary", weight=100)
    fallback = nodepool("np-fallback", weight=50)
    from provisioner.scheduling.scheduler import PoolOffer, SchedulingInput, solve

    pods = _anti_pods(r(INSTANCE_TYPE, "In", "small-instance-type"))
    request = SchedulingInput(
        pods=pods,
        pools=[PoolOffer(primary, [_reserved(small)]), PoolOffer(fallback, [_reserved(small, rid="r-fallback")])],
        reservation_mode=RESERVATION_STRICT,
    )
    result = solve(request)
    assert [(p.nodepool, sorted(p.requirements[RESERVATION].values)) for p in result.new_nodeclaims] == [
        ("np-primary", ["r-small-instance-type"])
    ]
    assert len(result.failures) == 1  # deferred to the next simulation, not placed in np-fallback's reservation


def test_a_pod_deferred_for_reserved_capacity_keeps_its_preferences():
    """ "shouldn't relax preferences when a pod fails to schedule due to a reserved offering error"."""
    types = [_reserved(instance_type("small-instance-type", "2", "2Gi", pods=110))]
    pods = _anti_pods(
        r(INSTANCE_TYPE, "In", "small-instance-type"), preferred=[(1, [r("karpenter.sh/nodepool", "In", "np-1")])]
    )
    result = schedule(
        pods, pools=[nodepool("np-1"), nodepool("np-2")], types=types, reservation_mode=RESERVATION_STRICT
    )
    assert [p.nodepool for p in result.new_nodeclaims] == ["np-1"]
    [(uid, failure)] = result.failures.items()
    assert result.relaxations.get(uid) is None
    assert failure.reasons[-1].kind == "reserved-capacity"


def test_disruption_simulations_fall_back_instead():
    types = [_reserved(instance_type("small-instance-type", "2", "2Gi", pods=110))]
    pods = _anti_pods(r(INSTANCE_TYPE, "In", "small-instance-type"))
    result = schedule(pods, types=types)  # Fallback, as consolidation's and drift's simulations are
    assert len(result.new_nodeclaims) == 2 and not result.failures
    assert [RESERVATION in p.requirements for p in result.new_nodeclaims].count(True) == 1


# Consolidation ----------------------------------------------------------------------------------------------------


def test_consolidation_moves_from_one_reserved_offering_to_a_cheaper_one():
    """ "can consolidate from one reserved offering to another": reserved prices keep their order, so a reserved
    large node whose pod fits a small reservation is replaced by it."""
    types = [
        _reserved(instance_type("large-instance-type", "6", "6Gi", pods=110)),
        _reserved(instance_type("small-instance-type", "2", "2Gi", pods=110)),
    ]
    made = lab(
        nodepool_doc(
            template_spec={"requirements": [{"key": CAPACITY_TYPE, "operator": "In", "values": ["reserved"]}]}
        ),
        deployment(replicas=1, cpu="4"),
        types=types,
    )
    made.advance(1)
    [claim] = made.store.list("NodeClaim")
    assert claim["metadata"]["labels"][RESERVATION] == "r-large-instance-type"
    made.store.patch(
        "Deployment",
        "inflate",
        "default",
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}
                }
            }
        },
    )
    made.advance(120)
    [claim] = made.store.list("NodeClaim")
    assert (claim["metadata"]["labels"][RESERVATION], claim["metadata"]["labels"][CAPACITY_TYPE]) == (
        "r-small-instance-type",
        "reserved",
    )


# The catalog file ----------------------------------------------------------------------------------------------------


def _catalog(offering):
    return {
        "apiVersion": "karpui.dev/v1alpha1",
        "kind": "InstanceCatalog",
        "metadata": {"name": "reserved"},
        "spec": {
            "nodeClassKinds": ["EC2NodeClass"],
            "instanceTypes": [
                {
                    "name": "m5.large",
                    "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                    "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": 0.096}, offering],
                }
            ],
        },
    }


def test_a_catalog_reserved_offering_names_its_reservation():
    catalog = catalog_from_manifest(
        _catalog(
            {
                "zone": "us-east-1a",
                "capacityType": "reserved",
                "price": 0.0000096,
                "reservationID": "cr-0123",
                "reservationType": "capacity-block",
                "reservationCapacity": 4,
            }
        )
    )
    reserved = catalog.instance_types[0].offerings[1]
    assert (reserved.reservation_id, reserved.reservation_type, reserved.reservation_capacity) == (
        "cr-0123",
        "capacity-block",
        4,
    )
    assert reserved.labels() == {
        "topology.kubernetes.io/zone": "us-east-1a",
        CAPACITY_TYPE: "reserved",
        RESERVATION: "cr-0123",
        "karpenter.k8s.aws/capacity-reservation-type": "capacity-block",
    }


@pytest.mark.parametrize(
    ("offering", "field", "message"),
    [
        (
            {"zone": "us-east-1a", "capacityType": "reserved", "price": 0.1, "reservationCapacity": 1},
            "reservationID",
            "Required value",
        ),
        (
            {"zone": "us-east-1a", "capacityType": "reserved", "price": 0.1, "reservationID": "cr-1"},
            "reservationCapacity",
            "Required value: how many instances the reservation holds",
        ),
        (
            {"zone": "us-east-1a", "capacityType": "spot", "price": 0.1, "reservationID": "cr-1"},
            "reservationID",
            "only a reserved offering belongs to a reservation",
        ),
        (
            {
                "zone": "us-east-1a",
                "capacityType": "reserved",
                "price": 0.1,
                "reservationID": "cr-1",
                "reservationCapacity": 1,
                "reservationType": "weekly",
            },
            "reservationType",
            'Unsupported value: "weekly": supported values: default, capacity-block',
        ),
    ],
)
def test_a_bad_reserved_offering_is_refused_naming_the_field(offering, field, message):
    with pytest.raises(ManifestError) as error:
        catalog_from_manifest(_catalog(offering))
    assert (error.value.field, error.value.message) == (f"spec.instanceTypes[0].offerings[1].{field}", message)


def test_a_reserved_node_whose_reservation_is_gone_is_not_drifted_while_on_demand_is_offered():
    """instanceTypeNotFound: a reserved NodeClaim matches a reserved or an on-demand offering of its type."""
    from provisioner.disruption.drift import drift_reason

    small = instance_type("small-instance-type", "2", "2Gi", pods=110)  # no reserved offering any more
    labels = {
        INSTANCE_TYPE: "small-instance-type",
        "topology.kubernetes.io/zone": "test-zone-1",
        CAPACITY_TYPE: "reserved",
        "karpenter.sh/nodepool": "default",
    }
    assert drift_reason(nodepool(), "h", {}, labels, [small], "v3") is None
    spot_only = instance_type("small-instance-type", "2", "2Gi", zones=(("test-zone-1", "spot"),))
    assert drift_reason(nodepool(), "h", {}, labels, [spot_only], "v3") == "InstanceTypeNotFound"

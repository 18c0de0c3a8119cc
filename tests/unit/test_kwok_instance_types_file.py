"""Karpenter's kwok provider instance-types file (INSTANCE_TYPES_FILE_PATH) read as a catalog: the types are the
kwok catalog's own, reserved offerings keep their reservation, and bad input names the field in the file."""

import copy
import json
from pathlib import Path

import pytest

from provisioner import labels as wk
from provisioner.catalog.kwok import kwok_catalog
from provisioner.catalog.kwok_file import load_kwok_instance_types, read_catalog
from provisioner.manifests import ManifestError

# Three types cut unchanged from Karpenter v1.15's kwok/cloudprovider/instance_types.json, and a reservation.
FILE = Path(__file__).resolve().parents[2] / "bench/workloads/karpenter-1.x/reserved-capacity/instance-types.json"


def test_the_providers_types_read_as_the_kwok_catalog_generates_them():
    catalog = load_kwok_instance_types(FILE.read_text())
    assert (catalog.name, catalog.node_class_kinds) == ("kwok", ("KWOKNodeClass",))
    generated = {t.name: t for t in kwok_catalog().instance_types}
    assert [t.name for t in catalog.instance_types] == ["c-2x-amd64-linux", "c-4x-amd64-linux", "c-8x-amd64-linux"]
    for read in catalog.instance_types:
        made = generated[read.name]
        assert (read.capacity, read.labels, read.overhead, read.allocatable) == (
            made.capacity,
            made.labels,
            made.overhead,
            made.allocatable,
        )
        plain = sorted((o.zone, o.capacity_type, o.price) for o in read.offerings if not o.reserved)
        expected = sorted((o.zone, o.capacity_type, o.price) for o in made.offerings)
        assert [p[:2] for p in plain] == [e[:2] for e in expected]
        assert [p[2] for p in plain] == pytest.approx([e[2] for e in expected], rel=1e-12)
    [reserved] = [o for o in catalog.instance_types[0].offerings if o.reserved]
    assert (reserved.zone, reserved.reservation_id, reserved.reservation_capacity, reserved.price) == (
        "test-zone-a",
        "cr-c-2x-a",
        2,
        5.4295e-06,
    )
    assert reserved.reservation_type == "default"
    assert reserved.labels()[wk.RESERVATION_ID] == "cr-c-2x-a"


def test_read_catalog_tells_the_two_formats_apart():
    assert read_catalog(FILE.read_text()).name == "kwok"
    with pytest.raises(ManifestError, match="expected exactly one InstanceCatalog document"):
        read_catalog("")


def test_keys_match_whatever_their_case_and_a_missing_pod_count_is_110():
    """Go's encoding/json matches keys to fields case-insensitively; setDefaultOptions gives 110 pods."""
    [catalog_type] = load_kwok_instance_types(
        json.dumps(
            [
                {
                    "Name": "g-1x-amd64-linux",
                    "Architecture": "amd64",
                    "OperatingSystems": ["linux"],
                    "Resources": {"cpu": "1", "memory": "1536Mi"},
                    "Offerings": [
                        {
                            "price": 0.5,
                            "requirements": [
                                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z"]},
                            ],
                        }
                    ],
                }
            ]
        )
    ).instance_types
    assert catalog_type.capacity == {"pods": 110_000, "cpu": 1000, "memory": 1536 * 2**20 * 1000}
    assert catalog_type.labels == {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "karpenter.kwok.sh/instance-size": "1",
        "karpenter.kwok.sh/instance-family": "g",
        "karpenter.kwok.sh/instance-cpu": "1",
        "karpenter.kwok.sh/instance-memory": "1536Mi",
    }
    assert [(o.zone, o.capacity_type, o.price, o.available) for o in catalog_type.offerings] == [
        ("z", "on-demand", 0.5, True)
    ]


def _broken(change):
    items = json.loads(FILE.read_text())
    changed = copy.deepcopy(items)
    change(changed)
    return json.dumps(changed)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda t: t[1].update(gpu=1), "[1].gpu", 'unknown field "gpu"'),
        (lambda t: t[0]["resources"].update(cpu="two"), "[0].resources.cpu", "quantities"),
        (lambda t: t[0].update(operatingSystems=["linux", "windows"]), "[0].operatingSystems", "exactly one"),
        (
            lambda t: t[0]["offerings"][8]["Requirements"].pop(2),
            "[0].offerings[8].Requirements",
            'a requirement on "karpenter.k8s.aws/capacity-reservation-id"',
        ),
        (
            lambda t: t[0]["offerings"][0]["Requirements"].append({"key": "x/y", "operator": "In", "values": ["1"]}),
            "[0].offerings[0].Requirements[2].key",
            'unsupported offering requirement "x/y"',
        ),
        (
            lambda t: t[0]["offerings"][0]["Requirements"][1].update(values=["a", "b"]),
            "[0].offerings[0].Requirements[1]",
            "must be one value, operator In",
        ),
        (lambda t: t[2].update(name=t[0]["name"]), "[2].name", "duplicate instance type"),
        (lambda t: t[0]["offerings"][0].update(ReservationCapacity=3), "[0].offerings[0].ReservationCapacity", "only"),
    ],
)
def test_bad_input_names_the_field_in_the_file(change, field, message):
    with pytest.raises(ManifestError) as raised:
        load_kwok_instance_types(_broken(change))
    assert raised.value.field == field
    assert message in raised.value.message


def test_a_file_that_is_not_json_says_where():
    with pytest.raises(ManifestError, match=r"^error: not valid JSON: Expecting value \(line 1, column 2\)$"):
        load_kwok_instance_types("[x]")

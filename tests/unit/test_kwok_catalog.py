import pytest

from provisioner.catalog.kwok import kwok_catalog
from provisioner.quantity import format_resources

CATALOG = kwok_catalog()
BY_NAME = CATALOG.by_name()


def test_the_kwok_catalog_has_144_types_in_generator_order():
    names = [it.name for it in CATALOG.instance_types]
    assert len(names) == len(set(names)) == 144
    assert names[:5] == [
        "c-1x-amd64-linux",
        "c-1x-arm64-linux",
        "c-1x-amd64-windows",
        "c-1x-arm64-windows",
        "s-1x-amd64-linux",
    ]
    assert names[-1] == "m-256x-arm64-windows"


@pytest.mark.parametrize(
    ("name", "on_demand", "spot", "cpu", "memory", "pods"),
    [
        ("c-1x-amd64-linux", "0.027147", "0.019003", "900m", "2038Mi", "16"),
        ("s-1x-amd64-linux", "0.029295", "0.020506", "900m", "4086Mi", "16"),
        ("m-1x-amd64-linux", "0.033590", "0.023513", "900m", "8182Mi", "16"),
        ("m-2x-arm64-linux", "0.067180", "0.047026", "1900m", "16374Mi", "32"),
        ("c-8x-amd64-linux", "0.217180", "0.152026", "7900m", "16374Mi", "128"),
        ("m-8x-amd64-windows", "0.268719", "0.188104", "7900m", "65526Mi", "128"),
        ("c-16x-amd64-linux", "0.434360", "0.304052", "15900m", "32758Mi", "256"),
        ("c-64x-amd64-linux", "1.737439", "1.216207", "63900m", "131062Mi", "1024"),
        ("c-96x-amd64-linux", "2.606158", "1.824311", "95900m", "196598Mi", "1024"),
        ("m-256x-arm64-windows", "8.599023", "6.019316", "255900m", "2097142Mi", "1024"),
    ],
)
def test_prices_and_allocatable_match_karpenters_kwok_provider(name, on_demand, spot, cpu, memory, pods):
    it = BY_NAME[name]
    prices = {(o.capacity_type, f"{o.price:.6f}") for o in it.offerings}
    assert prices == {("on-demand", on_demand), ("spot", spot)}
    allocatable = format_resources(it.allocatable)
    assert allocatable == {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "20Gi"}


def test_every_type_is_offered_in_four_zones_as_spot_and_on_demand():
    for it in CATALOG.instance_types:
        assert sorted((o.zone, o.capacity_type) for o in it.offerings) == sorted(
            (zone, ct)
            for zone in ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")
            for ct in ("on-demand", "spot")
        )


def test_labels_are_those_karpenters_kwok_types_expose():
    assert BY_NAME["m-128x-amd64-linux"].labels == {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "karpenter.kwok.sh/instance-size": "128",
        "karpenter.kwok.sh/instance-family": "m",
        "karpenter.kwok.sh/instance-cpu": "128",
        "karpenter.kwok.sh/instance-memory": "1Ti",
    }
    assert BY_NAME["m-192x-amd64-linux"].labels["karpenter.kwok.sh/instance-memory"] == "1536Gi"


def test_price_is_not_monotone_in_size_across_families():
    assert BY_NAME["m-1x-amd64-linux"].offerings[4].price < BY_NAME["c-2x-amd64-linux"].offerings[4].price

import pytest
import yaml

from provisioner.catalog.files import catalog_to_manifest, load_catalog
from provisioner.catalog.kwok import kwok_catalog
from provisioner.manifests import ManifestError


def test_a_catalog_round_trips_through_its_file_format():
    original = kwok_catalog()
    text = yaml.safe_dump(catalog_to_manifest(original))
    loaded = load_catalog(text)
    assert loaded.name == "kwok"
    assert [it.name for it in loaded.instance_types] == [it.name for it in original.instance_types]
    for a, b in zip(loaded.instance_types, original.instance_types, strict=True):
        assert (a.capacity, a.allocatable, a.offerings, a.labels) == (b.capacity, b.allocatable, b.offerings, b.labels)


MINIMAL = """
apiVersion: karpui.dev/v1alpha1
kind: InstanceCatalog
metadata: {name: mine}
spec:
  nodeClassKinds: [KWOKNodeClass]
  instanceTypes:
  - name: small
    labels: {kubernetes.io/arch: amd64}
    capacity: {cpu: "2", memory: 4Gi, pods: "10"}
    offerings: [{zone: z1, capacityType: on-demand, price: 0.1}]
"""


def test_a_minimal_catalog_loads():
    catalog = load_catalog(MINIMAL)
    assert catalog.instance_types[0].allocatable == {"cpu": 2000, "memory": 4 * 2**30 * 1000, "pods": 10_000}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (('cpu: "2"', "cpu: 1.5.5"), "spec.instanceTypes[0].capacity.cpu"),
        (("price: 0.1", "price: -1"), "spec.instanceTypes[0].offerings[0].price"),
        (("price: 0.1", "price: .nan"), "spec.instanceTypes[0].offerings[0].price"),
        (("capacityType: on-demand, ", ""), "spec.instanceTypes[0].offerings[0].capacityType"),
        (("labels:", "colour: red\n    labels:"), "spec.instanceTypes[0].colour"),
        (('pods: "10"', 'gpus: "1"'), "spec.instanceTypes[0].capacity.pods"),
    ],
)
def test_bad_catalog_fields_are_named(change, field):
    with pytest.raises(ManifestError) as raised:
        load_catalog(MINIMAL.replace(*change))
    assert raised.value.field == field


def test_duplicate_type_names_are_refused():
    text = (
        MINIMAL
        + """  - name: small
    capacity: {cpu: "1", memory: 1Gi, pods: "1"}
    offerings: [{zone: z1, capacityType: spot, price: 0.1}]
"""
    )
    with pytest.raises(ManifestError, match="duplicate instance type 'small'"):
        load_catalog(text)

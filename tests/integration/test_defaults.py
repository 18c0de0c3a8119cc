from karpui import models
from karpui.writes import setup


def test_a_fresh_database_has_the_lab_cluster_and_both_catalogs(db):
    assert list(models.Cluster.objects.values_list("name", "mode")) == [("lab", "lab")]
    counts = {c.name: c.instance_types.count() for c in models.Catalog.objects.all()}
    assert counts == {"kwok": 144, "aws-sample": 45}
    assert models.Offering.objects.filter(instance_type__catalog__name="kwok").count() == 144 * 8


def test_stored_types_keep_exact_prices_and_allocatable(db):
    from karpui.clusters import store

    row = models.InstanceType.objects.get(catalog__name="kwok", name="c-8x-amd64-linux")
    domain = store.instance_type_domain(row)
    assert store.instance_type_manifest("kwok", domain)["status"]["allocatable"] == {
        "cpu": "7900m",
        "ephemeral-storage": "20Gi",
        "memory": "16374Mi",
        "pods": "128",
    }
    assert sorted(f"{o.price:.6f}" for o in domain.offerings)[0] == "0.152026"
    assert (row.cpu_millis, row.memory_bytes, row.pods, row.family, row.arch) == (8000, 16 * 2**30, 128, "c", "amd64")


def test_defaults_do_not_overwrite_an_imported_catalog(db):

    models.Offering.objects.filter(instance_type__catalog__name="kwok").update(price=1.0)
    setup.defaults_ensure()
    assert set(models.Offering.objects.filter(instance_type__catalog__name="kwok").values_list("price", flat=True)) == {
        1.0
    }

import io
import json

import pytest
import yaml
from django.core.management import CommandError, call_command

from karpui import models


def run(*args):
    out = io.StringIO()
    call_command("catalog", *args, stdout=out)
    return out.getvalue()


def test_generate_prints_the_kwok_catalog(db):
    manifest = yaml.safe_load(run("generate", "kwok"))
    assert manifest["kind"] == "InstanceCatalog"
    assert len(manifest["spec"]["instanceTypes"]) == 144


def test_export_then_import_round_trips_and_replaces(db, tmp_path):
    exported = json.loads(run("export", "aws-sample", "-o", "json"))
    exported["metadata"]["name"] = "mine"
    exported["spec"]["instanceTypes"] = exported["spec"]["instanceTypes"][:3]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(exported))
    assert run("import", str(path)) == "catalog mine: 3 instance types imported\n"
    assert models.InstanceType.objects.filter(catalog__name="mine").count() == 3
    exported["spec"]["instanceTypes"] = exported["spec"]["instanceTypes"][:1]
    path.write_text(json.dumps(exported))
    run("import", str(path))
    assert list(models.InstanceType.objects.filter(catalog__name="mine").values_list("name", flat=True)) == ["c5.large"]


def test_a_bad_catalog_file_changes_nothing(db, tmp_path):
    manifest = yaml.safe_load(run("export", "kwok"))
    manifest["spec"]["instanceTypes"][5]["capacity"]["memory"] = "1.5.5Gi"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(manifest))
    before = models.Offering.objects.count()
    with pytest.raises(CommandError, match=r"document 1 InstanceCatalog/kwok: spec.instanceTypes\[5\].capacity.memory"):
        run("import", str(path))
    assert models.Offering.objects.count() == before


def test_delete_removes_a_catalog_and_audits_it(db, tmp_path):
    exported = json.loads(run("export", "aws-sample", "-o", "json"))
    exported["metadata"]["name"] = "mine"
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(exported))
    run("import", str(path))

    assert run("delete", "mine") == 'catalog "mine" deleted\n'

    assert not models.Catalog.objects.filter(name="mine").exists()
    event = models.AuditEvent.objects.get(action="delete", target_name="mine")
    assert (event.via, event.target_kind, event.after) == ("cli", "InstanceCatalog", None)
    with pytest.raises(CommandError, match='catalog "mine" not found'):
        run("delete", "mine")


def test_a_catalog_file_that_is_not_utf8_is_refused_naming_the_file(db, tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("metadata: {name: café}\n".encode("latin-1"))
    with pytest.raises(CommandError, match=rf"^error: {path}: not UTF-8 text \(byte 0xe9 at offset 20\)$"):
        run("import", str(path))


def test_importing_over_a_built_in_catalog_needs_the_flag_and_generate_load_restores_it(db, tmp_path):
    manifest = yaml.safe_load(run("export", "kwok"))
    manifest["spec"]["instanceTypes"] = manifest["spec"]["instanceTypes"][:2]
    path = tmp_path / "kwok.yaml"
    path.write_text(yaml.safe_dump(manifest))
    with pytest.raises(CommandError, match=r'^catalog "kwok" is built in: replacing it changes'):
        run("import", str(path))
    assert models.InstanceType.objects.filter(catalog__name="kwok").count() == 144
    assert run("import", "--overwrite-builtin", str(path)) == "catalog kwok: 2 instance types imported\n"
    assert models.AuditEvent.objects.get(action="import", target_name="kwok", via="cli").reason == (
        "overwrote the built-in catalog"
    )
    assert run("generate", "kwok", "--load") == "catalog kwok: 144 instance types loaded\n"
    assert models.InstanceType.objects.filter(catalog__name="kwok").count() == 144


def test_a_kwok_instance_types_file_imports_as_the_kwok_catalog(db):
    """Karpenter's kwok provider reads it from INSTANCE_TYPES_FILE_PATH; karpui takes it as the kwok catalog."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench/workloads/karpenter-1.x/reserved-capacity/instance-types.json"
    with pytest.raises(CommandError, match=r'^catalog "kwok" is built in'):
        run("import", str(path))
    assert run("import", "--overwrite-builtin", str(path)) == "catalog kwok: 3 instance types imported\n"
    offering = models.Offering.objects.get(instance_type__catalog__name="kwok", capacity_type="reserved")
    assert (offering.instance_type.name, offering.zone, offering.reservation_id, offering.reservation_capacity) == (
        "c-2x-amd64-linux",
        "test-zone-a",
        "cr-c-2x-a",
        2,
    )

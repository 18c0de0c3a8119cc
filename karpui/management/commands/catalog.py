"""`manage.py catalog import FILE | export NAME | delete NAME | generate kwok|aws-sample | list`: instance catalogs
as files."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError

from karpui import models
from karpui.clusters import store
from karpui.people.audit import Actor
from karpui.writes import catalogs
from provisioner.catalog.aws import aws_catalog
from provisioner.catalog.files import catalog_to_manifest
from provisioner.catalog.kwok import kwok_catalog
from provisioner.catalog.kwok_file import read_catalog
from provisioner.manifests import ManifestError
from provisioner.manifests.documents import MAX_BYTES, decode, read_stream

GENERATORS = {"kwok": kwok_catalog, "aws-sample": aws_catalog}


class Command(BaseCommand):
    help = "Import, export, delete, generate or list instance catalogs (format: docs/catalog-format.md)."

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        importing = sub.add_parser("import", help="load a catalog file into the database, replacing a same-named one")
        importing.add_argument(
            "file",
            help="YAML or JSON file, or - for standard input; a kwok provider instance-types file (the JSON array "
            "of its INSTANCE_TYPES_FILE_PATH) becomes the kwok catalog",
        )
        importing.add_argument(
            "--overwrite-builtin",
            action="store_true",
            help="replace a built-in catalog (kwok, aws-sample) of the same name (audited)",
        )
        deleting = sub.add_parser("delete", help="remove a stored catalog with its instance types (audited)")
        deleting.add_argument("name")
        exporting = sub.add_parser("export", help="print a stored catalog")
        exporting.add_argument("name")
        exporting.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
        generating = sub.add_parser("generate", help="print a built-in catalog (add --load to store it)")
        generating.add_argument("name", choices=sorted(GENERATORS))
        generating.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
        generating.add_argument("--load", action="store_true", help="store it in the database instead of printing")
        sub.add_parser("list", help="list stored catalogs")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = Actor(name=f"cli:{getpass.getuser()}", via="cli")
        action = options["action"]
        if action == "import":
            try:
                catalog = read_catalog(
                    read_stream(sys.stdin, "standard input") if options["file"] == "-" else _read(options["file"])
                )
            except ManifestError as error:
                raise CommandError(str(error)) from None
            try:
                catalogs.catalog_import(catalog=catalog, actor=actor, overwrite_builtin=options["overwrite_builtin"])
            except catalogs.BuiltInCatalog as error:
                raise CommandError(str(error)) from None
            self.stdout.write(f"catalog {catalog.name}: {len(catalog.instance_types)} instance types imported")
        elif action == "delete":
            try:
                catalogs.catalog_delete(name=options["name"], actor=actor)
            except LookupError as error:
                raise CommandError(str(error)) from None
            self.stdout.write(f'catalog "{options["name"]}" deleted')
        elif action == "export":
            row = next((c for c in store.catalogs_with_types() if c.name == options["name"]), None)
            if row is None:
                raise CommandError(f'catalog "{options["name"]}" not found')
            self.stdout.write(_dump(catalog_to_manifest(store.catalog_domain(row)), options["output"]))
        elif action == "generate":
            catalog = GENERATORS[options["name"]]()
            if options["load"]:
                # The built-in itself, as shipped: restoring it needs no flag (the audit row says it was replaced).
                catalogs.catalog_import(catalog=catalog, actor=actor, overwrite_builtin=True)
                self.stdout.write(f"catalog {catalog.name}: {len(catalog.instance_types)} instance types loaded")
            else:
                self.stdout.write(_dump(catalog_to_manifest(catalog), options["output"]))
        else:
            for row in models.Catalog.objects.order_by("name"):
                self.stdout.write(f"{row.name}\t{row.instance_types.count()} types\t{row.description}")


def _read(path: str) -> str:
    try:
        if Path(path).stat().st_size > MAX_BYTES:  # before reading: a huge file is refused without filling memory
            raise CommandError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB")
        return decode(Path(path).read_bytes(), path)
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}") from None


def _dump(manifest: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(manifest, indent=2)
    return yaml.safe_dump(manifest, sort_keys=False).rstrip()

"""`manage.py karp`: kubectl for karpui's clusters (apply, get, delete; the lab verbs come with the lab)."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from karpui import services
from karpui.kubectl import printers
from karpui.kubectl.resources import Resource, resolve
from provisioner.manifests import ManifestError, load_documents
from provisioner.selectors import LabelSelector, SelectorError

VERBS = ("apply", "delete", "get")
OUTPUTS = ("wide", "json", "yaml", "name")


class KarpError(Exception):
    """A user-facing failure: printed as kubectl prints errors, exit status 1."""


class Command(BaseCommand):
    help = "kubectl for karpui clusters: karp apply -f FILE | get KIND [NAME] [-o yaml|json|wide] | delete ..."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument("--cluster", default=services.DEFAULT_CLUSTER, help="cluster name (default: lab)")
        parser.add_argument("-n", "--namespace", default=None)
        parser.add_argument("-A", "--all-namespaces", action="store_true")
        parser.add_argument("-f", "--filename", action="append", default=[])
        parser.add_argument("-o", "--output", default="")
        parser.add_argument("-l", "--selector", default="")
        parser.add_argument("args", nargs="*")
        return parser

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._dispatch(list(args), options)
        except (KarpError, ManifestError, LookupError, SelectorError) as error:
            message = str(error)
            self.stderr.write(message if message.startswith(("error", "Error")) else f"error: {message}")
            sys.exit(1)

    def _dispatch(self, words: list[str], options: dict[str, Any]) -> None:
        if not words:
            raise KarpError(f"a verb is required: one of {', '.join(VERBS)}")
        verb, rest = words[0], words[1:]
        if verb not in VERBS:
            raise KarpError(f'unknown command "{verb}" for "karp"')
        if options["output"] and options["output"] not in OUTPUTS:
            raise KarpError(
                f'unable to match a printer suitable for the output format "{options["output"]}", '
                f"allowed formats are: {','.join(OUTPUTS)}"
            )
        cluster = services.cluster_get_or_create(options["cluster"])
        actor = services.Actor(name=f"cli:{getpass.getuser()}", via="cli")
        getattr(self, f"_{verb}")(cluster, rest, options, actor)

    def _apply(self, cluster: Any, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        if rest or not options["filename"]:
            raise KarpError(
                "must specify one of -f and -k" if not options["filename"] else f"unexpected arguments {rest}"
            )
        for result in services.manifests_apply(cluster=cluster, text=_read_files(options["filename"]), actor=actor):
            self.stdout.write(str(result))

    def _delete(self, cluster: Any, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        targets: list[tuple[str, str]] = []
        if options["filename"]:
            targets = [(d.kind, d.name) for d in load_documents(_read_files(options["filename"]))]
        else:
            targets = [(resource.kind, name) for resource, name in _kind_and_names(rest, require_name=True)]
        for kind, name in targets:
            self.stdout.write(services.object_delete(cluster=cluster, kind=kind, name=name, actor=actor))

    def _get(self, cluster: Any, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        pairs = _kind_and_names(rest, require_name=False)
        selector = LabelSelector.parse(options["selector"])
        output = options["output"]
        for resource, name in pairs:
            manifests = [
                m for m in resource.list_manifests(cluster) if selector.matches(m["metadata"].get("labels", {}))
            ]
            if name is not None:
                manifests = [m for m in manifests if m["metadata"]["name"] == name]
                if not manifests:
                    raise KarpError(f'Error from server (NotFound): {resource.qualified} "{name}" not found')
            if output in ("json", "yaml"):
                self.stdout.write(printers.render(manifests, output, single=name is not None))
            elif output == "name":
                for manifest in manifests:
                    self.stdout.write(f"{resource.aliases[0]}.{resource.group}/{manifest['metadata']['name']}")
            elif not manifests:
                self.stderr.write("No resources found")
            else:
                self.stdout.write(printers.table(manifests, resource.columns, cluster.clock, wide=output == "wide"))


def _kind_and_names(words: list[str], *, require_name: bool) -> list[tuple[Resource, str | None]]:
    """kubectl's forms: `KIND`, `KIND NAME [NAME...]`, `KIND/NAME [KIND/NAME...]`."""
    if not words:
        raise KarpError("You must specify the type of resource to get.")
    if "/" in words[0]:
        pairs: list[tuple[Resource, str | None]] = []
        for word in words:
            kind, _, name = word.partition("/")
            pairs.append((resolve(kind), name))
        return pairs
    resource = resolve(words[0])
    if len(words) == 1:
        if require_name:
            raise KarpError("resource(s) were provided, but no name was specified")
        return [(resource, None)]
    return [(resource, name) for name in words[1:]]


def _read_files(paths: list[str]) -> str:
    texts = []
    for path in paths:
        if path == "-":
            texts.append(sys.stdin.read())
            continue
        target = Path(path)
        if target.is_dir():
            files = sorted(p for p in target.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        elif target.exists():
            files = [target]
        else:
            raise KarpError(f'the path "{path}" does not exist')
        texts.extend(file.read_text() for file in files)
    return "\n---\n".join(texts)

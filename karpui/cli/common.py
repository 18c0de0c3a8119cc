"""What every `karp` verb shares: the invocation (`Run`), the error kubectl prints, and kubectl's ways of naming
objects and files on the command line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from django.contrib.auth import get_user_model

from karpui import models
from karpui.kinds.resources import Resource, resolve
from karpui.people.audit import Actor
from provisioner.cluster.objects import NotFound
from provisioner.manifests.documents import MAX_BYTES, decode, read_stream

T = TypeVar("T")


class KarpError(Exception):
    """A user-facing failure: printed as kubectl prints errors, exit status 1."""


@dataclass(frozen=True)
class Run:
    """One `karp` invocation on a cluster: the words after the verb, the parsed options, who acts (the operator), and
    where it prints."""

    cluster: models.Cluster
    words: list[str]
    options: dict[str, Any]
    actor: Actor
    out: Callable[[str], None]
    err: Callable[[str], None]


def person(options: dict[str, Any]) -> Actor:
    """Decisions are made by a karpui user (with permissions), named with --as."""
    name = options.get("as_user")
    if not name:
        raise KarpError("--as USER is required: decisions are made by a karpui user with the right permission")
    user = get_user_model().objects.filter(username=name).first()
    if user is None:
        raise KarpError(f'user "{name}" not found')
    return Actor.for_user(user, "cli")


def not_found_as_kubectl(resource: Resource, name: str, write: Callable[[], T]) -> T:
    try:
        return write()
    except NotFound:
        raise KarpError(f'Error from server (NotFound): {resource.qualified} "{name}" not found') from None


def prefix(resource: Resource) -> str:
    """kubectl's `deployment.apps` / `pod` form before a name."""
    return f"{resource.aliases[0]}.{resource.group}" if resource.group else resource.aliases[0]


def node_names(rest: list[str], verb: str) -> list[str]:
    names = [word.partition("/")[2] if word.startswith("node/") else word for word in rest if word != "node"]
    if not names:
        raise KarpError(f"usage: karp {verb} NODE")
    return names


def kind_and_names(words: list[str], *, require_name: bool) -> list[tuple[Resource, str | None]]:
    """kubectl's forms: `KIND`, `KIND NAME [NAME...]`, `KIND/NAME [KIND/NAME...]`."""
    if not words:
        raise KarpError("You must specify the type of resource to get.")
    if "/" in words[0]:
        return [(resolve(word.partition("/")[0]), word.partition("/")[2]) for word in words]
    resource = resolve(words[0])
    if len(words) == 1:
        if require_name:
            raise KarpError("resource(s) were provided, but no name was specified")
        return [(resource, None)]
    return [(resource, name) for name in words[1:]]


def read_files(paths: list[str]) -> str:
    """The files' text joined as one stream of documents; each must be UTF-8 and the whole within the size cap."""
    texts = []
    total = 0
    for path in paths:
        if path == "-":
            texts.append(read_stream(sys.stdin, "standard input"))
            continue
        target = Path(path)
        if target.is_dir():
            files = sorted(p for p in target.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        elif target.exists():
            files = [target]
        else:
            raise KarpError(f'the path "{path}" does not exist')
        for file in files:
            try:
                total += file.stat().st_size
                if total > MAX_BYTES:  # checked before reading: a huge file is refused without filling memory
                    raise KarpError(f"{file}: the files are larger than {MAX_BYTES // (1024 * 1024)} MiB together")
                texts.append(decode(file.read_bytes(), str(file)))
            except OSError as error:
                raise KarpError(f"cannot read {file}: {error.strerror}") from None
    return "\n---\n".join(texts)

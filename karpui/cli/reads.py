"""`karp get`, `describe`, `logs` and `savings`: what kubectl prints of a cluster, read from its rows."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.utils import timezone

from karpui import models
from karpui.cli.common import (
    KarpError,
    Run,
    kind_and_names,
    prefix,
)
from karpui.cli.jsonpath import render
from karpui.clusters import lab, storage
from karpui.gate import disruption
from karpui.kinds import printers
from karpui.kinds.resources import NAMESPACED, Resource, resolve
from provisioner.durations import parse_duration
from provisioner.selectors import LabelSelector


def get(run: Run) -> None:
    cluster, rest, options = run.cluster, run.words, run.options
    selector = LabelSelector.parse(options["selector"])
    output = options["output"]
    if rest and "," in rest[0] and "/" not in rest[0]:
        _get_kinds(run, [resolve(word) for word in rest[0].split(",") if word], rest[1:])
        return
    for resource, name in kind_and_names(rest, require_name=False):
        manifests = _select(cluster, resource, name, options, selector)
        if output.startswith("jsonpath="):
            body = manifests[0] if name is not None else printers.as_list(manifests)
            run.out(render(output[len("jsonpath=") :], body))
        elif output in ("json", "yaml"):
            shown = options.get("show_managed_fields", False)
            run.out(printers.render(manifests, output, single=name is not None, show_managed_fields=shown))
        elif output == "name":
            for manifest in manifests:
                run.out(f"{prefix(resource)}/{manifest['metadata']['name']}")
        elif not manifests:
            run.err(f"No resources found{_where(resource, options)}.")
        else:
            run.out(_table(cluster, resource, manifests, options))


def _get_kinds(run: Run, resources: list[Resource], names: list[str]) -> None:
    """`get nodeclaims,nodes`: each kind's table in turn, names prefixed with their kind, as kubectl prints."""
    cluster, options = run.cluster, run.options
    if names:
        raise KarpError(
            "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form"
        )
    selector = LabelSelector.parse(options["selector"])
    output = options["output"]
    found = [(r, _select(cluster, r, None, options, selector)) for r in resources]
    if output in ("json", "yaml") or output.startswith("jsonpath="):
        body = printers.as_list([m for _, manifests in found for m in manifests])
        if output.startswith("jsonpath="):
            run.out(render(output[len("jsonpath=") :], body))
        else:
            shown = options.get("show_managed_fields", False)
            run.out(printers.render(body["items"], output, single=False, show_managed_fields=shown))
        return
    blocks = []
    for resource, manifests in found:
        if output == "name":
            blocks.extend(f"{prefix(resource)}/{m['metadata']['name']}" for m in manifests)
        elif manifests:
            named = [
                {**m, "metadata": {**m["metadata"], "name": f"{prefix(resource)}/{m['metadata']['name']}"}}
                for m in manifests
            ]
            blocks.append(_table(cluster, resource, named, options) + ("\n" if output != "name" else ""))
    if not any(manifests for _, manifests in found):
        run.err(f"No resources found{_where(resources[0], options)}.")
        return
    run.out("\n".join(blocks).rstrip("\n"))


def _where(resource: Resource, options: dict[str, Any]) -> str:
    if resource.kind in NAMESPACED and not options["all_namespaces"]:
        return f" in {options['namespace'] or 'default'} namespace"
    return ""


def _table(
    cluster: models.Cluster, resource: Resource, manifests: list[dict[str, Any]], options: dict[str, Any]
) -> str:
    columns = resource.columns
    if options["all_namespaces"] and resource.kind in NAMESPACED:
        columns = (
            printers.Column("NAMESPACE", lambda m, now: m["metadata"].get("namespace", "")),
            *columns,
        )
    table = printers.table(manifests, columns, cluster.clock, wide=options["output"] == "wide")
    return "\n".join(table.splitlines()[1:]) if options["no_headers"] else table


def _select(
    cluster: models.Cluster,
    resource: Resource,
    name: str | None,
    options: dict[str, Any],
    selector: LabelSelector,
) -> list[dict[str, Any]]:
    manifests = [
        m for m in storage.list_manifests(cluster, resource) if selector.matches(m["metadata"].get("labels") or {})
    ]
    if resource.kind in NAMESPACED and not options["all_namespaces"]:
        namespace = options["namespace"] or "default"
        manifests = [m for m in manifests if (m["metadata"].get("namespace") or "default") == namespace]
    if name is not None:
        manifests = [m for m in manifests if m["metadata"]["name"] == name]
        if not manifests:
            raise KarpError(f'Error from server (NotFound): {resource.qualified} "{name}" not found')
    return manifests


def describe(run: Run) -> None:
    cluster, rest, options = run.cluster, run.words, run.options
    for resource, name in kind_and_names(rest, require_name=True):
        [manifest] = _select(cluster, resource, name, options, LabelSelector())
        meta = manifest["metadata"]
        lines = [f"Name:         {meta['name']}"]
        if meta.get("namespace"):
            lines.append(f"Namespace:    {meta['namespace']}")
        lines.append(
            "Labels:       "
            + ("\n              ".join(f"{k}={v}" for k, v in sorted((meta.get("labels") or {}).items())) or "<none>")
        )
        lines.append(
            "Annotations:  "
            + (
                "\n              ".join(f"{k}: {v}" for k, v in sorted((meta.get("annotations") or {}).items()))
                or "<none>"
            )
        )
        lines.append(f"API Version:  {manifest.get('apiVersion')}")
        lines.append(f"Kind:         {manifest.get('kind')}")
        lines.append(f"Created:      {meta.get('creationTimestamp')}")
        for section in ("spec", "status"):
            if manifest.get(section):
                lines.append(f"{section.capitalize()}:")
                lines.extend("  " + line for line in printers.as_yaml(manifest[section]).rstrip().splitlines())
        events = [
            e
            for e in lab.objects(cluster, "Event")
            if (e.get("involvedObject") or {}).get("name") == meta["name"]
            and (e.get("involvedObject") or {}).get("kind") == manifest["kind"]
        ]
        lines.append("Events:" if events else "Events:       <none>")
        if events:
            rows = [["Type", "Reason", "Age", "From", "Message"], ["----", "------", "----", "----", "-------"]]
            for event in sorted(events, key=lambda e: e.get("lastTimestamp", "")):
                age = printers.age({"metadata": {"creationTimestamp": event.get("lastTimestamp")}}, cluster.clock)
                count = int(event.get("count", 1))
                rows.append(
                    [
                        event.get("type", ""),
                        event.get("reason", ""),
                        f"{age}" + (f" (x{count})" if count > 1 else ""),
                        "karpenter",
                        event.get("message", ""),
                    ]
                )
            widths = [max(len(r[i]) for r in rows) for i in range(4)]
            lines.extend(
                "  " + "  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in rows
            )
        run.out("\n".join(lines))


def logs(run: Run) -> None:
    cluster, options = run.cluster, run.options
    entries = models.LogEntry.objects.filter(cluster=cluster)
    if options["since"]:
        seconds = parse_duration(options["since"])
        assert seconds is not None
        entries = entries.filter(time__gte=cluster.clock - timedelta(seconds=seconds))
    for entry in entries.order_by("time", "id"):
        run.out(json.dumps(entry.as_dict()))


def audit(run: Run) -> None:
    """The cluster's own audit trail, newest first (at most 100 rows, or --since a duration of wall time): who
    decided or changed what, through what, when and why; -o json gives every field of each row."""
    since = parse_duration(run.options["since"]) if run.options.get("since") else None
    events = models.AuditEvent.objects.filter(cluster=run.cluster)
    if since is not None:
        events = events.filter(created_at__gte=timezone.now() - timedelta(seconds=since))
    rows = list(events.order_by("-created_at", "-id")[:100])
    if run.options.get("output") == "json":
        items = [
            {
                "time": e.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "cluster": e.cluster_name,
                "actor": e.actor_name,
                "impersonator": e.impersonator,
                "via": e.via,
                "action": e.action,
                "target": f"{e.target_kind}/{e.target_name}",
                "reason": e.reason,
            }
            for e in rows
        ]
        run.out(json.dumps({"cluster": run.cluster.name, "items": items}, indent=2))
        return
    table = [["TIME", "WHO", "VIA", "ACTION", "TARGET", "REASON"]]
    table += [
        [
            e.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            f"{e.actor_name} (impersonated by {e.impersonator})" if e.impersonator else e.actor_name,
            e.via,
            e.action,
            f"{e.target_kind}/{e.target_name}",
            " ".join(e.reason.split()),
        ]
        for e in rows
    ]
    widths = [max(len(r[i]) for r in table) for i in range(6)]
    run.out("\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table))


def savings(run: Run) -> None:
    cluster = run.cluster
    ledger = disruption.savings_ledger(cluster)
    rows = [["NODEPOOL", "COMMANDS", "SAVING $/H", "REALISED $", "FORGONE $/H"]]
    rows += [
        [
            pool,
            str(e["commands"]),
            f"{e['saving_per_hour']:.4f}",
            f"{e['realised']:.4f}",
            f"{e['forgone_per_hour']:.4f}",
        ]
        for pool, e in sorted(ledger.items())
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    run.out("\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows))

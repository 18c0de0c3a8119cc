"""`karp advance`, `reset`, `kubeconfig`, `cluster create` and `crds`: the lab's clock and its setup."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from django.contrib.auth import get_user_model

from karpui import models
from karpui.cli.common import (
    KarpError,
    Run,
)
from karpui.clusters import lab
from karpui.kinds import printers
from karpui.kubeapi.kubeconfig import DEFAULT_SERVER, merged
from karpui.kubeapi.kubeconfig import kubeconfig as kubeconfig_for
from karpui.people.audit import Actor
from karpui.writes import lab_objects, setup
from provisioner.durations import format_duration, parse_duration


def advance(run: Run) -> None:
    cluster, rest = run.cluster, run.words
    if len(rest) != 1:
        raise KarpError("usage: karp advance DURATION (for example 5s, 2m, 1h30m)")
    seconds = parse_duration(rest[0])
    assert seconds is not None
    before = models.LogEntry.objects.filter(cluster=cluster).count()
    running = lab.advance(cluster.name, seconds)
    cluster.refresh_from_db()
    pods = running.store.list("Pod")
    counts = {
        phase: sum(1 for p in pods if (p.get("status") or {}).get("phase") == phase) for phase in ("Running", "Pending")
    }
    run.out(
        f"advanced {format_duration(seconds)} to {printers.iso(running.now)}: "
        f"{len(running.store.list('Node'))} nodes, {len(running.store.list('NodeClaim'))} nodeclaims, "
        f"{counts['Running']} pods running, {counts['Pending']} pending, "
        f"{models.LogEntry.objects.filter(cluster=cluster).count() - before} log records"
    )


def reset(run: Run) -> None:
    cluster = run.cluster
    lab.reset(cluster.name)
    lab_objects.lab_install_ensure(cluster)
    run.out(
        f"cluster {cluster.name} reset: workloads, nodes, NodeClaims and logs removed "
        "(namespaces, NodePools, node classes and catalogs kept; the control plane and Karpenter installed again)"
    )


def kubeconfig(run: Run) -> None:
    """`kubeconfig [CLUSTER ...] [--kind]`: print a kubeconfig for the clusters' Kubernetes APIs (by default --cluster's)
    with a new token of --as USER (default: the first superuser) for each, the first cluster's context current;
    `karp kubeconfig > ~/.kube/config` and kubectl talks to the lab. With --kind, each cluster's entries are named
    `kind-<cluster>` as kind names them."""
    options = run.options
    names = list(dict.fromkeys(run.words)) or [run.cluster.name]
    known = set(models.Cluster.objects.filter(name__in=names).values_list("name", flat=True))
    missing = [name for name in names if name not in known]
    if missing:
        raise KarpError(f'cluster "{missing[0]}" not found (karp cluster create {missing[0]} makes it)')
    users = get_user_model().objects
    user = (
        users.filter(username=options["as_user"]).first()
        if options["as_user"]
        else users.filter(is_superuser=True, is_active=True).order_by("pk").first()
    )
    if user is None:
        raise KarpError(
            f'user "{options["as_user"]}" not found'
            if options["as_user"]
            else "no superuser yet: name one with --as USER"
        )
    ca = options["certificate_authority"]
    config = merged(
        [
            kubeconfig_for(
                user=user,
                cluster=name,
                server=options["server"] or DEFAULT_SERVER,
                certificate_authority=Path(ca) if ca else None,
                kind_names=options["kind"],
            )
            for name in names
        ]
    )
    run.out(yaml.safe_dump(config, sort_keys=False).rstrip())
    if not config["clusters"][0]["cluster"]["server"].startswith("https://"):
        # client-go drops a kubeconfig's credentials for a plain-HTTP server; the Python client sends them.
        run.err(
            "note: kubectl sends the token only over HTTPS: serve karpui with TLS (README, kubectl and the "
            "Kubernetes API) and give --server https://... --certificate-authority CERT"
        )


def cluster(words: list[str], options: dict[str, Any], actor: Actor, out: Callable[[str], None]) -> None:
    """`cluster create NAME [--mode lab|kwok|observe] [--kubeconfig FILE|in-cluster] [--context NAME] [--components
    all|cluster|none]`: the machine's operator makes a cluster (audited), as an admin can."""
    if len(words) != 2 or words[0] != "create":
        raise KarpError(
            "usage: karp cluster create NAME [--mode lab|kwok|observe] [--kubeconfig FILE] [--context CTX] "
            "[--components all|cluster|none]"
        )
    made = setup.cluster_create(
        name=words[1],
        actor=actor,
        mode=options["mode"],
        kubeconfig=options["kubeconfig"] or "",
        context=options["context"] or "",
        components=options.get("components") or "",
    )
    plain = f", components {made.lab_components}" if made.mode == "lab" and options.get("components") else ""
    out(f"cluster.karpui.dev/{made.name} created ({made.mode}{plain})")


def crds(words: list[str], options: dict[str, Any], actor: Actor, out: Callable[[str], None]) -> None:
    """About no cluster of karpui's: the CustomResourceDefinitions a kwok cluster needs installed."""
    from karpui.kubeapi.openapi import crd_manifests

    out(yaml.safe_dump_all(crd_manifests(), sort_keys=False).rstrip())

"""`karp apply`, `delete`, `scale`, `taint`, `label`, `annotate`, `rollout restart`, `cordon`, `uncordon` and `drain`:
kubectl's verbs, each through the write path the Kubernetes API and the dashboard use (karpui.writes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from karpui import models
from karpui.cli.common import (
    KarpError,
    Run,
    kind_and_names,
    node_names,
    not_found_as_kubectl,
    prefix,
    read_files,
)
from karpui.clusters import lab
from karpui.kinds import printers
from karpui.kinds.resources import Resource, resolve
from karpui.people.audit import Actor
from karpui.writes import manifests, nodes, objects
from provisioner.cluster.objects import NotFound, TooManyRequests, controller_of
from provisioner.manifests import load_documents
from provisioner.manifests.cluster import MAX_REPLICAS
from provisioner.taints import EFFECTS, Taint


def apply(run: Run) -> None:
    cluster, rest, options, actor = run.cluster, run.words, run.options, run.actor
    if not options["filename"]:
        raise KarpError("must specify one of -f and -k")
    if rest:
        raise KarpError(f"unexpected arguments {rest}")
    for result in manifests.manifests_apply(cluster=cluster, text=read_files(options["filename"]), actor=actor):
        run.out(str(result))


def delete(run: Run) -> None:
    cluster, rest, options, actor = run.cluster, run.words, run.options, run.actor
    if options["filename"]:
        targets = [
            (d.kind, d.name, d.body["metadata"].get("namespace") or "default")
            for d in load_documents(read_files(options["filename"]))
        ]
    else:
        namespace = options["namespace"] or "default"
        targets = [(r.kind, name or "", namespace) for r, name in kind_and_names(rest, require_name=True)]
    for kind, name, namespace in targets:
        resource = resolve(kind)
        try:
            objects.object_delete(cluster=cluster, kind=resource.kind, name=name, namespace=namespace, actor=actor)
        except NotFound:
            raise KarpError(f'Error from server (NotFound): {resource.qualified} "{name}" not found') from None
        run.out(f'{resource.aliases[0]}{"." + resource.group if resource.group else ""} "{name}" deleted')


def scale(run: Run) -> None:
    cluster, rest, options, actor = run.cluster, run.words, run.options, run.actor
    replicas = options["replicas"]
    if replicas is None or replicas < 0:
        raise KarpError("--replicas=COUNT is required, and COUNT must be greater than or equal to 0")
    [(resource, name)] = kind_and_names(rest, require_name=True)
    if resource.kind not in ("Deployment", "ReplicaSet", "NodePool"):
        raise KarpError(f"cannot scale {resource.plural}: only deployments, replicasets and (static) nodepools")
    if replicas > MAX_REPLICAS and resource.kind != "NodePool":
        raise KarpError(f"--replicas: at most {MAX_REPLICAS} replicas (karpui's limit per workload)")
    namespace = options["namespace"] or "default"
    not_found_as_kubectl(
        resource,
        name or "",
        lambda: objects.workload_scale(
            cluster=cluster,
            kind=resource.kind,
            name=name or "",
            namespace=namespace,
            replicas=replicas,
            actor=actor,
        ),
    )
    run.out(f"{resource.aliases[0]}.{resource.group}/{name} scaled")


def taint(run: Run) -> None:
    cluster, rest, options, actor = run.cluster, run.words, run.options, run.actor
    if len(rest) < 3 or resolve(rest[0]).kind != "Node":
        raise KarpError("usage: karp taint node NAME key[=value]:Effect [--overwrite] | key[:Effect]-")
    name, specs = rest[1], rest[2:]

    def taint(node: dict[str, Any]) -> None:
        taints: list[dict[str, str]] = list((node.get("spec") or {}).get("taints") or [])
        for spec in specs:
            taints = _apply_taint(taints, spec, overwrite=options["overwrite"], node=name)
        node.setdefault("spec", {})["taints"] = taints

    _edit(cluster, resolve("node"), name, "", taint, actor)
    # kubectl's word for it (reorganizeTaints): an --overwrite, or adding and removing at once, "modified".
    added, removed = any(not s.endswith("-") for s in specs), any(s.endswith("-") for s in specs)
    done = "modified" if (added and removed) or options["overwrite"] else "tainted" if added else "untainted"
    run.out(f"node/{name} {done}")


def rollout(run: Run) -> None:
    cluster, rest, options, actor = run.cluster, run.words, run.options, run.actor
    if not rest or rest[0] != "restart":
        raise KarpError("only `karp rollout restart deploy/NAME` is supported")
    [(resource, name)] = kind_and_names(rest[1:], require_name=True)
    if resource.kind not in ("Deployment", "DaemonSet"):
        raise KarpError(f"cannot restart {resource.plural}")

    now = printers.iso(cluster.clock.timestamp())

    def restart(obj: dict[str, Any]) -> None:
        template_meta = obj["spec"].setdefault("template", {}).setdefault("metadata", {})
        template_meta.setdefault("annotations", {})["kubectl.kubernetes.io/restartedAt"] = now

    _edit(cluster, resource, name or "", options["namespace"] or "default", restart, actor)
    run.out(f"{resource.aliases[0]}.{resource.group}/{name} restarted")


def _edit(
    cluster: models.Cluster,
    resource: Resource,
    name: str,
    namespace: str,
    edit: Callable[[dict[str, Any]], None],
    actor: Actor,
) -> bool:
    """Change one object through the shared write path; whether it changed. A missing one is kubectl's error."""
    _, changed = not_found_as_kubectl(
        resource,
        name,
        lambda: objects.object_edit(
            cluster=cluster, kind=resource.kind, name=name, namespace=namespace, edit=edit, actor=actor
        ),
    )
    return changed


def label(run: Run) -> None:
    _metadata_map(run, "labels")


def annotate(run: Run) -> None:
    _metadata_map(run, "annotations")


def _metadata_map(run: Run, field: str) -> None:
    """`label|annotate KIND NAME key=value key2- [--overwrite]` (or KIND/NAME): kubectl's rules and words."""
    cluster, rest, options, actor = run.cluster, run.words, run.options, run.actor
    changes = [word for word in rest if "=" in word or word.endswith("-")]
    targets = kind_and_names([word for word in rest if word not in changes], require_name=True)
    if not changes:
        raise KarpError(f"at least one {field[:-1]} update is required")
    for resource, name in targets:
        namespace = options["namespace"] or "default"

        def edit(obj: dict[str, Any]) -> None:
            values = obj["metadata"].setdefault(field, {})
            for change in changes:
                if change.endswith("-") and "=" not in change:
                    values.pop(change[:-1], None)
                    continue
                key, _, value = change.partition("=")
                if key in values and values[key] != value and not options["overwrite"]:
                    raise KarpError(
                        f"'{key}' already has a value ({values[key]}), and --overwrite is false"
                        if field == "labels"
                        else f"--overwrite is false but found the following declared annotation(s): "
                        f"'{key}' already has a value ({values[key]})"
                    )
                values[key] = value
            if not values:
                obj["metadata"].pop(field)

        changed = _edit(cluster, resource, name or "", namespace, edit, actor)
        shown = prefix(resource)
        if field == "annotations":
            outcome = "annotated"
        elif not changed:
            outcome = "not labeled"
        else:
            outcome = "labeled" if any("=" in c for c in changes) else "unlabeled"
        run.out(f"{shown}/{name} {outcome}")


def cordon(run: Run) -> None:
    rest = run.words
    for name in node_names(rest, "cordon"):
        _set_unschedulable(run, name, True)


def uncordon(run: Run) -> None:
    rest = run.words
    for name in node_names(rest, "uncordon"):
        _set_unschedulable(run, name, False)


def _set_unschedulable(run: Run, name: str, cordoned: bool) -> None:
    """cordon and uncordon as the dashboard's node page does them (one service, audited)."""
    try:
        changed = nodes.node_cordon(cluster=run.cluster, name=name, actor=run.actor, cordoned=cordoned)
    except LookupError:
        raise KarpError(f'Error from server (NotFound): nodes "{name}" not found') from None
    word = "cordoned" if cordoned else "uncordoned"
    run.out(f"node/{name} {word if changed else 'already ' + word}")


def drain(run: Run) -> None:
    """kubectl drain: cordon, then evict every pod on the node through the eviction API (PodDisruptionBudgets
    are honoured: a refused eviction is reported and the drain fails, the node stays cordoned)."""
    cluster, rest, options, actor = run.cluster, run.words, run.options, run.actor
    [name] = node_names(rest, "drain")[:1] or [""]
    _set_unschedulable(run, name, True)
    pods = [p for p in lab.objects(cluster, "Pod") if (p.get("spec") or {}).get("nodeName") == name]
    daemons = [p for p in pods if _owner_kind(p) == "DaemonSet"]
    bare = [p for p in pods if not _owner_kind(p)]
    problems = []
    if daemons and not options["ignore_daemonsets"]:
        problems.append(
            "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): " + _pod_names(daemons)
        )
    if bare and not options["force"]:
        problems.append("cannot delete Pods that declare no controller (use --force to override): " + _pod_names(bare))
    if problems:
        raise KarpError(f'unable to drain node "{name}" due to error: {", ".join(problems)}')
    if daemons:
        run.err(f"Warning: ignoring DaemonSet-managed Pods: {_pod_names(daemons)}")
    refused = []
    for pod in (p for p in pods if p not in daemons):
        meta = pod["metadata"]
        run.out(f"evicting pod {meta['namespace']}/{meta['name']}")
        try:
            objects.pod_evict(cluster=cluster, name=meta["name"], namespace=meta["namespace"], actor=actor)
        except TooManyRequests:
            refused.append(pod)
            run.err(
                f'error when evicting pods/"{meta["name"]}" -n "{meta["namespace"]}": Cannot evict pod as it '
                "would violate the pod's disruption budget."
            )
            continue
        except NotFound:
            pass  # gone meanwhile: nothing to evict
        run.out(f"pod/{meta['name']} evicted")
    if refused:
        raise KarpError(f'unable to drain node "{name}": {len(refused)} pod(s) could not be evicted')
    run.out(f"node/{name} drained")


def _owner_kind(pod: dict[str, Any]) -> str:
    owner = controller_of(pod)
    return str(owner.get("kind", "")) if owner else ""


def _pod_names(pods: list[dict[str, Any]]) -> str:
    return ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods)


def _apply_taint(taints: list[dict[str, str]], spec: str, *, overwrite: bool, node: str) -> list[dict[str, str]]:
    if spec.endswith("-"):
        body = spec[:-1]
        key, _, effect = body.partition(":")
        key = key.split("=")[0]
        kept = [t for t in taints if not (t["key"] == key and (not effect or t["effect"] == effect))]
        if len(kept) == len(taints):
            raise KarpError(f"taint {body!r} not found")
        return kept
    try:
        taint = Taint.parse(spec)
    except ValueError as error:
        raise KarpError(f"{error} (effects: {', '.join(EFFECTS)})") from None
    existing = [t for t in taints if t["key"] == taint.key and t["effect"] == taint.effect]
    if existing and not overwrite:
        raise KarpError(f"node {node} already has {taint.key} taint(s) with same effect(s) and --overwrite is false")
    return [t for t in taints if t not in existing] + [taint.to_spec()]

"""`manage.py karp`: kubectl for karpui's lab cluster.

kubectl's verbs, writing through the same path as the Kubernetes API (karpui.objects):
  apply -f FILE|DIR|- (three-way, as kubectl's), delete -f FILE | delete KIND NAME,
  get KIND[,KIND...] [NAME] [-n NS|-A] [-l SEL] [-o wide|json|yaml|name|jsonpath=...] [--no-headers],
  describe KIND NAME, scale deploy/NAME --replicas N, rollout restart deploy/NAME,
  label|annotate KIND NAME key=value key2- [--overwrite], taint node NAME key=value:Effect [--overwrite] | key:Effect-,
  cordon NODE, uncordon NODE, drain NODE [--ignore-daemonsets] [--force].
The lab: advance DURATION, logs [--since DURATION], reset, cluster create NAME [--mode lab|kwok|observe]
  [--kubeconfig FILE|in-cluster] [--context CTX] (then --cluster NAME picks it; every verb refuses a cluster that does
  not exist), kubeconfig [--as USER] [--server URL] [--certificate-authority FILE], crds (the CustomResourceDefinitions
  a kwok cluster needs: karp crds | kubectl apply -f -).
Decisions, each made as a karpui user and audited: approve NAME|deny NAME --as USER [--reason TEXT],
  pause --as USER --for 2h --reason TEXT, resume --as USER, disrupt node NAME --as USER --reason TEXT (another
  person approves), savings (realised and forgone per NodePool).
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import yaml
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand

from karpui import disruption, lab, models, objects, selectors, services
from karpui.kubeapi.kubeconfig import DEFAULT_SERVER, kubeconfig
from karpui.kubectl import printers
from karpui.kubectl.jsonpath import JSONPathError, render
from karpui.kubectl.resources import NAMESPACED, Resource, resolve
from provisioner.cluster.objects import NotFound, TooManyRequests, controller_of
from provisioner.durations import DurationError, format_duration, parse_duration
from provisioner.manifests import ManifestError, load_documents
from provisioner.manifests.cluster import MAX_REPLICAS
from provisioner.manifests.documents import MAX_BYTES, decode, read_stream
from provisioner.selectors import LabelSelector, SelectorError
from provisioner.taints import EFFECTS, Taint

VERBS = (
    "apply",
    "delete",
    "get",
    "describe",
    "scale",
    "taint",
    "label",
    "annotate",
    "cordon",
    "uncordon",
    "drain",
    "rollout",
    "advance",
    "logs",
    "reset",
    "approve",
    "deny",
    "pause",
    "resume",
    "disrupt",
    "savings",
    "kubeconfig",
    "crds",
    "cluster",
)
OUTPUTS = ("wide", "json", "yaml", "name")
T = TypeVar("T")


class KarpError(Exception):
    """A user-facing failure: printed as kubectl prints errors, exit status 1."""


class Command(BaseCommand):
    help = __doc__

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument("--cluster", default=services.DEFAULT_CLUSTER, help="cluster name (default: lab)")
        parser.add_argument("-n", "--namespace", default=None)
        parser.add_argument("-A", "--all-namespaces", action="store_true")
        parser.add_argument("-f", "--filename", action="append", default=[])
        parser.add_argument("-o", "--output", default="")
        parser.add_argument("--show-managed-fields", action="store_true", help="get -o yaml|json: keep managedFields")
        parser.add_argument("-l", "--selector", default="")
        parser.add_argument("--replicas", type=int, default=None)
        parser.add_argument("--overwrite", action="store_true")
        parser.add_argument("--ignore-daemonsets", action="store_true", help="drain: leave DaemonSet pods")
        parser.add_argument("--force", action="store_true", help="drain: evict pods no controller manages")
        parser.add_argument("--delete-emptydir-data", action="store_true", help="drain: accepted, as kubectl's")
        parser.add_argument("--since", default=None)
        parser.add_argument("--no-headers", action="store_true")
        parser.add_argument(
            "--as", dest="as_user", default=None, help="the karpui user deciding (approve, deny, pause)"
        )
        parser.add_argument("--reason", default="")
        parser.add_argument("--for", dest="for_duration", default=None, help="pause duration, e.g. 2h")
        parser.add_argument("--server", default=None, help="kubeconfig: karpui's URL (default http://127.0.0.1:8000)")
        parser.add_argument("--certificate-authority", default=None, help="kubeconfig: CA file of an HTTPS server")
        parser.add_argument("--mode", default="lab", help="cluster create: lab (default), kwok or observe")
        parser.add_argument(
            "--kubeconfig", default=None, help="cluster create: how to reach a kwok or observe cluster (or in-cluster)"
        )
        parser.add_argument("--context", default=None, help="cluster create: the kubeconfig's context")
        parser.add_argument("args", nargs="*")
        return parser

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._dispatch(list(args), options)
        except BrokenPipeError:
            sys.stderr.close()  # `karp logs | head`: the reader left; that is not an error
        except (PermissionDenied, ValidationError) as error:
            messages = getattr(error, "messages", None) or [str(error)]
            self.stderr.write(f"error: {'; '.join(messages)}")
            sys.exit(1)
        except (KarpError, ManifestError, LookupError, SelectorError, JSONPathError, DurationError) as error:
            message = str(error).strip("'\"") if isinstance(error, KeyError) else str(error)
            self.stderr.write(message if message.startswith(("error", "Error")) else f"error: {message}")
            sys.exit(1)

    def _dispatch(self, words: list[str], options: dict[str, Any]) -> None:
        if not words:
            raise KarpError(f"a verb is required: one of {', '.join(VERBS)}")
        verb, rest = words[0], words[1:]
        if verb not in VERBS:
            raise KarpError(f'unknown command "{verb}" for "karp"')
        output = options["output"]
        if output and output not in OUTPUTS and not output.startswith("jsonpath="):
            raise KarpError(
                f'unable to match a printer suitable for the output format "{output}", '
                f"allowed formats are: {','.join(OUTPUTS)},jsonpath"
            )
        actor = services.Actor(name=f"cli:{getpass.getuser()}", via="cli")
        if verb == "cluster":
            self._cluster(rest, options, actor)
            return
        if verb == "crds":  # about no cluster of karpui's: what a kwok cluster needs installed
            from karpui.kubeapi.openapi import crd_manifests

            self.stdout.write(yaml.safe_dump_all(crd_manifests(), sort_keys=False).rstrip())
            return
        try:
            cluster = selectors.cluster_get(name=options["cluster"])
        except LookupError as error:
            raise KarpError(
                f"{error}: clusters are made in the admin, or by the operator with `karp cluster create NAME`"
            ) from None
        getattr(self, f"_{verb}")(cluster, rest, options, actor)

    def _cluster(self, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        """`cluster create NAME [--mode lab|kwok|observe] [--kubeconfig FILE|in-cluster] [--context NAME]`: the
        machine's operator makes a cluster (audited), as an admin can."""
        if len(rest) != 2 or rest[0] != "create":
            raise KarpError(
                "usage: karp cluster create NAME [--mode lab|kwok|observe] [--kubeconfig FILE] [--context CTX]"
            )
        cluster = services.cluster_create(
            name=rest[1],
            actor=actor,
            mode=options["mode"],
            kubeconfig=options["kubeconfig"] or "",
            context=options["context"] or "",
        )
        self.stdout.write(f"cluster.karpui.dev/{cluster.name} created ({cluster.mode})")

    # Verbs ------------------------------------------------------------------------------------------------------

    def _apply(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        if not options["filename"]:
            raise KarpError("must specify one of -f and -k")
        if rest:
            raise KarpError(f"unexpected arguments {rest}")
        for result in objects.manifests_apply(cluster=cluster, text=_read_files(options["filename"]), actor=actor):
            self.stdout.write(str(result))

    def _delete(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        if options["filename"]:
            targets = [
                (d.kind, d.name, d.body["metadata"].get("namespace") or "default")
                for d in load_documents(_read_files(options["filename"]))
            ]
        else:
            namespace = options["namespace"] or "default"
            targets = [(r.kind, name or "", namespace) for r, name in _kind_and_names(rest, require_name=True)]
        for kind, name, namespace in targets:
            resource = resolve(kind)
            try:
                objects.object_delete(cluster=cluster, kind=resource.kind, name=name, namespace=namespace, actor=actor)
            except NotFound:
                raise KarpError(f'Error from server (NotFound): {resource.qualified} "{name}" not found') from None
            self.stdout.write(f'{resource.aliases[0]}{"." + resource.group if resource.group else ""} "{name}" deleted')

    def _get(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        selector = LabelSelector.parse(options["selector"])
        output = options["output"]
        if rest and "," in rest[0] and "/" not in rest[0]:
            self._get_kinds([resolve(word) for word in rest[0].split(",") if word], rest[1:], cluster, options)
            return
        for resource, name in _kind_and_names(rest, require_name=False):
            manifests = self._select(cluster, resource, name, options, selector)
            if output.startswith("jsonpath="):
                body = manifests[0] if name is not None else printers.as_list(manifests)
                self.stdout.write(render(output[len("jsonpath=") :], body))
            elif output in ("json", "yaml"):
                shown = options.get("show_managed_fields", False)
                self.stdout.write(
                    printers.render(manifests, output, single=name is not None, show_managed_fields=shown)
                )
            elif output == "name":
                for manifest in manifests:
                    self.stdout.write(f"{_prefix(resource)}/{manifest['metadata']['name']}")
            elif not manifests:
                self.stderr.write(f"No resources found{self._where(resource, options)}.")
            else:
                self.stdout.write(self._table(cluster, resource, manifests, options))

    def _get_kinds(
        self, resources: list[Resource], names: list[str], cluster: models.Cluster, options: dict[str, Any]
    ) -> None:
        """`get nodeclaims,nodes`: each kind's table in turn, names prefixed with their kind, as kubectl prints."""
        if names:
            raise KarpError(
                "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form"
            )
        selector = LabelSelector.parse(options["selector"])
        output = options["output"]
        found = [(r, self._select(cluster, r, None, options, selector)) for r in resources]
        if output in ("json", "yaml") or output.startswith("jsonpath="):
            body = printers.as_list([m for _, manifests in found for m in manifests])
            if output.startswith("jsonpath="):
                self.stdout.write(render(output[len("jsonpath=") :], body))
            else:
                shown = options.get("show_managed_fields", False)
                self.stdout.write(printers.render(body["items"], output, single=False, show_managed_fields=shown))
            return
        blocks = []
        for resource, manifests in found:
            if output == "name":
                blocks.extend(f"{_prefix(resource)}/{m['metadata']['name']}" for m in manifests)
            elif manifests:
                named = [
                    {**m, "metadata": {**m["metadata"], "name": f"{_prefix(resource)}/{m['metadata']['name']}"}}
                    for m in manifests
                ]
                blocks.append(self._table(cluster, resource, named, options) + ("\n" if output != "name" else ""))
        if not any(manifests for _, manifests in found):
            self.stderr.write(f"No resources found{self._where(resources[0], options)}.")
            return
        self.stdout.write("\n".join(blocks).rstrip("\n"))

    def _where(self, resource: Resource, options: dict[str, Any]) -> str:
        if resource.kind in NAMESPACED and not options["all_namespaces"]:
            return f" in {options['namespace'] or 'default'} namespace"
        return ""

    def _table(
        self, cluster: models.Cluster, resource: Resource, manifests: list[dict[str, Any]], options: dict[str, Any]
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
        self,
        cluster: models.Cluster,
        resource: Resource,
        name: str | None,
        options: dict[str, Any],
        selector: LabelSelector,
    ) -> list[dict[str, Any]]:
        manifests = [m for m in resource.list_manifests(cluster) if selector.matches(m["metadata"].get("labels") or {})]
        if resource.kind in NAMESPACED and not options["all_namespaces"]:
            namespace = options["namespace"] or "default"
            manifests = [m for m in manifests if (m["metadata"].get("namespace") or "default") == namespace]
        if name is not None:
            manifests = [m for m in manifests if m["metadata"]["name"] == name]
            if not manifests:
                raise KarpError(f'Error from server (NotFound): {resource.qualified} "{name}" not found')
        return manifests

    def _describe(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
        for resource, name in _kind_and_names(rest, require_name=True):
            [manifest] = self._select(cluster, resource, name, options, LabelSelector())
            meta = manifest["metadata"]
            lines = [f"Name:         {meta['name']}"]
            if meta.get("namespace"):
                lines.append(f"Namespace:    {meta['namespace']}")
            lines.append(
                "Labels:       "
                + (
                    "\n              ".join(f"{k}={v}" for k, v in sorted((meta.get("labels") or {}).items()))
                    or "<none>"
                )
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
            self.stdout.write("\n".join(lines))

    def _scale(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        replicas = options["replicas"]
        if replicas is None or replicas < 0:
            raise KarpError("--replicas=COUNT is required, and COUNT must be greater than or equal to 0")
        if replicas > MAX_REPLICAS:
            raise KarpError(f"--replicas: at most {MAX_REPLICAS} replicas (karpui's limit per workload)")
        [(resource, name)] = _kind_and_names(rest, require_name=True)
        if resource.kind not in ("Deployment", "ReplicaSet"):
            raise KarpError(f"cannot scale {resource.plural}: only deployments and replicasets")
        namespace = options["namespace"] or "default"
        _not_found_as_kubectl(
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
        self.stdout.write(f"{resource.aliases[0]}.{resource.group}/{name} scaled")

    def _taint(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        if len(rest) < 3 or resolve(rest[0]).kind != "Node":
            raise KarpError("usage: karp taint node NAME key[=value]:Effect [--overwrite] | key[:Effect]-")
        name, specs = rest[1], rest[2:]

        def taint(node: dict[str, Any]) -> None:
            taints: list[dict[str, str]] = list((node.get("spec") or {}).get("taints") or [])
            for spec in specs:
                taints = _apply_taint(taints, spec, overwrite=options["overwrite"], node=name)
            node.setdefault("spec", {})["taints"] = taints

        self._edit(cluster, resolve("node"), name, "", taint, actor)
        self.stdout.write(f"node/{name} {'untainted' if all(s.endswith('-') for s in specs) else 'tainted'}")

    def _rollout(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
        if not rest or rest[0] != "restart":
            raise KarpError("only `karp rollout restart deploy/NAME` is supported")
        [(resource, name)] = _kind_and_names(rest[1:], require_name=True)
        if resource.kind not in ("Deployment", "DaemonSet"):
            raise KarpError(f"cannot restart {resource.plural}")

        now = printers.iso(cluster.clock.timestamp())

        def restart(obj: dict[str, Any]) -> None:
            template_meta = obj["spec"].setdefault("template", {}).setdefault("metadata", {})
            template_meta.setdefault("annotations", {})["kubectl.kubernetes.io/restartedAt"] = now

        self._edit(cluster, resource, name or "", options["namespace"] or "default", restart, actor)
        self.stdout.write(f"{resource.aliases[0]}.{resource.group}/{name} restarted")

    def _edit(
        self,
        cluster: models.Cluster,
        resource: Resource,
        name: str,
        namespace: str,
        edit: Callable[[dict[str, Any]], None],
        actor: services.Actor,
    ) -> bool:
        """Change one object through the shared write path; whether it changed. A missing one is kubectl's error."""
        _, changed = _not_found_as_kubectl(
            resource,
            name,
            lambda: objects.object_edit(
                cluster=cluster, kind=resource.kind, name=name, namespace=namespace, edit=edit, actor=actor
            ),
        )
        return changed

    def _label(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        self._metadata_map("labels", "label", cluster, rest, options, actor)

    def _annotate(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
        self._metadata_map("annotations", "annotate", cluster, rest, options, actor)

    def _metadata_map(
        self,
        field: str,
        verb: str,
        cluster: models.Cluster,
        rest: list[str],
        options: dict[str, Any],
        actor: services.Actor,
    ) -> None:
        """`label|annotate KIND NAME key=value key2- [--overwrite]` (or KIND/NAME): kubectl's rules and words."""
        changes = [word for word in rest if "=" in word or word.endswith("-")]
        targets = _kind_and_names([word for word in rest if word not in changes], require_name=True)
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

            changed = self._edit(cluster, resource, name or "", namespace, edit, actor)
            prefix = _prefix(resource)
            if field == "annotations":
                outcome = "annotated"
            elif not changed:
                outcome = "not labeled"
            else:
                outcome = "labeled" if any("=" in c for c in changes) else "unlabeled"
            self.stdout.write(f"{prefix}/{name} {outcome}")

    def _cordon(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        for name in _node_names(rest, "cordon"):
            self._set_unschedulable(cluster, name, True, actor)

    def _uncordon(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
        for name in _node_names(rest, "uncordon"):
            self._set_unschedulable(cluster, name, False, actor)

    def _set_unschedulable(self, cluster: models.Cluster, name: str, cordoned: bool, actor: services.Actor) -> None:
        def edit(node: dict[str, Any]) -> None:
            spec = node.setdefault("spec", {})
            if cordoned:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)

        changed = self._edit(cluster, resolve("node"), name, "", edit, actor)
        word = "cordoned" if cordoned else "uncordoned"
        self.stdout.write(f"node/{name} {word if changed else 'already ' + word}")

    def _drain(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        """kubectl drain: cordon, then evict every pod on the node through the eviction API (PodDisruptionBudgets
        are honoured: a refused eviction is reported and the drain fails, the node stays cordoned)."""
        [name] = _node_names(rest, "drain")[:1] or [""]
        self._set_unschedulable(cluster, name, True, actor)
        pods = [p for p in lab.objects(cluster, "Pod") if (p.get("spec") or {}).get("nodeName") == name]
        daemons = [p for p in pods if _owner_kind(p) == "DaemonSet"]
        bare = [p for p in pods if not _owner_kind(p)]
        problems = []
        if daemons and not options["ignore_daemonsets"]:
            problems.append(
                "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): " + _pod_names(daemons)
            )
        if bare and not options["force"]:
            problems.append(
                "cannot delete Pods that declare no controller (use --force to override): " + _pod_names(bare)
            )
        if problems:
            raise KarpError(f'unable to drain node "{name}" due to error: {", ".join(problems)}')
        if daemons:
            self.stderr.write(f"Warning: ignoring DaemonSet-managed Pods: {_pod_names(daemons)}")
        refused = []
        for pod in (p for p in pods if p not in daemons):
            meta = pod["metadata"]
            self.stdout.write(f"evicting pod {meta['namespace']}/{meta['name']}")
            try:
                objects.pod_evict(cluster=cluster, name=meta["name"], namespace=meta["namespace"], actor=actor)
            except TooManyRequests:
                refused.append(pod)
                self.stderr.write(
                    f'error when evicting pods/"{meta["name"]}" -n "{meta["namespace"]}": Cannot evict pod as it '
                    "would violate the pod's disruption budget."
                )
                continue
            except NotFound:
                pass  # gone meanwhile: nothing to evict
            self.stdout.write(f"pod/{meta['name']} evicted")
        if refused:
            raise KarpError(f'unable to drain node "{name}": {len(refused)} pod(s) could not be evicted')
        self.stdout.write(f"node/{name} drained")

    def _advance(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
        if len(rest) != 1:
            raise KarpError("usage: karp advance DURATION (for example 5s, 2m, 1h30m)")
        seconds = parse_duration(rest[0])
        assert seconds is not None
        before = models.LogEntry.objects.filter(cluster=cluster).count()
        running = lab.advance(cluster.name, seconds)
        cluster.refresh_from_db()
        pods = running.store.list("Pod")
        counts = {
            phase: sum(1 for p in pods if (p.get("status") or {}).get("phase") == phase)
            for phase in ("Running", "Pending")
        }
        self.stdout.write(
            f"advanced {format_duration(seconds)} to {printers.iso(running.now)}: "
            f"{len(running.store.list('Node'))} nodes, {len(running.store.list('NodeClaim'))} nodeclaims, "
            f"{counts['Running']} pods running, {counts['Pending']} pending, "
            f"{models.LogEntry.objects.filter(cluster=cluster).count() - before} log records"
        )

    def _logs(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        entries = models.LogEntry.objects.filter(cluster=cluster)
        if options["since"]:
            seconds = parse_duration(options["since"])
            assert seconds is not None
            entries = entries.filter(time__gte=cluster.clock - timedelta(seconds=seconds))
        for entry in entries.order_by("time", "id"):
            self.stdout.write(json.dumps(entry.as_dict()))

    def _approve(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
        for name in rest or [""]:
            command = disruption.command_approve(
                cluster=cluster, name=name, actor=_person(options), reason=options["reason"]
            )
            self.stdout.write(f"disruptioncommand.karpui.dev/{command['metadata']['name']} approved")

    def _deny(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        for name in rest or [""]:
            command = disruption.command_deny(
                cluster=cluster, name=name, actor=_person(options), reason=options["reason"]
            )
            self.stdout.write(f"disruptioncommand.karpui.dev/{command['metadata']['name']} denied")

    def _pause(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        seconds = parse_duration(options["for_duration"] or "")
        assert seconds is not None
        row = disruption.disruption_pause(
            cluster=cluster, actor=_person(options), reason=options["reason"], seconds=seconds
        )
        self.stdout.write(
            f"voluntary disruption paused until {row.paused_until:%Y-%m-%dT%H:%M:%SZ}: {row.pause_reason}"
        )

    def _resume(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        resumed = disruption.disruption_resume(cluster=cluster, actor=_person(options))
        self.stdout.write("voluntary disruption resumed" if resumed else "nothing was paused")

    def _disrupt(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
        if len(rest) != 2 or resolve(rest[0]).kind != "Node":
            raise KarpError("usage: karp disrupt node NAME --as USER --reason TEXT")
        command = disruption.node_disruption_request(
            cluster=cluster, node=rest[1], actor=_person(options), reason=options["reason"]
        )
        self.stdout.write(
            f"disruptioncommand.karpui.dev/{command['metadata']['name']} created (needs another person's approval)"
        )

    def _savings(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
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
        self.stdout.write(
            "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
        )

    def _kubeconfig(
        self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor
    ) -> None:
        """Print a kubeconfig for the cluster's Kubernetes API with a new token of --as USER (default: the first
        superuser); `karp kubeconfig > ~/.kube/config` and kubectl talks to the lab."""
        if rest:
            raise KarpError(f"unexpected arguments {rest}")
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
        config = kubeconfig(
            user=user,
            cluster=cluster.name,
            server=options["server"] or DEFAULT_SERVER,
            certificate_authority=Path(ca) if ca else None,
        )
        self.stdout.write(yaml.safe_dump(config, sort_keys=False).rstrip())
        if not config["clusters"][0]["cluster"]["server"].startswith("https://"):
            # client-go drops a kubeconfig's credentials for a plain-HTTP server; the Python client sends them.
            self.stderr.write(
                "note: kubectl sends the token only over HTTPS: serve karpui with TLS (README, kubectl and the "
                "Kubernetes API) and give --server https://... --certificate-authority CERT"
            )

    def _reset(self, cluster: models.Cluster, rest: list[str], options: dict[str, Any], actor: services.Actor) -> None:
        lab.reset(cluster.name)
        self.stdout.write(
            f"cluster {cluster.name} reset: workloads, nodes, NodeClaims and logs removed "
            "(namespaces, NodePools, node classes and catalogs kept)"
        )


def _person(options: dict[str, Any]) -> services.Actor:
    """Decisions are made by a karpui user (with permissions), named with --as."""
    name = options.get("as_user")
    if not name:
        raise KarpError("--as USER is required: decisions are made by a karpui user with the right permission")
    user = get_user_model().objects.filter(username=name).first()
    if user is None:
        raise KarpError(f'user "{name}" not found')
    return services.Actor.for_user(user, "cli")


def _not_found_as_kubectl(resource: Resource, name: str, write: Callable[[], T]) -> T:
    try:
        return write()
    except NotFound:
        raise KarpError(f'Error from server (NotFound): {resource.qualified} "{name}" not found') from None


def _prefix(resource: Resource) -> str:
    """kubectl's `deployment.apps` / `pod` form before a name."""
    return f"{resource.aliases[0]}.{resource.group}" if resource.group else resource.aliases[0]


def _node_names(rest: list[str], verb: str) -> list[str]:
    names = [word.partition("/")[2] if word.startswith("node/") else word for word in rest if word != "node"]
    if not names:
        raise KarpError(f"usage: karp {verb} NODE")
    return names


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


def _kind_and_names(words: list[str], *, require_name: bool) -> list[tuple[Resource, str | None]]:
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


def _read_files(paths: list[str]) -> str:
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

"""NodePool pages: the list, and the editor (form + YAML, errors at the field, diff, what-if, audited save)."""

from __future__ import annotations

import copy
import json
import re
from contextlib import suppress
from typing import Any

import yaml
from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from karpui import models
from karpui.clusters import store
from karpui.insight import overlays, selectors, summaries, whatif
from karpui.links import cluster_redirect
from karpui.people.audit import Actor
from karpui.web import permissions, schemaform
from karpui.web.views import _cluster
from karpui.writes import configs, objects
from provisioner.labels import APPROVAL_MODE, APPROVAL_THRESHOLD
from provisioner.manifests import ManifestError
from provisioner.manifests.documents import load_document
from provisioner.manifests.fields import type_name
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool
from provisioner.objects import NodePool

# karpui's own fields (annotations Karpenter does not have) -> the manifest path an error names for them
FIELD_PATHS = {
    "approval_mode": f"metadata.annotations.{APPROVAL_MODE}",
    "approval_threshold": f"metadata.annotations.{APPROVAL_THRESHOLD}",
}


_FORM_SECTIONS = ("spec", "spec.disruption", "spec.limits", "metadata", "metadata.annotations")
# How many errors one preview or save collects before it stops looking for more.
MAX_ERRORS = 20


class NodePoolForm(forms.Form):
    """Every field of the NodePool's spec (karpui.web.schemaform, from Karpenter's CRD schema) and karpui's approval
    annotations over the YAML. Built with the current manifest's values as `initial`, so a field the person did not
    touch leaves the YAML as written: only the fields they changed are written into it."""

    approval_mode = forms.ChoiceField(choices=[(m, m) for m in ("auto", "manual", "auto-below", "dry-run")])
    approval_threshold = forms.DecimalField(
        required=False, min_value=0, help_text="$/h; auto-below approves savings up to this"
    )
    manifest = forms.CharField(widget=forms.Textarea(attrs={"rows": 28, "spellcheck": "false"}), label="YAML")
    # The version the editor was opened at: a save over a NodePool changed since is refused, not a lost update.
    resource_version = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, manifest: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.is_bound:
            # A spec field the post does not carry at all is untouched, as a browser sends an untouched input at its
            # initial value: a client that posts only the YAML (curl, a script) edits the YAML and nothing else, and
            # the form it gets back shows those fields as they were rather than blank (blanks sent back would clear).
            data = self.data.copy()
            for name, value in self.initial.items():
                if name.startswith(("spec.", "metadata.")) and name not in data:
                    data[name] = value
            self.data = data
        self.tree = schemaform.nodepool_tree()
        self.rows: dict[str, int] = {}
        self.kept: dict[str, list[int]] = {}  # per list, the form row each item of the proposed list came from
        for item in schemaform.leaves(self.tree):
            if isinstance(item, schemaform.Leaf):
                self.fields[item.path] = schemaform.django_field(item, item.label)
                continue
            count = schemaform.row_count(item, manifest, self.data if self.is_bound else None)
            self.rows[item.path] = count
            for index in range(count):
                for column in item.columns:
                    self.fields[f"{item.path}[{index}].{column.path}"] = schemaform.django_field(column, column.label)

    @staticmethod
    def initial_for(manifest: dict[str, Any]) -> dict[str, Any]:
        annotations = manifest["metadata"].get("annotations") or {}
        initial: dict[str, Any] = {
            "approval_mode": annotations.get(APPROVAL_MODE, "auto"),
            "approval_threshold": annotations.get(APPROVAL_THRESHOLD),
            "manifest": yaml.safe_dump(manifest, sort_keys=False),
        }
        for item in schemaform.leaves(schemaform.nodepool_tree()):
            if isinstance(item, schemaform.Leaf):
                initial[item.path] = schemaform.shown(item, schemaform.get(manifest, item.path))
                continue
            for index, entry in enumerate(schemaform.get(manifest, item.path) or []):
                for column in item.columns:
                    value = entry.get(column.path) if isinstance(entry, dict) else None
                    initial[f"{item.path}[{index}].{column.path}"] = schemaform.shown(column, value)
        return initial

    @classmethod
    def for_manifest(cls, manifest: dict[str, Any]) -> NodePoolForm:
        return cls(initial=cls.initial_for(manifest), manifest=manifest)

    def _changed(self, name: str) -> bool:
        """The person changed this field, and it is valid (an invalid one already has its error)."""
        return name in self.changed_data and name in self.cleaned_data

    def _write(self, doc: dict[str, Any]) -> None:
        """Write the fields the person changed into `doc`: a list of objects is written whole when any of its
        cells changed, its blank rows left out, each item keeping what the form does not show (a taint's
        timeAdded)."""
        for item in schemaform.leaves(self.tree):
            if isinstance(item, schemaform.Leaf):
                if self._changed(item.path):
                    try:
                        schemaform.put(doc, item.path, schemaform.read(item, self.cleaned_data[item.path]))
                    except ValueError as error:
                        self.add_error(item.path, str(error))
                continue
            cells = [f"{item.path}[{i}].{c.path}" for i in range(self.rows[item.path]) for c in item.columns]
            if not any(self._changed(name) for name in cells):
                continue
            before = schemaform.get(doc, item.path)
            before = before if isinstance(before, list) else []
            items, kept = [], []
            for index in range(self.rows[item.path]):
                texts = {
                    c.path: str(self.cleaned_data.get(f"{item.path}[{index}].{c.path}") or "") for c in item.columns
                }
                if not any(text.strip() for text in texts.values()):
                    continue  # a blank row: the one to add another, or one a person cleared
                entry = dict(before[index]) if index < len(before) and isinstance(before[index], dict) else {}
                for column in item.columns:
                    try:
                        value = schemaform.read(column, texts[column.path])
                    except ValueError as error:
                        self.add_error(f"{item.path}[{index}].{column.path}", str(error))
                        continue
                    if value is None:
                        entry.pop(column.path, None)
                    else:
                        entry[column.path] = value
                items.append(entry)
                kept.append(index)
            self.kept[item.path] = kept
            schemaform.put(doc, item.path, items or None)

    def proposed(self) -> dict[str, Any] | None:
        """The YAML with the fields the person changed written into it; None (with the error added) when the YAML
        cannot be read as one NodePool. Call after is_valid(): fields that failed their own checks are left out,
        so the YAML's own errors are still found and shown with theirs."""
        if "manifest" not in self.cleaned_data:
            return None
        try:
            doc = load_document(self.cleaned_data["manifest"])  # the bounds `karp apply` has
        except ManifestError as error:
            self.attach(error)
            return None
        if not isinstance(doc, dict):
            self.add_error("manifest", "expected one NodePool object")
            return None
        if doc.get("kind") != "NodePool":
            self.add_error("manifest", f'kind: expected "NodePool", got {json.dumps(doc.get("kind"))[:100]}')
            return None
        for path in _FORM_SECTIONS:  # the form writes into these, so each must be an object if given
            section: Any = doc
            for key in path.split("."):
                section = section.get(key) if isinstance(section, dict) else None
            if section is not None and not isinstance(section, dict):
                self.add_error("manifest", f"{path}: expected an object, got {type_name(section)}")
                return None
        data = self.cleaned_data
        self._write(doc)
        metadata = doc.setdefault("metadata", {})
        if self._changed("approval_mode"):
            metadata.setdefault("annotations", {})[APPROVAL_MODE] = data["approval_mode"]
        if self._changed("approval_threshold"):
            annotations = metadata.setdefault("annotations", {})
            if data["approval_threshold"] is not None:
                annotations[APPROVAL_THRESHOLD] = f"{data['approval_threshold']:.4f}"
            else:
                annotations.pop(APPROVAL_THRESHOLD, None)
        annotations = metadata.get("annotations") or {}
        if annotations.get(APPROVAL_MODE) == "auto-below" and annotations.get(APPROVAL_THRESHOLD) is None:
            self.add_error("approval_threshold", "auto-below needs a threshold")
        return doc

    def _form_path(self, path: str) -> str:
        """An error's path with a list index turned back into the form row it came from (blank rows are left out
        of the list, so item 1 may be row 2)."""
        for rows, kept in self.kept.items():
            match = re.match(re.escape(rows) + r"\[(\d+)\]", path)
            if match and int(match.group(1)) < len(kept):
                return f"{rows}[{kept[int(match.group(1))]}]{path[match.end() :]}"
        return path

    def attach(self, error: ManifestError) -> None:
        """Show a validation error at its form field when there is one (the field it names, the nearest field
        holding it, or the first field inside it), else on the YAML with its path."""
        for name, path in FIELD_PATHS.items():
            if error.field == path or error.field.startswith(path + "."):
                if error.message not in self.errors.get(name, []):
                    self.add_error(name, error.message)
                return
        path = self._form_path(error.field or "")
        names = [n for n in self.fields if n not in ("manifest", "resource_version", *FIELD_PATHS)]
        holding = [n for n in names if path == n or path.startswith((n + ".", n + "["))]
        inside = [n for n in names if n.startswith((path + ".", path + "["))] if path else []
        target = max(holding, key=len) if holding else (inside[0] if inside else None)
        if target is None:
            self.add_error("manifest", f"{error.field}: {error.message}" if error.field else error.message)
        elif target in self.errors:
            return  # the input's own error says it (a value it could not take leaves the field out of the YAML)
        else:
            self.add_error(
                target,
                error.message
                if target == path
                else f"{path[len(target) :].lstrip('.')}: {error.message}".removeprefix(": "),
            )

    def layout(self) -> dict[str, Any]:
        """The spec's fields as the template draws them: groups (fieldsets), inputs, and tables of rows."""

        def draw(node: schemaform.Leaf | schemaform.Rows | schemaform.Group) -> dict[str, Any]:
            if isinstance(node, schemaform.Group):
                return {
                    "type": "group",
                    "label": node.label,
                    "help": node.help,
                    "path": node.path,
                    "children": [draw(child) for child in node.children],
                }
            if isinstance(node, schemaform.Rows):
                return {
                    "type": "rows",
                    "label": node.label,
                    "help": node.help,
                    "path": node.path,
                    "columns": [c.label for c in node.columns],
                    "rows": [
                        [self[f"{node.path}[{i}].{c.path}"] for c in node.columns] for i in range(self.rows[node.path])
                    ],
                }
            return {"type": "leaf", "field": self[node.path]}

        return draw(self.tree)


_MISSING = object()


def _steps(obj: Any, path: str) -> list[str | int] | None:
    """The keys and indexes of an error's field path, such as `spec.template.spec.requirements[2].operator` or
    `metadata.annotations.karpui.dev/approval-mode`, read against `obj` (keys may hold dots: the longest key `obj`
    has that fits wins; a last key it lacks is taken whole). None when the path cannot be followed in `obj`."""
    steps: list[str | int] = []
    while path:
        if isinstance(obj, list) and path.startswith("["):
            index, _, path = path[1:].partition("]")
            path = path.removeprefix(".")
            if not index.isdigit() or int(index) >= len(obj):
                return None
            steps.append(int(index))
            obj = obj[int(index)]
        elif isinstance(obj, dict):
            fitting = [k for k in obj if isinstance(k, str) and (path == k or path.startswith((k + ".", k + "[")))]
            if not fitting:
                return [*steps, path] if "[" not in path else None
            key = max(fitting, key=len)
            steps.append(key)
            obj, path = obj[key], path[len(key) :].removeprefix(".")
        else:
            return None
    return steps


def _value(obj: Any, steps: list[str | int]) -> Any:
    for step in steps:
        in_dict = isinstance(obj, dict) and isinstance(step, str) and step in obj
        if in_dict or (isinstance(obj, list) and isinstance(step, int) and step < len(obj)):
            obj = obj[step]
        else:
            return _MISSING
    return obj


def _set_back(doc: dict[str, Any], current: dict[str, Any], field: str) -> bool:
    """Put the field an error names back as the current version has it (or drop it if that has none), so that
    checking again finds the next error; False when that changes nothing."""
    steps = _steps(doc, field)
    if not steps:
        return False
    parent, last = _value(doc, steps[:-1]), steps[-1]
    was = _value(current, steps)
    if _value(doc, steps) is _MISSING and was is _MISSING:
        return False  # a required field neither version has: nothing to put back
    if was is not _MISSING:
        if _value(doc, steps) == was:
            return False
        parent[last] = copy.deepcopy(was)
    else:
        del parent[last]
    return True


def _set_back_nearest(doc: dict[str, Any], current: dict[str, Any], field: str) -> bool:
    """`_set_back` on the field, else on what holds it (a taint's missing effect: the taint), up to spec's own
    fields, so one error never hides those after it."""
    path = field
    while path.count(".") > 1 or "[" in path:
        if _set_back(doc, current, path):
            return True
        path = re.sub(r"(\.[^.\[\]]+|\[\d+\])$", "", path)
    return _set_back(doc, current, path)


def check_all(
    cluster: models.Cluster, row: models.NodePool | None, doc: dict[str, Any], current: dict[str, Any]
) -> tuple[NodePool | None, list[ManifestError]]:
    """The proposed NodePool, or every error in it: parsing stops at the first error, so each erroneous field is
    put back as it is now and the rest checked again, until none is left (at most MAX_ERRORS)."""
    errors: list[ManifestError] = []
    doc = copy.deepcopy(doc)
    for _ in range(MAX_ERRORS):
        try:
            name = (doc.get("metadata") or {}).get("name")
            if row is not None and name != row.name:
                raise ManifestError(f"cannot rename {row.name!r}; create a new NodePool instead", field="metadata.name")
            proposed = parse_nodepool(doc)
            configs.nodepool_check(cluster=cluster, nodepool=proposed)
            if row is None and models.NodePool.objects.filter(cluster=cluster, name=proposed.name).exists():
                raise ManifestError(
                    f"NodePool {proposed.name!r} already exists; edit it instead", field="metadata.name"
                )
        except ManifestError as error:
            errors.append(error)
            if not error.field or error.field == "metadata.name" or not _set_back_nearest(doc, current, error.field):
                break
        else:
            return (proposed if not errors else None), errors
    return None, errors


@require_GET
def nodepool_list(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    rows = models.NodePool.objects.filter(cluster=cluster)
    return render(
        request,
        "karpui/nodepools/list.html",
        {
            "cluster": cluster,
            "nodepools": rows,
            "can_edit": request.user.has_perm("karpui.change_nodepool"),
            "can_add": request.user.has_perm("karpui.add_nodepool"),
        },
    )


@require_http_methods(["GET", "POST"])
def nodepool_edit(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _cluster(request)
    row = get_object_or_404(models.NodePool, cluster=cluster, name=name)
    current = store.nodepool_manifest(row)
    current.pop("status", None)
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"):
        current["metadata"].pop(key, None)  # the server's; managedFields stay as they are, as kubectl edit hides them
    return _editor(request, cluster, row, current)


@require_http_methods(["GET", "POST"])
def nodepool_new(request: HttpRequest) -> HttpResponse:
    """The same editor for a NodePool that does not exist yet, starting from a small, valid one."""
    cluster = _cluster(request)
    nodeclass = models.NodeClass.objects.filter(cluster=cluster).order_by("kind", "name").first()
    ref = (
        {"group": nodeclass.api_version.split("/")[0], "kind": nodeclass.kind, "name": nodeclass.name}
        if nodeclass
        else {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    )
    starter = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "new-pool"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": ref,
                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
        },
    }
    return _editor(request, cluster, None, starter)


def _editor(
    request: HttpRequest, cluster: models.Cluster, row: models.NodePool | None, current: dict[str, Any]
) -> HttpResponse:
    """Form + YAML; Preview shows the diff and the what-if, Save applies (audited). Nothing is written otherwise.
    Every error is shown at once, each at its field."""
    context: dict[str, Any] = {
        "cluster": cluster,
        "nodepool": row,
        "summary": summaries.nodepool_summary(cluster, row) if row is not None else None,
        # Who changed it, when and how: for everyone who may read the NodePool, not only the admin's staff.
        "history": selectors.nodepool_history(cluster, row.name) if row else [],
    }
    if request.method == "GET":
        if row is not None:
            domain = store.nodepool_domain(row)
            context["overlays"] = overlays.nodepool_overlays(cluster, domain, _pools(cluster))
            context["unreadable_budgets"] = whatif.unreadable_budgets(domain)
        opened_at = {"resource_version": row.resource_version if row else None}
        context["form"] = NodePoolForm(initial={**NodePoolForm.initial_for(current), **opened_at}, manifest=current)
        return render(request, "karpui/nodepools/edit.html", context)
    if row:
        permissions.require(request.user, "karpui.change_nodepool", "edit NodePools")
    else:
        permissions.require(request.user, "karpui.add_nodepool", "create NodePools")
    form = NodePoolForm(request.POST, initial=NodePoolForm.initial_for(current), manifest=current)
    context["form"] = form
    form.is_valid()
    doc = form.proposed()
    proposed, errors = check_all(cluster, row, doc, current) if doc is not None else (None, [])
    for error in errors:
        form.attach(error)
    # A form without the version it was opened at (a script's POST) writes unconditionally, as a Kubernetes update
    # without metadata.resourceVersion does.
    opened_at = form.cleaned_data.get("resource_version") if row else None
    if opened_at is not None and row is not None and opened_at != row.resource_version:
        context["conflict"] = (
            f"NodePool {row.name} was changed by someone else since you opened it (resourceVersion {opened_at}, now "
            f"{row.resource_version}): saving would undo their change. Reload the page to edit the current version."
        )
    if proposed is not None and not form.errors:
        if request.POST.get("action") != "save":  # a save goes straight back to the page: no preview to show
            canonical = nodepool_to_manifest(proposed)
            context["diff"] = whatif.nodepool_diff(row, canonical)
            context["whatif"] = whatif.preview(cluster, proposed)
            pools = [pool for pool in _pools(cluster) if pool.name != proposed.name]
            context["overlays"] = overlays.nodepool_overlays(cluster, proposed, [*pools, proposed])
        else:
            actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
            try:
                result = configs.nodepool_apply(
                    cluster=cluster, nodepool=proposed, actor=actor, resource_version=opened_at
                )
            except configs.Conflict as conflict:
                context["conflict"] = str(conflict)
                return render(request, "karpui/nodepools/edit.html", context, status=409)
            except configs.ApprovalModeDecision as refused:
                context["conflict"] = str(refused)
                return render(request, "karpui/nodepools/edit.html", context, status=403)
            messages.success(request, str(result))
            return cluster_redirect(request, "nodepool-edit", proposed.name)
    return render(request, "karpui/nodepools/edit.html", context, status=400 if form.errors else 200)


def _pools(cluster: models.Cluster) -> list[NodePool]:
    """The cluster's NodePools that parse (overlays reach NodePools by name and template labels)."""
    pools = []
    for row in models.NodePool.objects.filter(cluster=cluster):
        with suppress(ManifestError):
            pools.append(store.nodepool_domain(row))
    return pools


@require_POST
def nodepool_scale(request: HttpRequest, name: str) -> HttpResponse:
    """`kubectl scale nodepool NAME --replicas N` from the page of a static NodePool: the same write (validated,
    audited); a scale-down then goes through the NodePool's approval mode on the Disruption page."""
    permissions.require(request.user, "karpui.change_nodepool", "scale NodePools")
    cluster = _cluster(request)
    get_object_or_404(models.NodePool, cluster=cluster, name=name)
    text = request.POST.get("replicas", "").strip()
    if not text.isdigit() or len(text) > 18:
        messages.error(request, f"replicas: a whole number of nodes, 0 or more, got {text!r}")
        return cluster_redirect(request, "nodepool-edit", name)
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        objects.workload_scale(
            cluster=cluster, kind="NodePool", name=name, namespace="", replicas=int(text), actor=actor
        )
    except ManifestError as error:
        messages.error(request, f"{error.field}: {error.message}" if error.field else error.message)
        return cluster_redirect(request, "nodepool-edit", name)
    messages.success(request, f"nodepool.karpenter.sh/{name} scaled to {int(text)} replicas")
    return cluster_redirect(request, "nodepool-edit", name)


@require_POST
def nodepool_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Delete a NodePool once its name is typed back; its NodeClaims are then drained and removed."""
    permissions.require(request.user, "karpui.delete_nodepool", "delete NodePools")
    cluster = _cluster(request)
    row = get_object_or_404(models.NodePool, cluster=cluster, name=name)
    if request.POST.get("confirm", "").strip() != name:
        messages.error(request, f"confirm: type the NodePool's name, {name}, to delete it")
        return cluster_redirect(request, "nodepool-edit", name)
    nodes = (row.status or {}).get("nodes", 0)
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    result = configs.config_delete(cluster=cluster, kind="NodePool", name=name, actor=actor)
    messages.success(request, f"{result}; its {nodes} node(s) will be drained and removed")
    return cluster_redirect(request, "nodepools")

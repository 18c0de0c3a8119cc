"""NodePool pages: the list, and the editor (form + YAML, errors at the field, diff, what-if, audited save)."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from karpui import models, permissions, services, store, whatif
from karpui.links import cluster_redirect
from karpui.views import _cluster
from provisioner.labels import APPROVAL_MODE, APPROVAL_THRESHOLD
from provisioner.manifests import ManifestError
from provisioner.manifests.documents import load_document
from provisioner.manifests.fields import type_name
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool
from provisioner.objects import NodePool

# form field -> the manifest path an error names when it is that field's fault
FIELD_PATHS = {
    "weight": "spec.weight",
    "consolidation_policy": "spec.disruption.consolidationPolicy",
    "consolidate_after": "spec.disruption.consolidateAfter",
    "cpu_limit": "spec.limits.cpu",
    "approval_mode": f"metadata.annotations.{APPROVAL_MODE}",
    "approval_threshold": f"metadata.annotations.{APPROVAL_THRESHOLD}",
}


_FORM_SECTIONS = ("spec", "spec.disruption", "spec.limits", "metadata", "metadata.annotations")
# How many errors one preview or save collects before it stops looking for more.
MAX_ERRORS = 20


class NodePoolForm(forms.Form):
    """The common fields over the YAML. Built with the current manifest's values as `initial`, so a field the
    person did not touch leaves the YAML as written: only the fields they changed are written into it."""

    weight = forms.IntegerField(required=False, help_text="1-100; higher NodePools are tried first")
    consolidation_policy = forms.ChoiceField(
        choices=[("WhenEmptyOrUnderutilized", "WhenEmptyOrUnderutilized"), ("WhenEmpty", "WhenEmpty")]
    )
    consolidate_after = forms.CharField(help_text='e.g. 30s, 5m, or "Never"')
    cpu_limit = forms.CharField(required=False, label="CPU limit", help_text="a quantity, e.g. 1000; empty: no limit")
    approval_mode = forms.ChoiceField(choices=[(m, m) for m in ("auto", "manual", "auto-below", "dry-run")])
    approval_threshold = forms.DecimalField(
        required=False, min_value=0, help_text="$/h; auto-below approves savings up to this"
    )
    manifest = forms.CharField(widget=forms.Textarea(attrs={"rows": 28, "spellcheck": "false"}), label="YAML")
    # The version the editor was opened at: a save over a NodePool changed since is refused, not a lost update.
    resource_version = forms.IntegerField(required=False, widget=forms.HiddenInput)

    @staticmethod
    def initial_for(manifest: dict[str, Any]) -> dict[str, Any]:
        spec = manifest["spec"]
        annotations = manifest["metadata"].get("annotations") or {}
        return {
            "weight": spec.get("weight"),
            "consolidation_policy": spec["disruption"]["consolidationPolicy"],
            "consolidate_after": spec["disruption"]["consolidateAfter"],
            "cpu_limit": (spec.get("limits") or {}).get("cpu", ""),
            "approval_mode": annotations.get(APPROVAL_MODE, "auto"),
            "approval_threshold": annotations.get(APPROVAL_THRESHOLD),
            "manifest": yaml.safe_dump(manifest, sort_keys=False),
        }

    @classmethod
    def for_manifest(cls, manifest: dict[str, Any]) -> NodePoolForm:
        return cls(initial=cls.initial_for(manifest))

    def _changed(self, name: str) -> bool:
        """The person changed this field, and it is valid (an invalid one already has its error)."""
        return name in self.changed_data and name in self.cleaned_data

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
        spec = doc.setdefault("spec", {})
        if self._changed("weight"):
            if data["weight"] is not None:
                spec["weight"] = data["weight"]
            else:
                spec.pop("weight", None)
        for name, key in (("consolidation_policy", "consolidationPolicy"), ("consolidate_after", "consolidateAfter")):
            if self._changed(name):
                spec.setdefault("disruption", {})[key] = data[name]
        if self._changed("cpu_limit"):
            limits = spec.setdefault("limits", {})
            if data["cpu_limit"]:
                limits["cpu"] = data["cpu_limit"]
            else:
                limits.pop("cpu", None)
            if not limits:
                spec.pop("limits")
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

    def attach(self, error: ManifestError) -> None:
        """Show a validation error at its form field when there is one, else on the YAML with its path."""
        for name, path in FIELD_PATHS.items():
            if error.field == path or error.field.startswith(path + "."):
                if error.message not in self.errors.get(name, []):
                    self.add_error(name, error.message)
                return
        self.add_error("manifest", f"{error.field}: {error.message}" if error.field else error.message)


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
            services.nodepool_check(cluster=cluster, nodepool=proposed)
            if row is None and models.NodePool.objects.filter(cluster=cluster, name=proposed.name).exists():
                raise ManifestError(
                    f"NodePool {proposed.name!r} already exists; edit it instead", field="metadata.name"
                )
        except ManifestError as error:
            errors.append(error)
            if not error.field or error.field == "metadata.name" or not _set_back(doc, current, error.field):
                break
        else:
            return (proposed if not errors else None), errors
    return None, errors


@require_GET
def nodepool_list(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    rows = models.NodePool.objects.filter(cluster=cluster).order_by("-weight", "-name")
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
    context: dict[str, Any] = {"cluster": cluster, "nodepool": row}
    if request.method == "GET":
        opened_at = {"resource_version": row.resource_version if row else None}
        context["form"] = NodePoolForm(initial={**NodePoolForm.initial_for(current), **opened_at})
        return render(request, "karpui/nodepools/edit.html", context)
    if row:
        permissions.require(request.user, "karpui.change_nodepool", "edit NodePools")
    else:
        permissions.require(request.user, "karpui.add_nodepool", "create NodePools")
    form = NodePoolForm(request.POST, initial=NodePoolForm.initial_for(current))
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
        canonical = nodepool_to_manifest(proposed)
        context["diff"] = whatif.nodepool_diff(row, canonical)
        context["whatif"] = whatif.preview(cluster, proposed)
        if request.POST.get("action") == "save":
            actor = services.Actor.for_user(request.user, "web")  # type: ignore[arg-type]
            try:
                result = services.nodepool_apply(
                    cluster=cluster, nodepool=proposed, actor=actor, resource_version=opened_at
                )
            except services.Conflict as conflict:
                context["conflict"] = str(conflict)
                return render(request, "karpui/nodepools/edit.html", context, status=409)
            messages.success(request, str(result))
            return cluster_redirect(request, "nodepool-edit", proposed.name)
    return render(request, "karpui/nodepools/edit.html", context, status=400 if form.errors else 200)


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
    actor = services.Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    result = services.object_delete(cluster=cluster, kind="NodePool", name=name, actor=actor)
    messages.success(request, f"{result}; its {nodes} node(s) will be drained and removed")
    return cluster_redirect(request, "nodepools")

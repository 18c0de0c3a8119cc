"""Django admin: NodePools and node classes edited as YAML through the same services as `karp apply`."""

from __future__ import annotations

from typing import Any

import yaml
from django import forms
from django.contrib import admin
from django.db.models import Min, QuerySet
from django.http import HttpRequest

from karpui import models
from karpui.clusters import registry, store
from karpui.people.audit import Actor
from karpui.writes import configs, setup
from provisioner.manifests import ManifestError, load_documents


class ManifestForm(forms.ModelForm):
    """A form with one YAML field; `clean` validates it into a domain value with the field-named error."""

    manifest = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 30, "cols": 100, "spellcheck": "false", "class": "vLargeTextField"}),
        help_text="The object as YAML, exactly as `karp apply -f` takes it.",
    )
    kinds: tuple[str, ...] = ()

    class Meta:
        fields = ("cluster",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["manifest"].initial = yaml.safe_dump(self.manifest_of(self.instance), sort_keys=False)
        elif "cluster" in self.fields:
            self.fields["cluster"].initial = models.Cluster.objects.filter(name=registry.DEFAULT_CLUSTER).first()

    def manifest_of(self, instance: Any) -> dict[str, Any]:
        raise NotImplementedError

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        text = cleaned.get("manifest")
        if not text:
            return cleaned
        try:
            documents = load_documents(text)
            if len(documents) != 1 or documents[0].kind not in self.kinds:
                raise ManifestError(f"expected exactly one object of kind {' or '.join(self.kinds)}", field="kind")
            value = configs.parse_document(documents[0])
            if documents[0].kind == "NodePool" and cleaned.get("cluster") is not None:
                configs.nodepool_check(cluster=cleaned["cluster"], nodepool=value)
        except ManifestError as error:
            raise forms.ValidationError({"manifest": str(error)}) from None
        if self.instance.pk and value.name != self.instance.name:
            raise forms.ValidationError(
                {"manifest": f"metadata.name: cannot rename {self.instance.name!r}; create a new object"}
            )
        if isinstance(self.instance, models.NodePool) and self.instance.pk:
            refusal = configs.approval_mode_refusal(
                name=value.name,
                before=dict(self.instance.annotations or {}),
                after=dict(value.annotations),
                actor=getattr(self, "actor", Actor(name="admin", via="admin")),
            )
            if refusal is not None:
                raise forms.ValidationError({"manifest": refusal})
        cleaned["value"] = value
        return cleaned


class NodePoolForm(ManifestForm):
    kinds = ("NodePool",)

    class Meta(ManifestForm.Meta):
        model = models.NodePool

    def manifest_of(self, instance: Any) -> dict[str, Any]:
        manifest = store.nodepool_manifest(instance)
        manifest.pop("status")
        manifest["metadata"].pop("managedFields", None)  # kept apart, as kubectl edit hides them
        return manifest


class NodeClassForm(ManifestForm):
    kinds = ("KWOKNodeClass", "EC2NodeClass")

    class Meta(ManifestForm.Meta):
        model = models.NodeClass

    def manifest_of(self, instance: Any) -> dict[str, Any]:
        manifest = store.nodeclass_manifest(instance)
        manifest.pop("status")
        manifest["metadata"].pop("managedFields", None)
        return manifest


class DeviceDeclarationForm(ManifestForm):
    kinds = ("DeviceDeclaration",)

    class Meta:
        model = models.DeviceDeclaration
        fields = ()

    def manifest_of(self, instance: Any) -> dict[str, Any]:
        return {
            "apiVersion": "karpui.dev/v1alpha1",
            "kind": "DeviceDeclaration",
            "metadata": {"name": instance.name},
            "spec": instance.spec,
        }


class ManifestAdmin(admin.ModelAdmin):
    """Saves go through services (validation, audit row); the row the service wrote becomes the admin's object."""

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        form.actor = Actor.for_user(request.user, "admin")  # type: ignore[arg-type]  # who the form checks for
        return form

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        actor = Actor.for_user(request.user, "admin")  # type: ignore[arg-type]
        value = form.cleaned_data["value"]
        if isinstance(obj, models.DeviceDeclaration):
            configs.device_declaration_apply(declaration=value, actor=actor)
            obj.pk = models.DeviceDeclaration.objects.get(name=value.name).pk
            obj.name = value.name
            return
        cluster = form.cleaned_data["cluster"]
        if isinstance(obj, models.NodePool):
            configs.nodepool_apply(cluster=cluster, nodepool=value, actor=actor)
            saved: Any = models.NodePool.objects.get(cluster=cluster, name=value.name)
        else:
            configs.nodeclass_apply(cluster=cluster, nodeclass=value, actor=actor)
            saved = models.NodeClass.objects.get(cluster=cluster, kind=value.kind, name=value.name)
        obj.pk, obj.name = saved.pk, saved.name

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        actor = Actor.for_user(request.user, "admin")  # type: ignore[arg-type]
        kind = "NodePool" if isinstance(obj, models.NodePool) else obj.kind
        configs.config_delete(cluster=obj.cluster, kind=kind, name=obj.name, actor=actor)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(models.NodePool)
class NodePoolAdmin(ManifestAdmin):
    form = NodePoolForm
    list_display = ("name", "cluster", "weight", "node_class", "consolidation", "updated_at")
    list_filter = ("cluster",)
    search_fields = ("name",)

    @admin.display(description="node class")
    def node_class(self, obj: models.NodePool) -> str:
        ref = obj.spec.get("template", {}).get("spec", {}).get("nodeClassRef", {})
        return f"{ref.get('kind')}/{ref.get('name')}"

    @admin.display(description="consolidation")
    def consolidation(self, obj: models.NodePool) -> str:
        disruption = obj.spec.get("disruption", {})
        return f"{disruption.get('consolidationPolicy')} after {disruption.get('consolidateAfter')}"


@admin.register(models.DeviceDeclaration)
class DeviceDeclarationAdmin(ManifestAdmin):
    form = DeviceDeclarationForm
    list_display = ("name", "driver", "updated_at")

    @admin.display(description="driver")
    def driver(self, obj: models.DeviceDeclaration) -> str:
        return str(obj.spec.get("driver", ""))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        actor = Actor.for_user(request.user, "admin")  # type: ignore[arg-type]
        configs.config_delete(
            cluster=registry.cluster_get_or_create(), kind="DeviceDeclaration", name=obj.name, actor=actor
        )


@admin.register(models.NodeClass)
class NodeClassAdmin(ManifestAdmin):
    form = NodeClassForm
    list_display = ("name", "kind", "cluster", "updated_at")
    list_filter = ("kind", "cluster")


class OfferingInline(admin.TabularInline):
    model = models.Offering
    fields = ("zone", "capacity_type", "price", "available")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows changed only through services (catalog import, audited actions)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(models.InstanceType)
class InstanceTypeAdmin(ReadOnlyAdmin):
    list_display = ("name", "catalog", "family", "cpu", "memory", "pods", "arch", "os", "cheapest_price")
    list_filter = ("catalog", "family", "arch", "os")
    search_fields = ("name",)
    inlines = (OfferingInline,)
    list_per_page = 200

    def get_queryset(self, request: HttpRequest) -> QuerySet[models.InstanceType]:
        return super().get_queryset(request).select_related("catalog").annotate(min_price=Min("offerings__price"))

    @admin.display(ordering="cpu_millis")
    def cpu(self, obj: models.InstanceType) -> str:
        return str(obj.capacity.get("cpu"))

    @admin.display(ordering="memory_bytes")
    def memory(self, obj: models.InstanceType) -> str:
        return str(obj.capacity.get("memory"))

    @admin.display(description="cheapest $/h", ordering="min_price")
    def cheapest_price(self, obj: Any) -> str:
        return f"{obj.min_price:.6f}" if obj.min_price is not None else "—"


@admin.register(models.Catalog)
class CatalogAdmin(ReadOnlyAdmin):
    list_display = ("name", "description", "updated_at")


@admin.register(models.AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "cluster_name", "actor_name", "via", "action", "target_kind", "target_name")
    list_filter = ("cluster_name", "action", "target_kind", "via")
    search_fields = ("target_name", "actor_name")


class ClusterForm(forms.ModelForm):
    class Meta:
        model = models.Cluster
        fields = ("name", "mode", "kubeconfig", "kube_context")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("mode") == models.Cluster.Mode.LAB and (
            cleaned.get("kubeconfig") or cleaned.get("kube_context")
        ):
            self.add_error("kubeconfig", "a lab cluster is karpui's own: only kwok and observe clusters are reached")
        return cleaned


@admin.register(models.Cluster)
class ClusterAdmin(admin.ModelAdmin):
    """Clusters are made here, audited like `karp cluster create`, and never edited here: the clock, lease and lab
    state belong to the controllers, and a pause goes through the Disruption page or `karp pause`, which audit it."""

    form = ClusterForm
    list_display = ("name", "mode", "clock", "ticked_at", "paused_until", "created_at")
    shown = (
        "name",
        "mode",
        "kubeconfig",
        "kube_context",
        "clock",
        "ticked_at",
        "paused_until",
        "paused_by",
        "pause_reason",
        "created_at",
    )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ClusterForm.Meta.fields if obj is None else self.shown

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return () if obj is None else self.shown

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a cluster's lab, NodePools and history would go with it

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        actor = Actor.for_user(request.user, "admin")  # type: ignore[arg-type]
        obj.pk = setup.cluster_create(
            name=obj.name, mode=obj.mode, kubeconfig=obj.kubeconfig, context=obj.kube_context, actor=actor
        ).pk

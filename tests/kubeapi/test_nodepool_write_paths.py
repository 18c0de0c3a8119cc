"""Issue 27, point 2: no path that writes a NodePool drops its approval mode or another writer's fields.

The first `kubectl apply --server-side` of a NodePool made by client-side apply (kubectl's or `karp apply`) took
every field of the object as the client-side applier's (karpui kept no managedFields, so all of them were
"before-first-apply"'s, which owns the last-applied annotation, which kubectl migrates to itself), and its re-apply
removed `karpui.dev/approval-mode: manual` and every label and annotation others had set. kube-apiserver tracks
managedFields from an object's creation, so the client-side applier owns only what it wrote; karpui now does too,
on every write path. Each test here makes a NodePool by one path, has others set the approval mode (the Disruption
page), a label (kubectl label) and an annotation (karp annotate), writes it by one path with a file or change that
does not mention them, and checks that all three are still there (kubectl 1.32 against the lab's API)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from karpui import models
from tests.karp import EXAMPLES, ok

NODEPOOL = (EXAMPLES / "provisioning" / "nodepool.yaml").read_text()
# The same NodePool with one change, which the writer under test makes.
WEIGHTED = NODEPOOL + "  weight: 10\n"


def web() -> Client:
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    return client


def others_write(kubectl: Any) -> None:
    """The approval mode from the Disruption page, a label from kubectl, an annotation from karp."""
    response = web().post("/nodepools/default/approval-mode", {"mode": "manual"})
    assert response.status_code == 302, response.content
    kubectl.ok("label", "nodepool", "default", "team=web")
    ok("annotate", "nodepool", "default", "owner=ops")


def survived(weight: int | None = 10) -> None:
    row = models.NodePool.objects.get(name="default")
    assert (
        row.annotations.get("karpui.dev/approval-mode"),
        row.annotations.get("owner"),
        row.labels.get("team"),
    ) == ("manual", "ops", "web")
    if weight is not None:
        assert row.spec.get("weight") == weight


def create_by_kubectl(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "nodepool.yaml")


def create_by_karp(kubectl: Any) -> None:
    ok("apply", "-f", str(kubectl.cwd / "nodepool.yaml"))


CREATORS = {"kubectl apply": create_by_kubectl, "karp apply": create_by_karp}


def editor_save(kubectl: Any) -> None:
    client = web()
    form = client.get("/nodepools/default/").context["form"]
    data = {field: ("" if value is None else value) for field, value in form.initial.items()}
    manifest = yaml.safe_load(data["manifest"])
    manifest["spec"]["weight"] = 10
    response = client.post("/nodepools/default/", {**data, "manifest": yaml.safe_dump(manifest), "action": "save"})
    assert response.status_code == 302, response.content


def admin_save(kubectl: Any) -> None:
    client = web()
    row = models.NodePool.objects.get(name="default")
    page = client.get(f"/admin/karpui/nodepool/{row.id}/change/")
    manifest = yaml.safe_load(page.context["adminform"].form["manifest"].value())
    manifest["spec"]["weight"] = 10
    response = client.post(
        f"/admin/karpui/nodepool/{row.id}/change/", {"cluster": row.cluster_id, "manifest": yaml.safe_dump(manifest)}
    )
    assert response.status_code == 302, response.content


def replace(kubectl: Any) -> None:
    live = yaml.safe_load(kubectl.ok("get", "nodepool", "default", "-o", "yaml"))
    live["spec"]["weight"] = 10
    kubectl.ok("replace", "-f", "-", stdin=yaml.safe_dump(live))


def server_side(*flags: str) -> Callable[[Any], None]:
    def write(kubectl: Any) -> None:
        (kubectl.cwd / "weighted.yaml").write_text(WEIGHTED)
        kubectl.ok("apply", "--server-side", *flags, "-f", "weighted.yaml")

    return write


def server_side_twice(kubectl: Any) -> None:
    (kubectl.cwd / "weighted.yaml").write_text(WEIGHTED.replace("weight: 10", "weight: 3"))
    kubectl.ok("apply", "--server-side", "-f", "weighted.yaml")
    (kubectl.cwd / "weighted.yaml").write_text(WEIGHTED)
    kubectl.ok("apply", "--server-side", "-f", "weighted.yaml")


def client_side(kubectl: Any) -> None:
    (kubectl.cwd / "weighted.yaml").write_text(WEIGHTED)
    kubectl.ok("apply", "-f", "weighted.yaml")


def karp_apply(kubectl: Any) -> None:
    (kubectl.cwd / "weighted.yaml").write_text(WEIGHTED)
    ok("apply", "-f", str(kubectl.cwd / "weighted.yaml"))


WRITERS: dict[str, tuple[Callable[[Any], None], int | None]] = {
    "client-side apply": (client_side, 10),
    "server-side apply, the first": (server_side(), 10),
    "server-side apply, the first, forced": (server_side("--force-conflicts"), 10),
    "server-side apply, a later one": (server_side_twice, 10),
    "karp apply": (karp_apply, 10),
    "the editor": (editor_save, 10),
    "the admin": (admin_save, 10),
    "kubectl label": (lambda k: k.ok("label", "nodepool", "default", "tier=gold"), None),
    "kubectl annotate": (lambda k: k.ok("annotate", "nodepool", "default", "note=x"), None),
    "kubectl patch": (
        lambda k: k.ok("patch", "nodepool", "default", "--type=merge", "-p", '{"spec":{"weight":10}}'),
        10,
    ),
    "karp label": (lambda k: ok("label", "nodepool", "default", "tier=gold"), None),
    "PUT (kubectl replace)": (replace, 10),
}


@pytest.mark.parametrize("creator", sorted(CREATORS))
@pytest.mark.parametrize("writer", list(WRITERS))
def test_the_approval_mode_and_others_fields_survive_every_write_path(
    kubectl: Any, tmp_path: Path, creator: str, writer: str
) -> None:
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    (tmp_path / "nodepool.yaml").write_text(NODEPOOL)
    CREATORS[creator](kubectl)
    others_write(kubectl)
    write, weight = WRITERS[writer]
    write(kubectl)
    survived(weight)
    # And a server-side apply after it (the first, where the writer was not one) keeps them too.
    (tmp_path / "weighted.yaml").write_text(WEIGHTED)
    kubectl.ok("apply", "--server-side", "-f", "weighted.yaml")
    survived()


def managers(kubectl: Any) -> dict[str, list[str]]:
    """Each manager's operation and the fields it owns, dotted."""
    from provisioner.apimachinery.fieldmanager import decode, dotted

    obj = json.loads(kubectl.ok("get", "nodepool", "default", "-o", "json", "--show-managed-fields"))
    return {
        f"{e['manager']} {e['operation']}": sorted(dotted(p) for p in decode(e["fieldsV1"]))
        for e in obj["metadata"]["managedFields"]
    }


def test_managed_fields_after_a_client_side_apply_and_others_writes_then_the_first_server_side_apply(
    kubectl: Any, tmp_path: Path
) -> None:
    """As kube-apiserver and kubectl leave them: the client-side applier's fields (and only its) migrated to the
    `kubectl` Apply entry, the last-applied annotation kubectl's own `kubectl-last-applied` and updated to the
    applied file, each other writer still owning what it wrote."""
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    (tmp_path / "nodepool.yaml").write_text(NODEPOOL)
    kubectl.ok("apply", "-f", "nodepool.yaml")
    before = managers(kubectl)
    assert list(before) == ["kubectl-client-side-apply Update"]
    assert (
        ".metadata.annotations.kubectl.kubernetes.io/last-applied-configuration"
        in before["kubectl-client-side-apply Update"]
    )
    others_write(kubectl)
    assert managers(kubectl)["karpui-dashboard Update"] == [".metadata.annotations.karpui.dev/approval-mode"]
    assert managers(kubectl)["kubectl-label Update"] == [".metadata.labels.team"]
    assert managers(kubectl)["karp-annotate Update"] == [".metadata.annotations.owner"]
    (tmp_path / "weighted.yaml").write_text(WEIGHTED)
    kubectl.ok("apply", "--server-side", "-f", "weighted.yaml")
    after = managers(kubectl)
    assert sorted(after) == [
        "karp-annotate Update",
        "karpui-dashboard Update",
        "kubectl Apply",
        "kubectl-label Update",
        "kubectl-last-applied Apply",
    ]
    assert after["kubectl-last-applied Apply"] == [
        ".metadata.annotations.kubectl.kubernetes.io/last-applied-configuration"
    ]
    assert ".spec.weight" in after["kubectl Apply"]
    assert not any("approval-mode" in f or "team" in f or "owner" in f for f in after["kubectl Apply"])
    annotations = json.loads(kubectl.ok("get", "nodepool", "default", "-o", "jsonpath={.metadata.annotations}"))
    assert json.loads(annotations["kubectl.kubernetes.io/last-applied-configuration"])["spec"]["weight"] == 10


def test_a_field_the_client_side_file_dropped_goes_with_the_server_side_apply_but_no_one_elses(
    kubectl: Any, tmp_path: Path
) -> None:
    """The migration hands kubectl what the client-side file set, so a field the server-side file no longer has is
    removed, as kube-apiserver removes it; others' fields stay."""
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    (tmp_path / "nodepool.yaml").write_text(WEIGHTED)
    kubectl.ok("apply", "-f", "nodepool.yaml")
    others_write(kubectl)
    (tmp_path / "plain.yaml").write_text(NODEPOOL)
    kubectl.ok("apply", "--server-side", "-f", "plain.yaml")
    survived(weight=None)
    assert "weight" not in models.NodePool.objects.get(name="default").spec


def test_a_nodepool_stored_before_managed_fields_were_kept_gets_them_as_if_tracked_so_others_fields_survive(
    kubectl: Any, tmp_path: Path
) -> None:
    """Rows written before this release have no managedFields: the migration gives them what kube-apiserver would
    have kept (the last client-side apply's fields its applier's, the rest before-first-apply's)."""
    import importlib

    from django.apps import apps

    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    (tmp_path / "nodepool.yaml").write_text(NODEPOOL)
    create_by_karp(kubectl)
    others_write(kubectl)
    models.NodePool.objects.update(managed_fields=[])
    importlib.import_module("karpui.migrations.0019_config_managed_fields").track(apps, None)
    assert sorted(managers(kubectl)) == ["before-first-apply Update", "karp-client-side-apply Update"]
    (tmp_path / "weighted.yaml").write_text(WEIGHTED)
    kubectl.ok("apply", "--server-side", "-f", "weighted.yaml")
    survived()

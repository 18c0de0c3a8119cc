"""The API's read side as a client sees it over HTTP: discovery, get and list with selectors and paging, Tables,
and the Status bodies of refusals (Django's test client: no server, no kubectl)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from karpui.clusters import lab
from karpui.kubeapi.auth import token_create
from tests.karp import EXAMPLES, ok

BASE = "/k8s/clusters/lab"
TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
AGGREGATED = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


class Api:
    def __init__(self, token: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, path: str, accept: str = "application/json", **params: Any) -> tuple[int, Any]:
        response = self.client.get(BASE + path, params, headers={**self.headers, "Accept": accept})
        return response.status_code, json.loads(response.content)


@pytest.fixture
def api(lab: Any) -> Api:
    return Api(token_create(user=User.objects.create_user("viewer", password="viewer-pass-1")))


@pytest.fixture
def inflated(lab: Any) -> Any:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "5")
    lab_run = lab.name
    from karpui.clusters import lab as labs

    labs.advance(lab_run, 5)
    return lab


def test_a_request_without_a_valid_token_is_401_as_the_api_server_says_it(lab: Any) -> None:
    for api in (Api(None), Api("karp_not-a-token")):
        assert api.get("/api/v1/pods") == (
            401,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            },
        )
    assert Api(None).get("/version")[1]["gitVersion"] == "v1.34.0+karpui"  # public, as kube-apiserver's is


def test_a_deactivated_user_s_token_stops_working(lab: Any) -> None:
    user = User.objects.create_user("leaver", password="leaver-pass-1")
    api = Api(token_create(user=user))
    assert api.get("/api/v1/nodes")[0] == 200
    user.is_active = False
    user.save()
    assert api.get("/api/v1/nodes")[0] == 401


def test_aggregated_discovery_names_every_kind_with_short_names_categories_and_subresources(api: Api) -> None:
    status, core = api.get("/api", AGGREGATED)
    assert status == 200 and core["kind"] == "APIGroupDiscoveryList"
    [v1] = core["items"][0]["versions"]
    pods = next(r for r in v1["resources"] if r["resource"] == "pods")
    assert pods["shortNames"] == ["po"] and pods["scope"] == "Namespaced" and pods["categories"] == ["all"]
    assert [(s["subresource"], s["responseKind"]["kind"], s["verbs"]) for s in pods["subresources"]] == [
        ("status", "Pod", ["get", "patch", "update"]),
        ("eviction", "Eviction", ["create"]),
        ("log", "Pod", ["get"]),  # as kube-apiserver names it, though it answers text
    ]
    status, groups = api.get("/apis", AGGREGATED)
    karpenter = next(g for g in groups["items"] if g["metadata"]["name"] == "karpenter.sh")
    # v1alpha1 serves NodeOverlay (Karpenter v1.7)
    assert [v["version"] for v in karpenter["versions"]] == ["v1", "v1beta1", "v1alpha1"]
    v1_resources = {r["resource"]: r for r in karpenter["versions"][0]["resources"]}
    assert v1_resources["nodeclaims"]["shortNames"] == ["nc"] and v1_resources["nodepools"]["shortNames"] == ["np"]
    assert v1_resources["nodeclaims"]["categories"] == ["karpenter"]
    assert [r["resource"] for r in karpenter["versions"][1]["resources"]] == ["nodepools", "nodeclaims"]
    names = {g["metadata"]["name"] for g in groups["items"]}
    assert names == {
        "apps",
        "coordination.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "storage.k8s.io",
        "karpenter.sh",
        "karpenter.kwok.sh",
        "karpenter.k8s.aws",
        "test.karpenter.sh",
        "autoscaling.x-k8s.io",
        "karpui.dev",
    }
    autoscaling = next(g for g in groups["items"] if g["metadata"]["name"] == "autoscaling.x-k8s.io")
    [buffers] = autoscaling["versions"][0]["resources"]
    assert (autoscaling["versions"][0]["version"], buffers["resource"], buffers["shortNames"]) == (
        "v1beta1",
        "capacitybuffers",
        ["cb"],
    )
    assert buffers["scope"] == "Namespaced" and buffers["categories"] == ["autoscaling"]
    assert [s["subresource"] for s in buffers["subresources"]] == ["status"]


def test_legacy_discovery_lists_group_versions_and_their_resources(api: Api) -> None:
    assert api.get("/api")[1]["versions"] == ["v1"]
    apps = next(g for g in api.get("/apis")[1]["groups"] if g["name"] == "apps")
    assert apps["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    resources = {r["name"]: r for r in api.get("/apis/apps/v1")[1]["resources"]}
    assert resources["deployments/scale"] == {
        "name": "deployments/scale",
        "singularName": "",
        "namespaced": True,
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
        "verbs": ["get", "patch", "update"],
    }
    assert resources["deployments"]["shortNames"] == ["deploy"]
    assert api.get("/apis/widgets.example.com/v1")[0] == 404


def test_pods_list_by_label_and_field_selector_with_the_list_resource_version(inflated: Any, api: Api) -> None:
    status, pods = api.get("/api/v1/namespaces/default/pods", labelSelector="app=inflate")
    assert status == 200 and pods["kind"] == "PodList" and len(pods["items"]) == 5
    inflated.refresh_from_db()
    assert int(pods["metadata"]["resourceVersion"]) == inflated.resource_version  # the cluster's, not the newest pod's
    node = pods["items"][0]["spec"]["nodeName"]
    on_node = api.get("/api/v1/pods", fieldSelector=f"spec.nodeName={node},status.phase!=Failed")[1]["items"]
    assert len(on_node) == 5
    assert api.get("/api/v1/pods", fieldSelector="spec.nodeName=elsewhere")[1]["items"] == []
    assert api.get("/api/v1/namespaces/other/pods")[1]["items"] == []
    status, refused = api.get("/api/v1/pods", fieldSelector="spec.foo=bar")
    assert (status, refused["reason"], refused["message"]) == (400, "BadRequest", "field label not supported: spec.foo")
    status, refused = api.get("/apis/karpenter.sh/v1/nodeclaims", fieldSelector="status.nodeName=x")
    assert (status, refused["message"]) == (
        400,
        '"status.nodeName" is not a known field selector: only "metadata.name", "metadata.namespace"',
    )


def test_limit_and_continue_page_through_a_list(inflated: Any, api: Api) -> None:
    names = [p["metadata"]["name"] for p in api.get("/api/v1/namespaces/default/pods")[1]["items"]]
    seen: list[str] = []
    token = ""
    while True:
        page = api.get("/api/v1/namespaces/default/pods", limit=2, **({"continue": token} if token else {}))[1]
        seen += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] == len(names) - len(seen)
    assert seen == names
    assert api.get("/api/v1/pods", **{"continue": "not-base64!"})[0] == 400


def test_a_continue_token_older_than_the_change_log_is_410_gone(inflated: Any, api: Api) -> None:
    first = api.get("/api/v1/pods", limit=1)[1]
    lab.reset(inflated.name)  # forgets the history
    status, body = api.get("/api/v1/pods", limit=1, **{"continue": first["metadata"]["continue"]})
    assert (status, body["reason"]) == (410, "Expired")
    assert body["message"].startswith("The provided continue parameter is too old")


def test_kubectl_tables_carry_karpenter_s_printer_columns(inflated: Any, api: Api) -> None:
    status, table = api.get("/apis/karpenter.sh/v1/nodeclaims", TABLE)
    assert status == 200 and table["kind"] == "Table"
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0),
        ("Type", 0),
        ("Capacity", 0),
        ("Zone", 0),
        ("Node", 0),
        ("Ready", 0),
        ("Age", 0),
        ("ImageID", 1),
        ("ID", 1),
        ("NodePool", 1),
        ("NodeClass", 1),
        ("Drifted", 1),
    ]
    [row] = table["rows"]
    name = row["cells"][0]
    [claim] = api.get("/apis/karpenter.sh/v1/nodeclaims")[1]["items"]
    node = claim["status"]["nodeName"]  # kwok-<nodeclaim>-...
    assert row["cells"][1:6] == ["c-8x-amd64-linux", "on-demand", row["cells"][3], node, "True"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == name
    pools = api.get("/apis/karpenter.sh/v1/nodepools", TABLE)[1]
    assert [c["name"] for c in pools["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "NodeClass",
        "Nodes",
        "Ready",
        "Age",
    ]
    assert pools["rows"][0]["cells"][:4] == ["default", "default", "1", "True"]


def test_a_nodepool_is_served_as_v1beta1_too(inflated: Any, api: Api) -> None:
    status, pool = api.get("/apis/karpenter.sh/v1beta1/nodepools/default")
    assert status == 200 and pool["apiVersion"] == "karpenter.sh/v1beta1"
    assert pool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "name": "default",
    }
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenUnderutilized"
    assert "consolidateAfter" not in pool["spec"]["disruption"]
    assert pool["spec"]["disruption"]["expireAfter"] == "720h"


def test_a_v1beta1_nodepool_table_has_the_v1beta1_crd_s_columns(inflated: Any, api: Api) -> None:
    status, table = api.get("/apis/karpenter.sh/v1beta1/nodepools", TABLE)
    assert status == 200
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0),
        ("NodeClass", 0),
        ("Weight", 1),
    ]
    assert [row["cells"] for row in table["rows"]] == [["default", "default", None]]  # no weight: <none>


def test_unknown_resources_and_objects_are_404_with_a_status(api: Api) -> None:
    assert api.get("/apis/karpenter.sh/v1/widgets")[1] == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }
    assert api.get("/apis/apps/v1/namespaces/default/deployments/missing")[1] == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'deployments.apps "missing" not found',
        "reason": "NotFound",
        "details": {"name": "missing", "group": "apps", "kind": "deployments"},
        "code": 404,
    }
    assert api.get("/apis/apps/v1/deployments/x")[0] == 404  # namespaced objects live in their namespace


def test_a_list_for_a_version_not_reached_yet_answers_504_too_large(api: Api, monkeypatch: Any) -> None:
    from karpui.kubeapi import views

    monkeypatch.setattr(views, "TOO_LARGE_WAIT_SECONDS", 0.0)
    status, body = api.get("/api/v1/pods", resourceVersion="999999")
    assert (status, body["reason"], body["details"]["causes"][0]["reason"]) == (
        504,
        "Timeout",
        "ResourceVersionTooLarge",
    )


def test_continue_tokens_are_kubernetes_shaped(inflated: Any, api: Api) -> None:
    token = api.get("/api/v1/namespaces/default/pods", limit=1)[1]["metadata"]["continue"]
    decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert decoded["v"] == "meta.k8s.io/v1" and decoded["start"].endswith("\x00")


def test_metadata_only_lists_for_metadata_informers(inflated: Any, api: Api) -> None:
    accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    status, body = api.get("/api/v1/namespaces/default/pods", accept)
    assert (status, body["kind"], len(body["items"])) == (200, "PartialObjectMetadataList", 5)
    assert set(body["items"][0]) == {"kind", "apiVersion", "metadata"}
    name = body["items"][0]["metadata"]["name"]
    accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
    assert api.get(f"/api/v1/namespaces/default/pods/{name}", accept)[1]["kind"] == "PartialObjectMetadata"

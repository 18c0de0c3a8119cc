"""NodeClaims served at karpenter.sh/v1beta1 as Karpenter's conversion webhook served them: read, listed, watched
and printed converted from the stored v1, written back (PUT and patch) converted to v1, listed in discovery, and
described by the v1beta1 CRD's schema, for kubectl as for any client."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from karpui.clusters import lab as labs
from tests.karp import EXAMPLES, ok
from tests.kubeapi.admin_api import BASE, AdminApi

V1, V1BETA1 = "/apis/karpenter.sh/v1/nodeclaims", "/apis/karpenter.sh/v1beta1/nodeclaims"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
KWOK_REF = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "name": "default"}
NODECLASS_ANNOTATION = "compatibility.karpenter.sh/v1beta1-nodeclass-reference"
KUBELET_ANNOTATION = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"


@pytest.fixture
def api(lab: Any) -> AdminApi:
    inflate()
    return AdminApi()


def inflate() -> None:
    """The getting-started experiment: five inflate pods on one c-8x NodeClaim."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "5")
    labs.advance("lab", 5)


def as_v1beta1(stored: dict[str, Any]) -> dict[str, Any]:
    """What Karpenter's v1beta1 NodeClaim of a stored v1 one is: its nodeClassRef by apiVersion, and no expireAfter,
    terminationGracePeriod or lastPodEventTime."""
    expected = copy.deepcopy(stored)
    expected["apiVersion"] = "karpenter.sh/v1beta1"
    expected["spec"]["nodeClassRef"] = KWOK_REF
    expected["spec"].pop("expireAfter")
    expected["spec"].pop("terminationGracePeriod", None)
    expected["status"].pop("lastPodEventTime", None)
    return expected


def test_get_and_list_at_v1beta1_serve_the_stored_v1_nodeclaim_converted(api: AdminApi) -> None:
    [stored] = api.get(V1)[1]["items"]
    assert stored["spec"]["expireAfter"] == "720h"
    name = stored["metadata"]["name"]
    status, claim = api.get(f"{V1BETA1}/{name}")
    assert status == 200 and claim == as_v1beta1(stored)
    status, claims = api.get(V1BETA1)
    assert (status, claims["kind"], claims["apiVersion"]) == (200, "NodeClaimList", "karpenter.sh/v1beta1")
    assert claims["items"] == [as_v1beta1(stored)]


def test_a_watch_at_v1beta1_streams_v1beta1_nodeclaims(api: AdminApi) -> None:
    [stored] = api.get(V1)[1]["items"]
    response = api.client.get(BASE + V1BETA1, {"watch": "true", "timeoutSeconds": "1"}, headers=api.headers)
    # The stream's first chunk is empty (it sends the headers at once): the first event is the first line.
    first = json.loads(next(c for c in response.streaming_content if c))  # type: ignore[attr-defined]
    response.close()
    assert first == {"type": "ADDED", "object": as_v1beta1(stored)}


def test_v1beta1_tables_print_the_v1beta1_crd_s_columns(api: AdminApi) -> None:
    [stored] = api.get(V1)[1]["items"]
    status, table = api.get(V1BETA1, TABLE)
    assert status == 200
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0),
        ("Type", 0),
        ("Zone", 0),
        ("Node", 0),
        ("Ready", 0),
        ("Age", 0),
        ("Capacity", 1),
        ("NodePool", 1),
        ("NodeClass", 1),
    ]
    name, labels = stored["metadata"]["name"], stored["metadata"]["labels"]
    [row] = table["rows"]
    node = stored["status"]["nodeName"]  # kwok-<nodeclaim>-...
    assert row["cells"][:5] == [name, "c-8x-amd64-linux", labels["topology.kubernetes.io/zone"], node, "True"]
    assert row["cells"][6:] == ["on-demand", "default", "default"]


def test_a_put_at_v1beta1_round_trips_and_stores_v1(api: AdminApi) -> None:
    [before] = api.get(V1)[1]["items"]
    name = before["metadata"]["name"]
    claim = api.get(f"{V1BETA1}/{name}")[1]
    claim["metadata"]["labels"]["team"] = "a"
    status, written = api.send("PUT", f"{V1BETA1}/{name}", claim)
    assert status == 200
    after = api.get(f"{V1}/{name}")[1]
    # v1 keeps what v1beta1 cannot say (expireAfter), and the ref as written, as Karpenter's annotation
    expected = copy.deepcopy(before)
    expected["metadata"]["labels"]["team"] = "a"
    expected["metadata"]["annotations"][NODECLASS_ANNOTATION] = json.dumps(KWOK_REF, sort_keys=True)
    expected["metadata"]["resourceVersion"] = after["metadata"]["resourceVersion"]
    assert after == expected
    claim["metadata"]["resourceVersion"] = after["metadata"]["resourceVersion"]
    assert written == claim == api.get(f"{V1BETA1}/{name}")[1]


def test_a_merge_patch_at_v1beta1_sets_the_kubelet_v1_keeps_in_an_annotation(api: AdminApi) -> None:
    [before] = api.get(V1)[1]["items"]
    name = before["metadata"]["name"]
    patch = {"spec": {"kubelet": {"maxPods": 20}}}
    status, patched = api.send("PATCH", f"{V1BETA1}/{name}", patch, "application/merge-patch+json")
    assert status == 200
    assert (patched["apiVersion"], patched["spec"]["kubelet"], patched["spec"]["nodeClassRef"]) == (
        "karpenter.sh/v1beta1",
        {"maxPods": 20},
        KWOK_REF,
    )
    after = api.get(f"{V1}/{name}")[1]
    assert after["spec"] == before["spec"]
    assert after["metadata"]["annotations"][KUBELET_ANNOTATION] == '{"maxPods": 20}'
    assert api.get(f"{V1BETA1}/{name}")[1] == patched


def test_a_create_at_v1beta1_answers_v1beta1_and_a_dry_run_stores_nothing(api: AdminApi) -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": {"name": "by-hand", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": KWOK_REF, "kubelet": {"maxPods": 20}, "requirements": []},
    }
    status, created = api.send("POST", f"{V1BETA1}?dryRun=All", claim)
    assert status == 201
    assert (created["apiVersion"], created["spec"]) == ("karpenter.sh/v1beta1", claim["spec"])
    assert "annotations" not in created["metadata"]  # the compatibility annotations are v1's alone
    assert api.get(f"{V1}/by-hand")[0] == 404


def test_discovery_serves_nodeclaims_and_nodepools_at_v1beta1(api: AdminApi) -> None:
    aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    groups = api.get("/apis", aggregated)[1]
    karpenter = next(g for g in groups["items"] if g["metadata"]["name"] == "karpenter.sh")
    v1beta1 = next(v for v in karpenter["versions"] if v["version"] == "v1beta1")
    claims = next(r for r in v1beta1["resources"] if r["resource"] == "nodeclaims")
    assert (claims["responseKind"], claims["shortNames"], claims["scope"]) == (
        {"group": "karpenter.sh", "version": "v1beta1", "kind": "NodeClaim"},
        ["nc"],
        "Cluster",
    )
    names = [r["name"] for r in api.get("/apis/karpenter.sh/v1beta1")[1]["resources"]]
    assert names == ["nodepools", "nodepools/status", "nodeclaims", "nodeclaims/status"]


def test_a_new_nodeclaim_written_at_v1beta1_expires_after_its_nodepool_s_expire_after() -> None:
    from karpui.kinds.versions import nodeclaim_v1

    claim = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": {"name": "x", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"name": "default"}, "kubelet": {"maxPods": 20}, "requirements": []},
    }
    assert nodeclaim_v1(claim, stored=None, nodepool_expire_after="24h") == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "x",
            "labels": {"karpenter.sh/nodepool": "default"},
            "annotations": {NODECLASS_ANNOTATION: '{"name": "default"}', KUBELET_ANNOTATION: '{"maxPods": 20}'},
        },
        "spec": {
            # No NodePool's node class to follow: the kind a kind-less reference takes where none of its name exists
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
            "expireAfter": "24h",
        },
    }
    assert nodeclaim_v1(claim, stored=None, nodepool_expire_after=None)["spec"]["expireAfter"] == "720h"
    # Its NodePool's kind-less reference to the same name was resolved to a KWOKNodeClass: so is the NodeClaim's.
    kwok = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    assert (
        nodeclaim_v1(claim, stored=None, nodepool_expire_after=None, nodepool_ref=kwok)["spec"]["nodeClassRef"] == kwok
    )


def test_kubectl_gets_and_explains_nodeclaims_at_v1beta1(kubectl: Any) -> None:
    inflate()
    [v1] = kubectl.table("get", "nodeclaims")
    assert kubectl.ok("get", "nodeclaims.v1beta1.karpenter.sh").splitlines()[0].split() == [
        "NAME",
        "TYPE",
        "ZONE",
        "NODE",
        "READY",
        "AGE",
    ]
    [row] = kubectl.table("get", "nodeclaims.v1beta1.karpenter.sh", "-o", "wide")
    assert [row["NAME"], row["TYPE"], row["ZONE"], row["NODE"], row["READY"]] == [
        v1["NAME"],
        "c-8x-amd64-linux",
        v1["ZONE"],
        v1["NODE"],
        "True",
    ] and [row["CAPACITY"], row["NODEPOOL"], row["NODECLASS"]] == [
        "on-demand",
        "default",
        "default",
    ]
    served = json.loads(kubectl.ok("get", "nodeclaims.v1beta1.karpenter.sh", v1["NAME"], "-o", "json"))
    assert (served["apiVersion"], served["spec"]["nodeClassRef"]) == ("karpenter.sh/v1beta1", KWOK_REF)
    text = kubectl.ok("explain", "nodeclaims.spec.kubelet.maxPods", "--api-version", "karpenter.sh/v1beta1")
    assert text.splitlines()[:3] == ["GROUP:      karpenter.sh", "KIND:       NodeClaim", "VERSION:    v1beta1"]
    assert "MaxPods is an override for the maximum number of pods" in text

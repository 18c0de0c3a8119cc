"""kubectl 1.32 reading the lab over its API: the getting-started experiment's `get` and `describe` lines, with the
same outcomes the `karp` tests assert (tests/integration/test_lab_scenarios.py)."""

from __future__ import annotations

import re
from typing import Any

from karpui import models
from karpui.clusters import lab
from tests.karp import EXAMPLES, ok


def inflate(replicas: int = 5) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", str(replicas))
    lab.advance("lab", 5)


def test_get_shows_the_nodeclaim_its_node_and_the_pods_as_karp_does(kubectl: Any) -> None:
    inflate()
    [claim] = kubectl.table("get", "nodeclaims")
    assert (
        [claim["TYPE"], claim["CAPACITY"], claim["ZONE"]] == ["c-8x-amd64-linux", "on-demand", claim["ZONE"]]
        and re.fullmatch(rf"kwok-{claim['NAME']}-[a-z]+-1-[a-z0-9]{{10}}-\d+", claim["NODE"])  # as Karpenter's kwok
        and claim["READY"] == "True"
    )
    header = kubectl.ok("get", "nodeclaims").splitlines()[0].split()
    assert header == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    [node] = kubectl.table("get", "nodes", "-o", "wide")
    assert [node["NAME"], node["STATUS"], node["ROLES"]] == [
        claim["NODE"],
        "Ready",
        "<none>",
    ] and "c-8x-amd64-linux" in node.values()
    pods = kubectl.table("get", "pods", "-o", "wide")
    assert [(p["STATUS"], p["NODE"]) for p in pods] == [("Running", claim["NODE"])] * 5
    [pool] = kubectl.table("get", "nodepools")
    assert [pool["NAME"], pool["NODECLASS"], pool["NODES"], pool["READY"]] == ["default", "default", "1", "True"]
    both = kubectl.ok("get", "nodeclaims,nodepools")
    assert f"nodeclaim.karpenter.sh/{claim['NAME']}" in both and "nodepool.karpenter.sh/default" in both
    assert kubectl.ok("get", "nc", "-o", "name") == f"nodeclaim.karpenter.sh/{claim['NAME']}\n"
    assert "nodeclaim.karpenter.sh/" in kubectl.ok("get", "karpenter")  # the category


def test_describe_nodeclaim_shows_its_conditions_and_events(kubectl: Any) -> None:
    inflate()
    stored = models.KubeObject.objects.get(kind="NodeClaim")
    name, node = stored.name, stored.body["status"]["nodeName"]
    text = kubectl.ok("describe", "nodeclaim", name)
    assert f"Name:         {name}" in text
    assert "Node Name:               " + node in text
    events = text.split("Events:")[1]
    assert "Launched" in events and "karpenter" in events


def test_a_wrong_token_is_unauthorized_and_an_unknown_kind_is_named(kubectl: Any) -> None:
    kubectl.kubeconfig.write_text(kubectl.kubeconfig.read_text().replace("token: karp_", "token: karp_x"))
    done = kubectl.run("get", "nodes")
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        "error: You must be logged in to the server (the server has asked for the client to provide credentials)"
    )


def test_get_of_an_unknown_kind_or_object_fails_as_on_a_cluster(kubectl: Any) -> None:
    done = kubectl.run("get", "widgets")
    assert (done.returncode, done.stderr) == (1, 'error: the server doesn\'t have a resource type "widgets"\n')
    done = kubectl.run("get", "nodeclaim", "missing")
    assert done.stderr == 'Error from server (NotFound): nodeclaims.karpenter.sh "missing" not found\n'

"""kubectl 1.32 reading the lab over its API: the getting-started experiment's `get` and `describe` lines, with the
same outcomes the `karp` tests assert (tests/integration/test_lab_scenarios.py)."""

from __future__ import annotations

from typing import Any

from karpui import lab, models
from tests.karp import EXAMPLES, ok


def inflate(replicas: int = 5) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", str(replicas))
    lab.advance("lab", 5)


def test_get_shows_the_nodeclaim_its_node_and_the_pods_as_karp_does(kubectl: Any) -> None:
    inflate()
    [claim] = kubectl.rows("get", "nodeclaims")
    assert claim[1:4] == ["c-8x-amd64-linux", "on-demand", claim[3]] and claim[4] == claim[0] and claim[5] == "True"
    header = kubectl.ok("get", "nodeclaims").splitlines()[0].split()
    assert header == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    [node] = kubectl.rows("get", "nodes", "-o", "wide")
    assert node[:3] == [claim[0], "Ready", "<none>"] and "c-8x-amd64-linux" in node
    pods = kubectl.rows("get", "pods", "-o", "wide")
    assert [(p[2], p[6]) for p in pods] == [("Running", claim[0])] * 5
    [pool] = kubectl.rows("get", "nodepools")
    assert pool[:4] == ["default", "default", "1", "True"]
    both = kubectl.ok("get", "nodeclaims,nodepools")
    assert f"nodeclaim.karpenter.sh/{claim[0]}" in both and "nodepool.karpenter.sh/default" in both
    assert kubectl.ok("get", "nc", "-o", "name") == f"nodeclaim.karpenter.sh/{claim[0]}\n"
    assert "nodeclaim.karpenter.sh/" in kubectl.ok("get", "karpenter")  # the category


def test_describe_nodeclaim_shows_its_conditions_and_events(kubectl: Any) -> None:
    inflate()
    name = models.KubeObject.objects.get(kind="NodeClaim").name
    text = kubectl.ok("describe", "nodeclaim", name)
    assert f"Name:         {name}" in text
    assert "Node Name:               " + name in text
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

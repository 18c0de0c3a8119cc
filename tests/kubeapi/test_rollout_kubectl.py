"""kubectl 1.32's rollout verbs against the lab, as the deployment and DaemonSet controllers' status lets them work:
`rollout status` and `wait --for=condition=Available` finish once the pods are available, `rollout history` lists
the revisions and `rollout undo` (kubectl's own patch of the template from a ReplicaSet) rolls one back, and a paused
Deployment rolls nothing out. `karpui.clusters.lab.advance` stands in for the worker's tick between steps."""

from __future__ import annotations

import json
from typing import Any

from karpui.clusters import lab

WAITING = 'Waiting for deployment "inflate" rollout to finish: 0 of 5 updated replicas are available...\n'


def status(kubectl: Any, kind: str, name: str) -> dict[str, Any]:
    return dict(json.loads(kubectl.ok("get", kind, name, "-o", "json"))["status"])


def conditions(kubectl: Any) -> list[tuple[str, str, str, str]]:
    return [
        (c["type"], c["status"], c["reason"], c["message"]) for c in status(kubectl, "deploy", "inflate")["conditions"]
    ]


def replicasets(kubectl: Any) -> list[tuple[str, int, str, str]]:
    """Each ReplicaSet: its name, replicas, revision and image."""
    return [
        (
            rs["metadata"]["name"],
            rs["spec"]["replicas"],
            rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            rs["spec"]["template"]["spec"]["containers"][0]["image"],
        )
        for rs in json.loads(kubectl.ok("get", "rs", "-o", "json"))["items"]
    ]


def images(kubectl: Any, selector: str) -> list[str]:
    pods = json.loads(kubectl.ok("get", "pods", "-l", selector, "-o", "json"))["items"]
    return sorted(f"{p['status']['phase']} {p['spec']['containers'][0]['image']}" for p in pods)


def test_rollout_status_and_wait_finish_once_the_pods_are_available(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/provisioning/")
    kubectl.ok("scale", "deployment", "inflate", "--replicas", "5")
    # The pods wait for the node Karpenter launches: none is available yet.
    assert kubectl.ok("rollout", "status", "deploy/inflate", "--watch=false") == WAITING
    refused = kubectl.run("wait", "--for=condition=Available", "deploy/inflate", "--timeout=1s")
    assert (refused.returncode, refused.stderr) == (
        1,
        "error: timed out waiting for the condition on deployments/inflate\n",
    )
    watching = kubectl.popen("rollout", "status", "deploy/inflate", "--timeout=60s")
    try:
        first = watching.stdout.readline()  # watching: the advance below is seen as it is saved
        lab.advance("lab", 60)
        rest, errors = watching.communicate(timeout=60)
    finally:
        watching.kill()
    assert (first, rest, errors, watching.returncode) == (
        WAITING,
        'deployment "inflate" successfully rolled out\n',
        "",
        0,
    )
    assert kubectl.ok("wait", "--for=condition=Available", "deploy/inflate", "--timeout=5s") == (
        "deployment.apps/inflate condition met\n"
    )
    counts = {key: value for key, value in status(kubectl, "deploy", "inflate").items() if key != "conditions"}
    assert counts == {
        "availableReplicas": 5,
        "observedGeneration": 2,
        "readyReplicas": 5,
        "replicas": 5,
        "unavailableReplicas": 0,
        "updatedReplicas": 5,
    }
    [name] = [rs[0] for rs in replicasets(kubectl)]
    assert conditions(kubectl) == [
        ("Progressing", "True", "NewReplicaSetAvailable", f'ReplicaSet "{name}" has successfully progressed.'),
        ("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
    ]
    assert status(kubectl, "rs", name) == {
        "availableReplicas": 5,
        "fullyLabeledReplicas": 5,
        "observedGeneration": 2,  # made with the manifest's 0 replicas, then scaled
        "readyReplicas": 5,
        "replicas": 5,
    }
    described = kubectl.ok("describe", "deploy", "inflate").splitlines()
    fields = {key: value.strip() for key, _, value in (line.partition(":") for line in described)}
    assert fields["Replicas"] == "5 desired | 5 updated | 5 total | 5 available | 0 unavailable"
    assert fields["NewReplicaSet"] == f"{name} (5/5 replicas created)"
    assert [line.split() for line in described[described.index("Conditions:") + 3 :][:2]] == [
        ["Progressing", "True", "NewReplicaSetAvailable"],
        ["Available", "True", "MinimumReplicasAvailable"],
    ]


def test_history_lists_each_revision_and_undo_rolls_back_to_one(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/provisioning/")
    kubectl.ok("scale", "deployment", "inflate", "--replicas", "2")
    lab.advance("lab", 60)
    assert kubectl.ok("rollout", "history", "deploy/inflate") == (
        "deployment.apps/inflate \nREVISION  CHANGE-CAUSE\n1         <none>\n\n"
    )
    kubectl.ok("set", "image", "deploy/inflate", "inflate=registry.k8s.io/pause:3.10")
    kubectl.ok("annotate", "deploy/inflate", "kubernetes.io/change-cause=pause 3.10")
    lab.advance("lab", 60)
    [(first, _, _, _), (second, _, _, _)] = sorted(replicasets(kubectl), key=lambda rs: rs[2])
    assert sorted(replicasets(kubectl), key=lambda rs: rs[2]) == [
        (first, 0, "1", "public.ecr.aws/eks-distro/kubernetes/pause:3.7"),
        (second, 2, "2", "registry.k8s.io/pause:3.10"),
    ]
    assert kubectl.ok("rollout", "history", "deploy/inflate") == (
        "deployment.apps/inflate \nREVISION  CHANGE-CAUSE\n1         <none>\n2         pause 3.10\n\n"
    )
    shown = kubectl.ok("rollout", "history", "deploy/inflate", "--revision=1").splitlines()
    assert shown[0] == "deployment.apps/inflate with revision #1"
    assert "    Image:\tpublic.ecr.aws/eks-distro/kubernetes/pause:3.7" in shown
    assert kubectl.ok("rollout", "undo", "deploy/inflate", "--to-revision=1") == "deployment.apps/inflate rolled back\n"
    lab.advance("lab", 60)
    # The first ReplicaSet is the current one again, renumbered past the newest, its old number kept in history.
    assert sorted(replicasets(kubectl), key=lambda rs: rs[2]) == [
        (second, 0, "2", "registry.k8s.io/pause:3.10"),
        (first, 2, "3", "public.ecr.aws/eks-distro/kubernetes/pause:3.7"),
    ]
    rs = json.loads(kubectl.ok("get", "rs", first, "-o", "json"))
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    deployment = json.loads(kubectl.ok("get", "deploy", "inflate", "-o", "json"))
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert "kubernetes.io/change-cause" not in deployment["metadata"]["annotations"]  # revision 1's annotations
    assert kubectl.ok("rollout", "history", "deploy/inflate") == (
        "deployment.apps/inflate \nREVISION  CHANGE-CAUSE\n2         pause 3.10\n3         <none>\n\n"
    )
    assert images(kubectl, "app=inflate") == ["Running public.ecr.aws/eks-distro/kubernetes/pause:3.7"] * 2
    assert kubectl.ok("rollout", "status", "deploy/inflate", "--watch=false") == (
        'deployment "inflate" successfully rolled out\n'
    )
    assert kubectl.ok("rollout", "undo", "deploy/inflate", "--to-revision=3") == (
        "deployment.apps/inflate skipped rollback (current template already matches revision 3)\n"
    )
    missing = kubectl.run("rollout", "undo", "deploy/inflate", "--to-revision=1")
    assert missing.stderr == "error: unable to find specified revision 1 in history\n"


def test_a_paused_deployment_scales_but_rolls_out_nothing_until_resumed(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/provisioning/")
    kubectl.ok("scale", "deployment", "inflate", "--replicas", "2")
    lab.advance("lab", 60)
    [(first, _, _, _)] = replicasets(kubectl)
    assert kubectl.ok("rollout", "pause", "deploy/inflate") == "deployment.apps/inflate paused\n"
    kubectl.ok("set", "image", "deploy/inflate", "inflate=registry.k8s.io/pause:3.10")
    lab.advance("lab", 30)
    assert replicasets(kubectl) == [(first, 2, "1", "public.ecr.aws/eks-distro/kubernetes/pause:3.7")]
    assert images(kubectl, "app=inflate") == ["Running public.ecr.aws/eks-distro/kubernetes/pause:3.7"] * 2
    assert conditions(kubectl) == [
        ("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
        ("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused"),
    ]
    assert kubectl.ok("rollout", "status", "deploy/inflate", "--watch=false") == (
        'Waiting for deployment "inflate" rollout to finish: 0 out of 2 new replicas have been updated...\n'
    )
    # Scaling still applies, to the ReplicaSet the Deployment has.
    kubectl.ok("scale", "deployment", "inflate", "--replicas", "3")
    lab.advance("lab", 30)
    assert replicasets(kubectl) == [(first, 3, "1", "public.ecr.aws/eks-distro/kubernetes/pause:3.7")]
    assert images(kubectl, "app=inflate") == ["Running public.ecr.aws/eks-distro/kubernetes/pause:3.7"] * 3
    refused = kubectl.run("rollout", "undo", "deploy/inflate", "--to-revision=1")
    assert refused.stderr == (
        "error: you cannot rollback a paused deployment; resume it first with 'kubectl rollout resume' and try again\n"
    )
    assert kubectl.ok("rollout", "resume", "deploy/inflate") == "deployment.apps/inflate resumed\n"
    lab.advance("lab", 30)
    [(old, _, _, _), (new, _, _, _)] = sorted(replicasets(kubectl), key=lambda rs: rs[2])
    assert sorted(replicasets(kubectl), key=lambda rs: rs[2]) == [
        (first, 0, "1", "public.ecr.aws/eks-distro/kubernetes/pause:3.7"),
        (new, 3, "2", "registry.k8s.io/pause:3.10"),
    ]
    assert images(kubectl, "app=inflate") == ["Running registry.k8s.io/pause:3.10"] * 3
    assert conditions(kubectl) == [
        ("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
        ("Progressing", "True", "NewReplicaSetAvailable", f'ReplicaSet "{new}" has successfully progressed.'),
    ]


AGENT = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  minReadySeconds: 5
  updateStrategy: {type: RollingUpdate}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
        - {name: agent, image: "agent:1", resources: {requests: {cpu: 10m}}}
"""


def test_daemonset_rollout_status_counts_updated_and_available_pods(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/static-nodes/nodes.yaml")  # two workers; the control plane is tainted
    assert kubectl.ok("apply", "-f", "-", stdin=AGENT) == "daemonset.apps/agent created\n"
    # Running at once on both workers, but available only once ready for minReadySeconds.
    assert kubectl.ok("rollout", "status", "ds/agent", "--watch=false") == (
        'Waiting for daemon set "agent" rollout to finish: 0 of 2 updated pods are available...\n'
    )
    lab.advance("lab", 5)
    assert kubectl.ok("rollout", "status", "ds/agent", "--watch=false") == (
        'daemon set "agent" successfully rolled out\n'
    )
    assert status(kubectl, "ds", "agent") == {
        "currentNumberScheduled": 2,
        "desiredNumberScheduled": 2,
        "numberAvailable": 2,
        "numberMisscheduled": 0,
        "numberReady": 2,
        "numberUnavailable": 0,
        "observedGeneration": 1,
        "updatedNumberScheduled": 2,
    }
    kubectl.ok("set", "image", "ds/agent", "agent=agent:2")
    # Each worker's pod is replaced by one of the new template, which is not available yet.
    assert images(kubectl, "app=agent") == ["Running agent:2"] * 2
    assert kubectl.ok("rollout", "status", "ds/agent", "--watch=false") == (
        'Waiting for daemon set "agent" rollout to finish: 0 of 2 updated pods are available...\n'
    )
    assert [
        [row["DESIRED"], row["CURRENT"], row["READY"], row["UP-TO-DATE"], row["AVAILABLE"]]
        for row in kubectl.table("get", "ds", "agent")
    ] == [["2", "2", "2", "2", "0"]]
    lab.advance("lab", 5)
    assert kubectl.ok("rollout", "status", "ds/agent", "--watch=false") == (
        'daemon set "agent" successfully rolled out\n'
    )
    assert status(kubectl, "ds", "agent")["observedGeneration"] == 2


def test_a_daemonset_written_without_an_update_strategy_rolls_out_as_rolling_update(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/static-nodes/nodes.yaml")
    kubectl.ok("apply", "-f", "-", stdin=AGENT.replace("  updateStrategy: {type: RollingUpdate}\n", ""))
    lab.advance("lab", 5)
    assert kubectl.ok("rollout", "status", "ds/agent", "--watch=false") == (
        'daemon set "agent" successfully rolled out\n'
    )

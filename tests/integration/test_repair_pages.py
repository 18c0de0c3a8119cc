"""Node repair on the dashboard: the node's page says how long it has been unhealthy and when it is replaced; the
disruption queue shows the repair, when it is forced and, once forced, why no approval could hold it."""

from datetime import timedelta

from karpui.clusters import lab as labs
from karpui.models import Cluster
from karpui.settings import feature_gates
from provisioner.cluster.objects import timestamp
from tests.integration.test_dashboard import logged_in, user
from tests.karp import ok


def sicken(node):
    """The node's kubelet goes silent (Ready=Unknown) at the next whole second of the lab's clock."""
    clock = Cluster.objects.get(name="lab").clock
    Cluster.objects.filter(name="lab").update(clock=clock.replace(microsecond=0) + timedelta(seconds=1))

    def change(running):
        stored = running.store.get("Node", node)
        stored["status"]["conditions"] = [c for c in stored["status"]["conditions"] if c["type"] != "Ready"] + [
            {"type": "Ready", "status": "Unknown", "lastTransitionTime": timestamp(running.now)}
        ]
        running.store.update(stored)

    labs.run_rows("lab", change)


def repair_command(lab):
    [command] = [c for c in labs.objects(lab, "DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]
    return command


def test_the_node_page_and_the_queue_follow_a_repair(node, lab, settings):
    settings.KARPUI_FEATURE_GATES = feature_gates("NodeRepair=true")
    client = logged_in(user("olga", "approve_disruption"))
    sicken(node)
    ok("advance", "4m")
    live = client.get(f"/nodes/{node}/", {"part": "live"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<b>Unhealthy: Ready=Unknown</b> for 4m" in live
    assert "Node repair replaces it in <b>6m</b>, when the cloud provider's 10m toleration ends" in live
    name = repair_command(Cluster.objects.get(name="lab"))["metadata"]["name"]
    assert f'href="/disruption/#command-{name}">{name}</a>: AwaitingApproval' in live
    queue = client.get("/disruption/").content.decode()
    row = queue.split(f'<tr id="command-{name}">')[1].split("</tr>")[0]
    assert "forced in 6m (the repair toleration ends) unless approved sooner" in row
    assert f'action="/disruption/{name}/approve"' in row

    ok("advance", "6m")
    command = repair_command(Cluster.objects.get(name="lab"))
    assert command["status"]["forced"].startswith(f"forced: Node {node} has had Ready=Unknown since ")
    queue = client.get("/disruption/").content.decode()
    # Repaired within the step: the history keeps the reason it was forced beside the outcome.
    assert command["status"]["phase"] == "Succeeded"
    assert f"<div>{command['status']['forced']}</div>command succeeded".replace("'", "&#x27;") in queue
    assert f'action="/disruption/{name}/approve"' not in queue


def test_without_the_gate_the_node_page_says_nothing_will_repair_it(node, lab):
    client = logged_in(user())
    sicken(node)
    ok("advance", "11m")
    live = client.get(f"/nodes/{node}/", {"part": "live"}, HTTP_HX_REQUEST="true").content.decode()
    assert "NodeRepair is off for this cluster (FEATURE_GATES): Karpenter leaves an unhealthy node as it is." in live
    assert [c for c in labs.objects(Cluster.objects.get(name="lab"), "DisruptionCommand")] == []

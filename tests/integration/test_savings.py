"""Cost history and the savings page: samples written on change, the baseline without consolidation, and the
realised and forgone savings of each command."""

import json
from datetime import datetime, timedelta

from django.test import override_settings

from karpui import models
from karpui.history import costs
from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok, rows, table

PRICE = 0.054295  # c-2x-amd64-linux on demand


def consolidated_lab():
    """One c-2x on-demand node for one pod from the start of a minute; in the next minute the pod goes and
    emptiness consolidation removes the node. Samples are per minute, so the node costs for exactly one."""
    clock = models.Cluster.objects.get(name="lab").clock
    ok("advance", f"{60 - clock.second}s")
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    ok("advance", "60s")
    ok("scale", "deploy/inflate", "--replicas", "0")
    ok("advance", "40s")
    [command] = table("get", "disruptioncommands")
    assert command["PHASE"] == "Succeeded"
    return command["NAME"]


def samples(cluster):
    return list(
        models.CostSample.objects.filter(cluster=cluster).values_list(
            "time", "nodepool", "cost_per_hour", "nodeclaims", "saved_per_hour"
        )
    )


def test_samples_are_written_when_a_nodepool_cost_changes_and_not_otherwise(lab):
    consolidated_lab()
    lab.refresh_from_db()
    written = samples(lab)
    ok("advance", "10m")  # nothing changes: no new sample
    assert samples(lab) == written
    removed = lab.clock.replace(second=0, microsecond=0)
    assert written == [
        (removed - timedelta(minutes=1), "default", PRICE, 1, 0.0),
        (removed, "default", 0.0, 0, PRICE),
    ]


def test_a_long_advance_dates_each_change_when_it_happened_not_when_the_run_ended(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    ok("scale", "deploy/inflate", "--replicas", "0")
    ok("advance", "30m")
    [command] = models.KubeObject.objects.filter(kind="DisruptionCommand")
    completed = datetime.fromisoformat(command.body["status"]["completedAt"].replace("Z", "+00:00"))

    assert samples(lab)[-1] == (completed.replace(second=0), "default", 0.0, 0, PRICE)


def test_a_nodepool_gets_a_daily_sample_even_when_nothing_changes_and_old_samples_are_pruned(lab):
    consolidated_lab()
    # A 1-day history over 3 lab days (each simulated day costs seconds): the same boundary as 2 days over 4.
    with override_settings(KARPUI_COST_HISTORY_DAYS=1):
        for _ in range(3):
            ok("advance", "24h")
    lab.refresh_from_db()
    kept = samples(lab)
    # A keyframe each day; the two first samples, older than the 1-day history plus one keyframe day, are gone.
    assert [row[2:] for row in kept] == [(0.0, 0, PRICE)] * 3
    minute = lab.clock.replace(second=0, microsecond=0)
    assert [row[0] for row in kept] == [minute - timedelta(days=days) for days in (2, 1, 0)]


def test_the_savings_page_draws_cost_against_the_baseline_and_lists_each_command(lab):
    name = consolidated_lab()
    ok("advance", "1h")
    client = logged_in(user())
    response = client.get("/savings/?window=6h")
    page = response.content.decode()
    chart = response.context["chart"]

    [pool] = chart["pools"]
    # 3-minute buckets on :00, :03, ...; none before the first cost sample, when the node launched: it cost PRICE
    # for a minute, then nothing, while the baseline (without consolidation) goes on at PRICE.
    known = [cost for cost in pool["cost"] if cost is not None]
    assert pool["name"] == "default" and len(pool["cost"]) == len(chart["labels"])
    assert pool["cost"][: len(pool["cost"]) - len(known)] == [None] * (len(pool["cost"]) - len(known))
    assert known[0] > 0 and set(known[2:]) == {0.0} and chart["baseline"][-1] == PRICE
    assert json.loads(page.split('id="cost-series" type="application/json">')[1].split("</script>")[0]) == chart
    assert 'id="baseline-now">$0.0543<' in page and 'id="cost-now">$0.0000<' in page
    assert 'id="realised">$0.05<' in page  # $0.054295/h for 1 h and some seconds
    assert f'id="saving-{name}"' in page and "Succeeded" in page
    [row] = response.context["commands"]
    [node] = row["nodes"]
    assert f'<a href="/nodes/{node}/">{node}</a>' in page  # the node page keeps its timeline after it is gone
    assert "vendor/chartjs/chart.umd.min.js" in page


def test_denied_commands_count_as_forgone(lab):
    from tests.integration.test_dashboard import awaiting_command

    approver, name = awaiting_command()
    logged_in(approver).post(f"/disruption/{name}/deny", {"reason": "release freeze"})
    ok("advance", "5s")
    page = logged_in(user()).get("/savings/").content.decode()
    assert 'id="forgone">$0.0543<' in page and 'id="realised">$0.00<' in page
    row = page.split(f'id="saving-{name}"')[1].split("</tr>")[0]
    assert "Denied" in row and "alice" in row and "0.0543" in row


def test_the_history_reads_a_fixed_number_of_queries(lab, django_assert_num_queries):
    consolidated_lab()
    ok("advance", "2h")
    lab.refresh_from_db()
    with django_assert_num_queries(4):
        history = costs.history(lab, lab.clock - timedelta(hours=1), lab.clock)
    # Whole minutes from the one the hour began in, the last cut short at the clock.
    count = 61 if lab.clock.second or lab.clock.microsecond else 60
    assert history.pools == {"default": [0.0] * count} and history.baseline == [PRICE] * count


def test_a_deleted_nodepools_series_ends_with_one_zero_sample_and_is_then_forgotten(lab):
    ok("advance", f"{60 - lab.clock.second}s")  # from the start of a minute: samples are per minute
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "65s")
    ok("delete", "nodepool", "default")
    ok("advance", "60s")  # its NodeClaim is drained and removed
    ok("advance", "30h")  # no daily keyframe for a pool that is gone
    lab.refresh_from_db()

    assert [row[1:] for row in samples(lab)] == [("default", PRICE, 1, 0.0), ("default", 0.0, 0, 0.0)]
    assert lab.cost_state["last"] == {}


def test_the_cards_show_the_cost_now_not_the_last_buckets_average(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")  # the node has run for seconds of the last 3-minute bucket
    response = logged_in(user()).get("/savings/?window=6h")

    assert (response.context["cost_now"], response.context["baseline_now"]) == (PRICE, PRICE)
    # The bucket the first sample falls in averages only the seconds since it (the time before was not seen).
    assert response.context["chart"]["pools"][0]["cost"][-1] == PRICE


def test_a_denied_saving_stops_counting_once_another_command_removes_its_node(lab):
    from tests.integration.test_dashboard import awaiting_command

    approver, denied = awaiting_command()
    logged_in(approver).post(f"/disruption/{denied}/deny", {"reason": "release freeze"})
    ok("advance", "5s")
    [node] = [r["NAME"] for r in table("get", "nodes")]
    requester = logged_in(user("olga", "request_disruption"))
    requester.post(f"/nodes/{node}/disrupt", {"reason": "retire it by hand"})
    ok("advance", "15s")  # validated: awaiting a second person
    [manual] = [r["NAME"] for r in table("get", "disruptioncommands") if r["NAME"].startswith("manual-")]
    logged_in(approver).post(f"/disruption/{manual}/approve")
    ok("advance", "30s")
    assert rows("get", "nodes") == []

    response = logged_in(user()).get("/savings/")
    page = response.content.decode()
    assert 'id="forgone">$0.0000<' in page
    row = page.split(f'id="saving-{denied}"')[1].split("</tr>")[0]
    assert "Denied" in row and "no longer: its node is gone" in row
    [entry] = [e for pool, e in response.context["ledger"] if pool == "default"]
    assert entry["forgone_per_hour"] == 0.0
    assert ok("savings").splitlines()[1].split() == ["default", "2", "0.0000", "0.0000", "0.0000"]  # karp savings


def command(name, phase, nodes, finished, savings=0.05, reason="Underutilized"):
    return {
        "metadata": {"name": name},
        "spec": {"reason": reason, "savings": savings, "candidates": [{"node": n, "nodeclaim": n} for n in nodes]},
        "status": {"phase": phase, "finishedAt": finished},
    }


def test_several_forgone_commands_about_one_node_count_once_the_newest():
    from karpui.gate.disruption import forgone

    commands = [
        command("dry-1", "DryRun", ["a"], "2026-12-01T10:00:00Z", 0.05),
        command("dry-2", "DryRun", ["a"], "2026-12-01T11:00:00Z", 0.04),  # newer, about the same node
        command("denied-b", "Denied", ["b", "c"], "2026-12-01T09:00:00Z", 0.10),  # c is gone
        command("denied-d", "Denied", ["d"], "2026-12-01T09:00:00Z", 0.02),
        command("drift-d", "DryRun", ["d"], "2026-12-01T12:00:00Z", 0.0, reason="Drifted"),  # saves nothing
        command("done-e", "Succeeded", ["e"], "2026-12-01T09:00:00Z", 0.07),
    ]
    assert forgone(commands, {"a", "b", "d", "e"}) == {"dry-2": 0.04, "denied-d": 0.02}

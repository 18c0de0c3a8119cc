"""A pause holds every command that has not started executing, whoever approved it, until the pause lapses or is
resumed; a command already executing goes on; resuming when nothing is paused changes nothing."""

import json
from datetime import UTC, datetime

from karpui import models
from karpui.gate import disruption
from karpui.people.audit import Actor
from tests.integration.test_dashboard import logged_in
from tests.integration.test_disruption_lab import approver, manual_pool, scale_down_and_wait
from tests.integration.test_disruption_lifecycle import drift_pool, provisioned, slow_registration
from tests.karp import EXAMPLES, ok, rows, table

START = datetime(2030, 1, 1, tzinfo=UTC)  # a whole second, so every time below is exact


def command(name=None):
    """The DisruptionCommand called `name`, or the lab's only one, as stored."""
    if name is None:
        [name] = [r["NAME"] for r in table("get", "disruptioncommands")]
    return json.loads(ok("get", "dc", name, "-o", "json"))


def phase_and_message(name=None):
    status = command(name)["status"]
    return status["phase"], status.get("message")


def proposed_empty_node():
    """An auto-mode lab whose empty node has a command Proposed at 00:00:20, to be validated at 00:00:35."""
    models.Cluster.objects.filter(name="lab").update(clock=START)
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    ok("scale", "deploy/inflate", "--replicas", "0")
    ok("advance", "15s")
    assert phase_and_message() == ("Proposed", None)
    assert command()["status"]["validateAt"] == "2030-01-01T00:00:35Z"


def test_a_pause_holds_an_auto_command_already_proposed_until_it_is_resumed(lab):
    approver("alice")
    proposed_empty_node()
    ok("pause", "--as", "alice", "--for", "1h", "--reason", "x")
    ok("advance", "25s")  # validated and auto-approved at 00:00:35, but not started
    assert len(rows("get", "nodes")) == 1
    assert phase_and_message() == ("Approved", "waiting: voluntary disruption is paused until 2030-01-01T01:00:20Z")
    assert command()["spec"]["approval"]["by"] == "karpui (auto)"
    ok("advance", "30m")
    assert len(rows("get", "nodes")) == 1
    assert phase_and_message() == ("Approved", "waiting: voluntary disruption is paused until 2030-01-01T01:00:20Z")

    ok("resume", "--as", "alice")
    ok("advance", "10s")
    assert rows("get", "nodes") == []
    assert phase_and_message() == ("Succeeded", "command succeeded")
    assert command()["status"]["startedAt"] == "2030-01-01T00:30:45Z"  # at the first run after the resume


def test_a_held_command_starts_by_itself_when_the_pause_lapses(lab):
    approver("alice")
    proposed_empty_node()
    ok("pause", "--as", "alice", "--for", "2m", "--reason", "x")
    ok("advance", "1m")
    assert phase_and_message() == ("Approved", "waiting: voluntary disruption is paused until 2030-01-01T00:02:20Z")
    ok("advance", "2m")
    assert rows("get", "nodes") == []
    assert phase_and_message() == ("Succeeded", "command succeeded")
    assert command()["status"]["startedAt"] == "2030-01-01T00:02:20Z"  # the moment the pause lapsed


def test_a_command_a_person_approves_during_a_pause_waits_for_it(lab):
    models.Cluster.objects.filter(name="lab").update(clock=START)
    manual_pool()
    scale_down_and_wait()
    assert phase_and_message() == ("AwaitingApproval", None)
    name = command()["metadata"]["name"]
    ok("pause", "--as", "alice", "--for", "10m", "--reason", "x")
    ok("approve", name, "--as", "alice")
    ok("advance", "5m")
    assert len(rows("get", "nodes")) == 1
    assert phase_and_message() == ("Approved", "waiting: voluntary disruption is paused until 2030-01-01T00:10:45Z")
    ok("advance", "6m")
    assert rows("get", "nodes") == []
    assert phase_and_message() == ("Succeeded", "command succeeded")


def test_an_approved_command_whose_deadline_passes_during_the_pause_expires(lab):
    models.Cluster.objects.filter(name="lab").update(clock=START)
    manual_pool()
    scale_down_and_wait()
    name = command()["metadata"]["name"]
    assert command(name)["status"]["expiresAt"] == "2030-01-01T01:00:35Z"  # validated at 00:00:35: an hour to decide
    ok("pause", "--as", "alice", "--for", "2h", "--reason", "x")
    ok("approve", name, "--as", "alice")
    ok("advance", "3h")  # past the deadline, then past the pause
    assert len(rows("get", "nodes")) == 1
    assert phase_and_message(name) == ("Expired", "expired after approval: disruption was paused past its deadline")
    assert command(name)["status"]["finishedAt"] == "2030-01-01T01:00:35Z"


def test_a_command_already_executing_when_the_pause_begins_goes_on(lab):
    approver("alice")
    provisioned()
    slow_registration("30s")
    [old] = [r["NAME"] for r in table("get", "nodes")]
    ok("apply", "-f", "-", stdin=drift_pool())
    ok("advance", "30s")  # proposed, validated, candidate tainted, replacement launched (its node needs 30 s)
    assert command()["status"]["phase"] == "Executing"
    ok("pause", "--as", "alice", "--for", "1h", "--reason", "x")
    ok("advance", "1m")
    assert phase_and_message() == ("Succeeded", "command succeeded")
    assert old not in [n["NAME"] for n in table("get", "nodes")]


def test_resuming_when_nothing_is_paused_writes_nothing_and_answers_false(lab):
    actor = Actor.for_user(approver("alice"), "web")
    assert disruption.disruption_resume(cluster=lab, actor=actor) is False
    assert list(models.AuditEvent.objects.filter(target_kind="Cluster").values_list("action", flat=True)) == []
    assert models.Cluster.objects.get(pk=lab.pk).paused_until is None


def test_resuming_on_the_page_when_nothing_is_paused_writes_no_audit_row(lab):
    client = logged_in(approver("alice"))
    response = client.post("/disruption/resume")
    assert (response.status_code, response["Location"]) == (302, "/disruption/")
    assert models.AuditEvent.objects.filter(target_kind="Cluster").count() == 0
    assert '<div class="message info">nothing was paused</div>' in client.get("/disruption/").content.decode()
    ok("pause", "--as", "alice", "--for", "1h", "--reason", "incident 4711")
    page = client.post("/disruption/resume", follow=True).content.decode()
    assert '<div class="message success">voluntary disruption resumed</div>' in page


def test_karp_resume_says_whether_anything_was_paused(lab):
    approver("alice")
    assert ok("resume", "--as", "alice") == "nothing was paused\n"
    ok("pause", "--as", "alice", "--for", "1h", "--reason", "incident 4711")
    assert ok("resume", "--as", "alice") == "voluntary disruption resumed\n"
    events = models.AuditEvent.objects.filter(target_kind="Cluster").order_by("id")
    assert list(events.values_list("action", flat=True)) == [
        "pause",
        "resume",
    ]


def test_resuming_a_lapsed_pause_changes_nothing_either(lab):
    actor = Actor.for_user(approver("alice"), "web")
    disruption.disruption_pause(cluster=lab, actor=actor, reason="incident 4711", seconds=60)
    ok("advance", "2m")
    assert disruption.disruption_resume(cluster=lab, actor=actor) is False
    assert list(models.AuditEvent.objects.filter(target_kind="Cluster").values_list("action", flat=True)) == ["pause"]


def test_resuming_a_pause_lifts_it_and_audits_what_it_was(lab):
    models.Cluster.objects.filter(name="lab").update(clock=START)
    actor = Actor.for_user(approver("alice"), "web")
    disruption.disruption_pause(cluster=lab, actor=actor, reason="incident 4711", seconds=3600)
    assert disruption.disruption_resume(cluster=lab, actor=actor) is True
    row = models.Cluster.objects.get(pk=lab.pk)
    assert (row.paused_until, row.pause_reason, row.paused_by) == (None, "", "")
    event = models.AuditEvent.objects.get(action="resume")
    assert (event.target_name, event.before, event.after) == (
        "lab",
        {"paused_until": "2030-01-01T01:00:00+00:00", "reason": "incident 4711"},
        {"paused_until": None},
    )

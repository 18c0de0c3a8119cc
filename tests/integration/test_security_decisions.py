"""Issue 11, items 1 and 13: the first decision on a disruption command is final, whoever races it, and a refusal
is a message (web) or `error: ...` (CLI), never an error page or a second audit row."""

import os
import threading
import time

import pytest
from django.contrib.auth.models import Permission
from django.db import connection, transaction

from karpui import models
from karpui.gate import disruption
from karpui.people.audit import Actor
from tests.integration.test_dashboard import awaiting_command, logged_in, user
from tests.karp import EXAMPLES, karp, ok, rows, table

POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


def decisions() -> list[tuple[str, str]]:
    return list(models.AuditEvent.objects.filter(action__in=("approve", "deny")).values_list("action", "actor_name"))


def second_approver():
    return user("bob", "approve_disruption")


@pytest.mark.parametrize("later", ["", "5s"])
def test_a_denial_is_final_whether_or_not_the_controllers_have_seen_it(lab, later):
    alice, name = awaiting_command()
    second_approver()
    ok("deny", name, "--as", "alice", "--reason", "release freeze")
    if later:
        ok("advance", later)
    # Before the controllers run again only spec.approval holds the denial; the phase still says AwaitingApproval.
    assert table("get", "disruptioncommands")[0]["PHASE"] == ("Denied" if later else "AwaitingApproval")

    code, out, err = karp("approve", name, "--as", "bob")

    assert (code, out) == (1, "")
    assert err.startswith(f'error: disruption command "{name}" was already denied by alice at ')
    assert err.endswith("; the first decision is final\n")
    assert decisions() == [("deny", "alice")]
    ok("advance", "2m")
    assert [c["PHASE"] for c in table("get", "disruptioncommands")] == ["Denied"]
    assert len(rows("get", "nodes")) == 1


def test_a_second_approval_is_refused_and_writes_no_row(lab):
    alice, name = awaiting_command()
    bob = second_approver()
    cluster = models.Cluster.objects.get(name="lab")
    disruption.command_approve(cluster=cluster, name=name, actor=Actor.for_user(alice, "web"))

    approved, refused = disruption.commands_approve(cluster=cluster, names=[name], actor=Actor.for_user(bob, "web"))

    assert approved == []
    assert refused[name].startswith(f'disruption command "{name}" was already approved by alice at ')
    assert decisions() == [("approve", "alice")]


def test_the_web_shows_a_late_decision_as_a_message_on_the_queue(lab):
    alice, name = awaiting_command()
    bob = logged_in(second_approver())
    assert logged_in(alice).post(f"/disruption/{name}/approve").status_code == 302

    page = bob.post(f"/disruption/{name}/deny", {"reason": "too late"}, follow=True)

    assert page.status_code == 200 and page.redirect_chain == [("/disruption/", 302)]
    assert f"disruption command &quot;{name}&quot; was already approved by alice at " in page.content.decode()
    assert decisions() == [("approve", "alice")]


def test_four_eyes_on_a_single_approve_is_a_message_not_an_error_page(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    [node] = table("get", "nodes")
    bob = user("bob", "approve_disruption", "request_disruption")
    ok("disrupt", "node", node["NAME"], "--as", "bob", "--reason", "noisy neighbour")
    ok("advance", "20s")
    [command] = table("get", "disruptioncommands")

    page = logged_in(bob).post(f"/disruption/{command['NAME']}/approve", follow=True)

    assert page.status_code == 200 and page.redirect_chain == [("/disruption/", 302)]
    assert "bob asked for this disruption and may not approve it alone (four eyes)" in page.content.decode()
    assert decisions() == []


def _decide_on_own_connection(decide, name, person, outcomes, backends):
    """One approver's request: its own thread, so its own database connection and transaction."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backends.append(cursor.fetchone()[0])
        actor = Actor.for_user(person, "web")
        cluster = models.Cluster.objects.get(name="lab")
        try:
            if decide == "approve":
                disruption.command_approve(cluster=cluster, name=name, actor=actor)
            else:
                disruption.command_deny(cluster=cluster, name=name, actor=actor, reason="racing")
            outcomes[person.username] = "decided"
        except Exception as error:  # the loser's refusal is the point of the test
            outcomes[person.username] = "; ".join(getattr(error, "messages", [str(error)]))
    finally:
        connection.close()


def _waiting_on_locks(backends: list[int]) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted AND pid = ANY(%s)", [backends])
        return cursor.fetchone()[0]


@pytest.mark.skipif(not POSTGRES, reason="two real connections racing for a row lock need PostgreSQL")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("second", ["approve", "deny"])
def test_two_racing_decisions_on_two_connections_one_wins_one_row(second):
    alice, name = awaiting_command()
    bob = user("bob")
    bob.user_permissions.add(Permission.objects.get(codename="approve_disruption"))
    outcomes: dict[str, str] = {}
    backends: list[int] = []
    threads = [
        threading.Thread(target=_decide_on_own_connection, args=("approve", name, alice, outcomes, backends)),
        threading.Thread(target=_decide_on_own_connection, args=(second, name, bob, outcomes, backends)),
    ]
    # Hold the cluster's row lock until both requests are queued behind it, so they really race for it.
    with transaction.atomic():
        models.Cluster.objects.select_for_update().get(name="lab")
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while (len(backends) < 2 or _waiting_on_locks(backends) < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _waiting_on_locks(backends) == 2
    for thread in threads:
        thread.join(timeout=60)

    winner = next(who for who, outcome in outcomes.items() if outcome == "decided")
    loser = next(who for who in ("alice", "bob") if who != winner)
    assert sorted(outcomes) == ["alice", "bob"]
    assert outcomes[loser].startswith(f'disruption command "{name}" was already ')
    assert f" by {winner} at " in outcomes[loser] and outcomes[loser].endswith("; the first decision is final")
    assert decisions() == [("approve" if winner == "alice" else second, winner)]

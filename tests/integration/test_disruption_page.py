"""The Disruption page: time left on each command, and a decision shown as soon as it is recorded."""

from datetime import UTC, datetime

from karpui import models
from karpui.insight import selectors
from tests.integration.test_dashboard import awaiting_command, logged_in
from tests.karp import ok

START = datetime(2030, 1, 1, tzinfo=UTC)  # a whole second, so every time below is exact


def awaiting_at_a_known_time():
    """awaiting_command from 00:00:00: validated at 00:00:35 (expires 01:00:35), the clock at 00:00:45."""
    models.Cluster.objects.filter(name="lab").update(clock=START)
    return awaiting_command()


def row(page, name):
    """The queue's row for command `name`, as HTML."""
    return page.split(f'<tr id="command-{name}">')[1].split("</tr>")[0]


def test_a_live_command_shows_the_time_it_has_left(lab):
    approver, name = awaiting_at_a_known_time()
    [command] = selectors.disruption_queue(models.Cluster.objects.get(name="lab"))["live"]
    assert command["expires_in"] == 3590.0
    page = logged_in(approver).get("/disruption/").content.decode()
    assert '<div class="muted">expires in 59m50s</div>' in row(page, name)


def test_a_command_past_its_deadline_has_no_time_left(lab):
    approver, name = awaiting_at_a_known_time()
    # The clock alone, with no run of the controllers: the page between the deadline and the tick that expires it.
    models.Cluster.objects.filter(name="lab").update(clock=datetime(2030, 1, 1, 1, 5, tzinfo=UTC))
    [command] = selectors.disruption_queue(models.Cluster.objects.get(name="lab"))["live"]
    assert command["expires_in"] == 0.0


def test_an_approval_shows_at_once_without_the_buttons(lab):
    approver, name = awaiting_at_a_known_time()
    page = logged_in(approver).post(f"/disruption/{name}/approve", follow=True).content.decode()
    mine = row(page, name)
    assert (
        '<span class="tag">Approved</span><div class="muted">Approved by alice, starting at the next tick</div>' in mine
    )
    assert "AwaitingApproval" not in mine and "expires in" not in mine
    assert "/approve" not in mine and "/deny" not in mine and 'name="commands"' not in mine


def test_a_denial_shows_at_once_with_its_reason_without_the_buttons(lab):
    approver, name = awaiting_at_a_known_time()
    client = logged_in(approver)
    page = client.post(f"/disruption/{name}/deny", {"reason": "release week"}, follow=True).content.decode()
    mine = row(page, name)
    assert '<span class="tag">Denied</span><div class="muted">Denied by alice: release week</div>' in mine
    assert "AwaitingApproval" not in mine and "expires in" not in mine
    assert "/approve" not in mine and "/deny" not in mine and 'name="commands"' not in mine


def test_an_approval_during_a_pause_says_it_waits_and_how_long_the_command_has(lab):
    approver, name = awaiting_at_a_known_time()
    client = logged_in(approver)
    client.post("/disruption/pause", {"duration": "2h", "reason": "incident 4711"})
    client.post(f"/disruption/{name}/approve")
    ok("advance", "10m")  # 00:10:45: the command is Approved, held by the pause, 49m50s before its deadline
    mine = row(client.get("/disruption/").content.decode(), name)
    assert (
        '<span class="tag">Approved</span><div class="muted">Approved by alice, waiting for the pause to end</div>'
        in mine
    )
    assert '<div class="muted">expires in 49m50s</div>' in mine


def test_the_audit_trail_is_shown_once_with_its_rows_filled_in(lab):
    approver, _ = awaiting_at_a_known_time()  # setting the approval mode wrote an audit row
    page = logged_in(approver).get("/disruption/").content.decode()
    assert page.count("<h2>Audit trail") == 1
    assert "<td> ()</td>" not in page  # the leftover table read a row's fields from the wrong object: empty cells

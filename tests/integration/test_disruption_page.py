"""The Disruption page: time left on each command."""

from datetime import UTC, datetime

from karpui import models, selectors
from tests.integration.test_dashboard import awaiting_command, logged_in

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
    assert '<div class="muted">expires in 59m</div>' in row(page, name)


def test_a_command_past_its_deadline_has_no_time_left(lab):
    approver, name = awaiting_at_a_known_time()
    # The clock alone, with no run of the controllers: the page between the deadline and the tick that expires it.
    models.Cluster.objects.filter(name="lab").update(clock=datetime(2030, 1, 1, 1, 5, tzinfo=UTC))
    [command] = selectors.disruption_queue(models.Cluster.objects.get(name="lab"))["live"]
    assert command["expires_in"] == 0.0

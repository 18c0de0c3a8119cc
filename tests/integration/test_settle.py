"""The lab settles each moment in a handful of rounds, and says so in the logs when it cannot."""

from karpui.clusters import lab as lab_runs
from provisioner import lab as engine
from tests.karp import EXAMPLES, ok


def test_a_draining_node_does_not_make_every_settle_spin(lab, monkeypatch):
    """While consolidation drains a node, the command waits on termination: that is no change to settle on."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "30")
    ok("advance", "30s")
    ok("scale", "deploy/inflate", "--replicas", "3")
    rounds: list[int] = []
    settle = engine.Lab.settle

    def counting(self, *args):
        settled = settle(self, *args)
        rounds.append(self.settle_rounds)
        return settled

    monkeypatch.setattr(engine.Lab, "settle", counting)
    for _ in range(60):
        ok("advance", "1s")
    assert "Succeeded" in ok("get", "disruptioncommands")
    # The longest settle is the replacement's cascade up to the candidate's deletion: 5 rounds. The orchestration
    # queue deletes a started command's candidate a second later, as Karpenter's does, so its deletion, eviction and
    # rescheduling settle in a later tick (8 rounds in one settle before that). A waiting command used to report a
    # change every round, up to the limit (12).
    assert max(rounds) == 5
    assert "settle did not converge" not in ok("logs")


def test_a_component_that_never_settles_is_logged_and_cut_off(lab, monkeypatch):
    from provisioner.controllers.drift import DriftController

    monkeypatch.setattr(DriftController, "reconcile", lambda self, ctx: True)  # a change every time, changing nothing
    running = lab_runs.advance("lab", 1)
    assert running.settle_rounds == engine.MAX_SETTLE_ROUNDS
    errors = [e.record for e in running.logs if e.record.message == "settle did not converge"]
    assert errors[0].fields == {"rounds": 12, "still-changing": ["drift"]}
    assert errors[0].level == "ERROR"

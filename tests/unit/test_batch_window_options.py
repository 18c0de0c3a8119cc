"""The provisioning batch window as Karpenter's options set it (BATCH_IDLE_DURATION, BATCH_MAX_DURATION: Karpenter's
pkg/operator/options, read by pkg/controllers/provisioning/batcher.go), for each lab cluster from its Karpenter
Deployment's environment, as `kubectl -n kube-system set env deploy/karpenter BATCH_IDLE_DURATION=5s` sets it."""

from __future__ import annotations

import pytest

from provisioner.options import KarpenterOptions, OptionsError
from provisioner.sim import karpenter
from tests.lab_builders import START, deployment, lab, nodepool_doc


def controller(**env: str) -> dict:
    """Karpenter's Deployment with `env` over the chart's environment."""
    made = karpenter.deployment()
    [container] = made["spec"]["template"]["spec"]["containers"]
    container["env"] = [e for e in container["env"] if e["name"] not in env]
    container["env"] += [{"name": name, "value": value} for name, value in env.items()]
    return made


def first_nodeclaim_after(seconds_between_pods: float, pods: int, **env: str) -> float:
    """Seconds from the first pending pod to the first NodeClaim, with a new pod every `seconds_between_pods`."""
    made = lab(
        nodepool_doc(),
        deployment(replicas=1),
        karpenter.control_plane_node("lab", "2027-01-15T08:00:00Z"),
        controller(**env),
    )
    made.settle()
    for replicas in range(2, pods + 1):
        made.advance(seconds_between_pods)
        if made.store.list("NodeClaim"):
            break
        scaled = made.store.get("Deployment", "inflate", "default")
        scaled["spec"]["replicas"] = replicas
        made.store.update(scaled, spec_changed=True)
    made.advance(30)
    # The "created nodeclaim" record's time: the moment the batch closed (a creationTimestamp holds whole seconds).
    return min(t.time for t in made.ctx.logs if t.record.message == "created nodeclaim") - START


def test_the_chart_defaults_close_a_batch_one_second_after_its_last_pod():
    assert first_nodeclaim_after(5, 1) == 1


def test_batch_idle_duration_from_the_deployment_keeps_the_window_open_longer():
    assert first_nodeclaim_after(5, 1, BATCH_IDLE_DURATION="5s") == 5


def test_pods_arriving_within_the_idle_window_extend_it_up_to_batch_max_duration():
    # A new pod every 2 s keeps a 3 s idle window open; the 10 s default maximum closes it.
    assert first_nodeclaim_after(2, 8, BATCH_IDLE_DURATION="3s") == 10
    assert first_nodeclaim_after(2, 8, BATCH_IDLE_DURATION="3s", BATCH_MAX_DURATION="4500ms") == 4.5


def test_go_durations_are_read_as_karpenter_reads_them():
    options = KarpenterOptions.from_env({"BATCH_IDLE_DURATION": "1.5s", "BATCH_MAX_DURATION": "1m30s"})
    assert (options.batch_idle_duration, options.batch_max_duration) == (1.5, 90.0)
    assert (KarpenterOptions().batch_idle_duration, KarpenterOptions().batch_max_duration) == (1.0, 10.0)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10", 'invalid BATCH_MAX_DURATION "10": time: missing unit in duration "10"'),
        ("10d", 'invalid BATCH_MAX_DURATION "10d": time: unknown unit "d" in duration "10d"'),
        ("ten", 'invalid BATCH_MAX_DURATION "ten": time: invalid duration "ten"'),
        ("-1s", 'invalid BATCH_MAX_DURATION "-1s": a batch window cannot be negative'),
    ],
)
def test_a_batch_duration_go_cannot_read_is_refused_naming_the_variable(value, message):
    # Karpenter would start with its default instead (env.WithDefaultDuration); karpui refuses, so the change someone
    # made is never quietly lost.
    with pytest.raises(OptionsError) as refused:
        KarpenterOptions.from_env({"BATCH_MAX_DURATION": value})
    assert str(refused.value) == f"validating cli flags / env vars, {message}"

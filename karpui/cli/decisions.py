"""`karp approve`, `deny`, `pause`, `resume` and `disrupt`: the human gate's decisions, made as a karpui user (--as)
and audited by the gate (karpui.gate.disruption)."""

from __future__ import annotations

from karpui.cli.common import (
    KarpError,
    Run,
    person,
)
from karpui.gate import disruption
from karpui.kinds.resources import resolve
from provisioner.durations import parse_duration


def approve(run: Run) -> None:
    cluster, rest, options = run.cluster, run.words, run.options
    for name in rest or [""]:
        command = disruption.command_approve(
            cluster=cluster,
            name=name,
            actor=person(options),
            reason=options["reason"],
            confirmed=options["confirm"],
        )
        run.out(f"disruptioncommand.karpui.dev/{command['metadata']['name']} approved")


def deny(run: Run) -> None:
    cluster, rest, options = run.cluster, run.words, run.options
    for name in rest or [""]:
        command = disruption.command_deny(cluster=cluster, name=name, actor=person(options), reason=options["reason"])
        run.out(f"disruptioncommand.karpui.dev/{command['metadata']['name']} denied")


def pause(run: Run) -> None:
    cluster, options = run.cluster, run.options
    seconds = parse_duration(options["for_duration"] or "")
    assert seconds is not None
    row = disruption.disruption_pause(cluster=cluster, actor=person(options), reason=options["reason"], seconds=seconds)
    run.out(f"voluntary disruption paused until {row.paused_until:%Y-%m-%dT%H:%M:%SZ}: {row.pause_reason}")


def resume(run: Run) -> None:
    cluster, options = run.cluster, run.options
    resumed = disruption.disruption_resume(cluster=cluster, actor=person(options))
    run.out("voluntary disruption resumed" if resumed else "nothing was paused")


def disrupt(run: Run) -> None:
    cluster, rest, options = run.cluster, run.words, run.options
    if len(rest) != 2 or resolve(rest[0]).kind != "Node":
        raise KarpError("usage: karp disrupt node NAME --as USER --reason TEXT")
    command = disruption.node_disruption_request(
        cluster=cluster, node=rest[1], actor=person(options), reason=options["reason"]
    )
    run.out(f"disruptioncommand.karpui.dev/{command['metadata']['name']} created (needs another person's approval)")


def approval_mode(run: Run) -> None:
    """`approval-mode NODEPOOL MODE [--threshold $/h] --as USER --reason TEXT` changes a NodePool's approval mode
    (from manual to auto or auto-below: asks an approver); `approval-mode approve|deny ID --as USER [--reason]`
    decides such a request."""
    cluster, rest, options = run.cluster, run.words, run.options
    if len(rest) == 2 and rest[0] in ("approve", "deny") and rest[1].isdigit():
        decided = disruption.approval_mode_decide(
            cluster=cluster,
            request=int(rest[1]),
            actor=person(options),
            approve=rest[0] == "approve",
            note=options["reason"],
        )
        run.out(f"approvalmoderequest/{decided.pk} {decided.get_decision_display()}")
        return
    if len(rest) != 2:
        raise KarpError(
            "usage: karp approval-mode NODEPOOL MODE [--threshold $/h] --as USER --reason TEXT, or "
            "karp approval-mode approve|deny ID --as USER [--reason TEXT]"
        )
    asked = disruption.approval_mode_request(
        cluster=cluster,
        nodepool=rest[0],
        mode=rest[1],
        actor=person(options),
        reason=options["reason"],
        threshold=options["threshold"],
    )
    if asked is None or asked.decision:
        run.out(f"nodepool.karpenter.sh/{rest[0]} approval mode {rest[1]}")
    else:
        run.out(f"approvalmoderequest/{asked.pk} created: an approver decides (karp approval-mode approve {asked.pk})")

"""The human gate at about 2,000 pods over five NodePools, approved as several people would: in bulk (each pool's
waiting commands at once, confirming the combined plan when asked) and one by one. Counts what the gate exists to
prevent: pods stranded, nodes launched because of approvals, NodePool limits exceeded, and the savings ledger's
drift from the cluster's real hourly cost. Prints figures; asserts nothing.

Usage: python bench/gate.py [--scale 1.0] [--rounds 6] [--seed 7]
In a throwaway SQLite database (var/bench-gate.sqlite3), in-process, on the lab's virtual clock (`karp advance`):
five manual NodePools (on-demand, spot, a CPU-capped one, m-family, arm64), 20 Deployments pinned to them (about
2,000 pods, some under a PodDisruptionBudget of 2), all running; then 30-60 % of each Deployment's pods go, and the
proposals queue up. Phase "bulk": every 20 s an approver approves each NodePool's waiting commands together (a
refused set is counted, then confirmed as the approver would); phase "one by one": every 20 s two approvers each
approve the oldest waiting command. Between and after, the lab runs until nothing executes and no pod waits.

Figures, per phase: commands approved, refused sets, re-checks that stopped a command (expired) or replaced it
(superseded); pods stranded (the most Unschedulable at once, and pod-seconds Unschedulable); NodeClaims the
provisioner launched while approvals ran (the workloads are not scaled then, so each was made for pods an approval
evicted) against replacements the commands launched; samples where a NodePool's NodeClaims held more than its
limit; real $/h before and after against the ledger's $/h saved (the drift is the difference).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"

POOLS = {
    # name: (requirements, limits, pod CPU, pod memory)
    "default": ((("karpenter.sh/capacity-type", ("on-demand",)), ("karpenter.kwok.sh/instance-family", ("c",))), None),
    "batch-spot": ((("karpenter.sh/capacity-type", ("spot",)), ("karpenter.kwok.sh/instance-family", ("c",))), None),
    "capped": (
        (("karpenter.sh/capacity-type", ("on-demand",)), ("karpenter.kwok.sh/instance-family", ("c",))),
        {"cpu": "96"},
    ),
    "general": ((("karpenter.sh/capacity-type", ("on-demand",)), ("karpenter.kwok.sh/instance-family", ("m",))), None),
    "arm": (
        (
            ("karpenter.sh/capacity-type", ("on-demand",)),
            ("kubernetes.io/arch", ("arm64",)),
            ("karpenter.kwok.sh/instance-family", ("c",)),
        ),
        None,
    ),
}


class _NeverRaised(Exception):
    pass


NEEDS_CONFIRMING: type[Exception] = _NeverRaised
WORKLOADS = {"default": "350m", "batch-spot": "500m", "capped": "300m", "general": "250m", "arm": "300m"}


def karp(*args: str, stdin: str | None = None) -> str:
    import io

    from django.core.management import call_command

    out, old = io.StringIO(), sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        call_command("karp", *args, stdout=out, stderr=io.StringIO())
    finally:
        sys.stdin = old
    return out.getvalue()


def manifests(scale: float) -> tuple[str, dict[str, int]]:
    from tests import lab_manifests as m

    docs = [m.NODE_CLASS]
    replicas: dict[str, int] = {}
    for pool, (requirements, limits) in POOLS.items():
        arch = () if any(k == "kubernetes.io/arch" for k, _ in requirements) else (("kubernetes.io/arch", ("amd64",)),)
        # Nodes of 4 to 16 CPUs: a few dozen of them, so consolidation has choices.
        arch = (*arch, ("karpenter.kwok.sh/instance-cpu", ("4", "8", "16")))
        docs.append(
            m.nodepool(
                pool,
                requirements=(*arch, *requirements),
                annotations={"karpui.dev/approval-mode": "manual"},
                consolidate_after="30s",
                limits=limits,
                budgets=[{"nodes": "20%"}],
                node_class=False,
            )
        )
        for i in range(4):
            name = f"{pool}-{i}"
            replicas[name] = max(int(100 * scale), 1)
            docs.append(m.deployment(name, replicas[name], WORKLOADS[pool], memory="256Mi", nodepool=pool))
            if i == 0:
                docs.append(m.pdb(name, max_unavailable=2))
    return m.documents(*docs), replicas


class Watch:
    """What the gate should never allow, sampled after every step of lab time."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.max_stranded = 0
        self.stranded_seconds = 0.0
        self.over_limit_samples = 0
        self.worst_over: dict[str, str] = {}
        self.seen_claims: set[str] = set()
        self.launched: list[str] = []

    def start(self) -> None:
        from karpui import models

        self.seen_claims = set(
            models.KubeObject.objects.filter(cluster=self.cluster, kind="NodeClaim").values_list("name", flat=True)
        )
        self.launched = []

    def sample(self, seconds: float) -> None:
        from karpui import models
        from provisioner.quantity import parse_quantity

        stranded = models.KubeObject.objects.filter(cluster=self.cluster, kind="Pod", unschedulable=True).count()
        self.max_stranded = max(self.max_stranded, stranded)
        self.stranded_seconds += stranded * seconds
        use: dict[str, int] = {}
        for name, body in models.KubeObject.objects.filter(cluster=self.cluster, kind="NodeClaim").values_list(
            "name", "body"
        ):
            if name not in self.seen_claims:
                self.seen_claims.add(name)
                self.launched.append(name)
            pool = (body["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", "")
            cpu = ((body.get("status") or {}).get("capacity") or {}).get("cpu") or (
                ((body.get("spec") or {}).get("resources") or {}).get("requests") or {}
            ).get("cpu", "0")
            use[pool] = use.get(pool, 0) + parse_quantity(cpu)
        for pool, (_, limits) in POOLS.items():
            if limits and use.get(pool, 0) > parse_quantity(limits["cpu"]):
                self.over_limit_samples += 1
                self.worst_over[pool] = f"cpu {use[pool] / 1000:g} of {limits['cpu']}"


def hourly_cost(cluster: Any) -> float:
    from karpui import models

    try:
        from provisioner.disruption.accounting import claim_price
    except ImportError:  # a tree from before the gate's accounting (for comparison)
        from karpui.history.costs import claim_price  # type: ignore[no-redef]

    return sum(
        claim_price(b)
        for b in models.KubeObject.objects.filter(cluster=cluster, kind="NodeClaim").values_list("body", flat=True)
    )


def ledger_per_hour(cluster: Any) -> float:
    from karpui.gate import disruption

    cluster.refresh_from_db()
    return sum(e["saving_per_hour"] for e in disruption.savings_ledger(cluster).values())


def commands(cluster: Any, phase: str | None = None) -> list[dict[str, Any]]:
    from karpui.clusters import lab

    found = lab.objects(cluster, "DisruptionCommand")
    return [c for c in found if phase is None or c["status"].get("phase") == phase]


def advance(watch: Watch, seconds: int, step: int = 10) -> None:
    for _ in range(seconds // step):
        karp("advance", f"{step}s")
        watch.sample(step)


def settle(watch: Watch, cluster: Any, limit: int = 900) -> int:
    """Run the lab until no command executes or is approved and no pod is Unschedulable (at most `limit` s)."""
    from karpui import models

    waited = 0
    while waited < limit:
        advance(watch, 10)
        waited += 10
        busy = [c for c in commands(cluster) if c["status"].get("phase") in ("Approved", "Executing")]
        pending = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", unschedulable=True).count()
        if not busy and not pending:
            break
    return waited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="replicas per Deployment / 100")
    parser.add_argument("--rounds", type=int, default=6, help="approval rounds per phase")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    path = ROOT / "var" / "bench-gate.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    import django

    django.setup()
    from django.contrib.auth.models import Permission, User
    from django.core.exceptions import PermissionDenied, ValidationError
    from django.core.management import call_command

    from karpui import models
    from karpui.gate import disruption
    from karpui.people.audit import Actor

    global NEEDS_CONFIRMING
    # A tree from before combined plans (for comparison) never refuses a set.
    NEEDS_CONFIRMING = getattr(disruption, "PlanNeedsConfirmation", NEEDS_CONFIRMING)
    call_command("migrate", verbosity=0)
    cluster = models.Cluster.objects.get(name="lab")
    people = []
    for name in ("alice", "bob", "carol"):
        user = User.objects.create_user(name, password="pw-only-for-bench")
        user.user_permissions.add(Permission.objects.get(codename="approve_disruption"))
        people.append(Actor.for_user(user, "web"))
    rng = random.Random(args.seed)  # a reproducible workload

    text, replicas = manifests(args.scale)
    began = time.perf_counter()
    karp("apply", "-f", "-", stdin=text)
    watch = Watch(cluster)
    settle(watch, cluster, limit=600)
    pods = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", phase="Running").count()
    nodes = models.KubeObject.objects.filter(cluster=cluster, kind="NodeClaim").count()
    print(
        f"cluster: {pods} pods running on {nodes} NodeClaims over {len(POOLS)} NodePools "
        f"(${hourly_cost(cluster):.4f}/h), {time.perf_counter() - began:.0f} s wall"
    )
    for name, count in replicas.items():
        karp("scale", f"deploy/{name}", "--replicas", str(int(count * rng.uniform(0.4, 0.7))))
    advance(watch, 180)
    print(f"after scaling down: {len(commands(cluster, 'AwaitingApproval'))} commands await approval")

    for phase in ("bulk", "one by one"):
        if phase == "one by one":
            # A second wave for the second way of approving.
            for name in replicas:
                current = int(karp("get", "deploy", name, "-o", "jsonpath={.spec.replicas}") or 0)
                karp("scale", f"deploy/{name}", "--replicas", str(int(current * rng.uniform(0.5, 0.8))))
            advance(watch, 180)
            # While the approvers take their time, two workloads grow back a little: what the commands counted on
            # changes under them.
            for name in list(replicas)[::10]:
                current = int(karp("get", "deploy", name, "-o", "jsonpath={.spec.replicas}") or 0)
                karp("scale", f"deploy/{name}", "--replicas", str(int(current * 1.3) + 1))
            advance(watch, 30)
            print(f"\nafter a second scale-down: {len(commands(cluster, 'AwaitingApproval'))} commands await approval")
        watch.start()
        watch.max_stranded, watch.stranded_seconds, watch.over_limit_samples, watch.worst_over = 0, 0.0, 0, {}
        cost_before, ledger_before = hourly_cost(cluster), ledger_per_hour(cluster)
        names_before = {c["metadata"]["name"] for c in commands(cluster)}
        approved = refused = 0
        timings: list[float] = []
        phase_began = time.perf_counter()
        for round_ in range(args.rounds):
            waiting = sorted(
                commands(cluster, "AwaitingApproval"),
                key=lambda c: c["spec"].get("queuedAt") or c["status"].get("proposedAt") or "",
            )
            if phase == "bulk":
                by_pool: dict[str, list[str]] = {}
                for command in waiting:
                    by_pool.setdefault((command["spec"].get("nodepools") or [""])[0], []).append(
                        command["metadata"]["name"]
                    )
                for names in by_pool.values():
                    actor = people[round_ % len(people)]
                    started = time.perf_counter()
                    try:
                        done, _ = disruption.commands_approve(
                            cluster=cluster, names=names, actor=actor, confirmed=True, reason="bench"
                        )
                    except NEEDS_CONFIRMING as refusal:
                        refused += 1
                        done, _ = disruption.commands_approve(
                            cluster=cluster,
                            names=names,
                            actor=actor,
                            confirmed=True,
                            reason="bench",
                            plan=refusal.plan.digest,
                        )
                    timings.append(time.perf_counter() - started)
                    approved += len(done)
            else:
                for actor, command in zip(people[:2], waiting[:2], strict=False):
                    started = time.perf_counter()
                    try:
                        disruption.command_approve(
                            cluster=cluster,
                            name=command["metadata"]["name"],
                            actor=actor,
                            confirmed=True,
                            reason="bench",
                        )
                        approved += 1
                    except (ValidationError, PermissionDenied):  # expired or superseded meanwhile, as for a person
                        refused += 1
                    timings.append(time.perf_counter() - started)
            advance(watch, 20)
        settle(watch, cluster)
        mine = [c for c in commands(cluster) if c["metadata"]["name"] not in names_before]
        old = [c for c in commands(cluster) if c["metadata"]["name"] in names_before]
        phases: dict[str, int] = {}
        for command in [*old, *mine]:
            phases[command["status"].get("phase", "")] = phases.get(command["status"].get("phase", ""), 0) + 1
        replacements = {n for c in commands(cluster) for n in c["status"].get("replacementNodeClaims") or []}
        provisioner_launches = [n for n in watch.launched if n not in replacements]
        cost_after, ledger_after = hourly_cost(cluster), ledger_per_hour(cluster)
        real, booked = cost_before - cost_after, ledger_after - ledger_before
        print(
            f"\n{phase}: {approved} approvals ({refused} refused: sets whose combined plan needed confirming, or "
            f"commands gone by the time they were approved), {time.perf_counter() - phase_began:.0f} s wall; "
            f"an approval call took {1000 * max(timings, default=0):.0f} ms at most, "
            f"{1000 * sum(timings) / max(len(timings), 1):.0f} ms on average"
        )
        print(f"  commands by phase: {json.dumps(dict(sorted(phases.items())))}")
        for command in [c for c in [*old, *mine] if c["status"].get("phase") == "Rejected"]:
            spec, status = command["spec"], command["status"]
            # Why validation refused it, and whether the same nodes were proposed again (issue 26, case 3).
            nodes = sorted(c["node"] for c in spec["candidates"])
            again = [c for c in [*old, *mine] if sorted(x["node"] for x in c["spec"]["candidates"]) == nodes]
            print(
                f"  rejected: {command['metadata']['name']} {spec['reason']} {spec.get('decision', '')} "
                f"({spec.get('method', '')}) {','.join(nodes)}: {status.get('message', '')}; "
                f"proposed {len(again)} time(s) for these nodes "
                f"({', '.join(c['status'].get('phase', '') + ' ' + c['spec'].get('decision', '') for c in again)})"
            )
        print(
            f"  pods stranded: at most {watch.max_stranded} Unschedulable at once, "
            f"{watch.stranded_seconds:.0f} pod-seconds"
        )
        print(
            f"  NodeClaims launched: {len([n for n in watch.launched if n in replacements])} replacements the "
            f"commands launched, {len(provisioner_launches)} by the provisioner for pods approvals evicted"
        )
        print(
            f"  limits exceeded: {watch.over_limit_samples} samples{' ' + json.dumps(watch.worst_over) if watch.worst_over else ''}"
        )
        print(
            f"  $/h: real {cost_before:.4f} -> {cost_after:.4f} (saved {real:.4f}); ledger booked {booked:.4f}; "
            f"drift {real - booked:+.4f}"
        )


if __name__ == "__main__":
    main()

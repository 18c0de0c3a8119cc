"""Karpenter and karpui raced on the same real cluster: scale-up to every pod Running, scale-down to the last node
gone, and what each provisioner's process spent doing it. Asserts nothing; prints a table and draws a plot.

Usage: python bench/race.py [--pods 1000,5000] [--provisioners karpenter,kwok] [--repeat K] [--kubeconfig FILE]
                            [--readme] [--plot bench/race.png] [--profile DIR]

For each size and provisioner, one at a time from the same empty cluster (hack/kube/cluster.py's control plane,
started here unless --kubeconfig names one): Karpenter's kwok provider v1.15, or karpui's engine in kwok mode
(`manage.py engine`, its own process and database), is started; a NodePool (amd64 on-demand, no limit, a budget
of 100 % so that the budget does not pace the scale-down, consolidateAfter 0s) and a Deployment of one-CPU pods
at 0 replicas are applied; then the Deployment is scaled to N and timed until N replicas are ready (kwok makes a
bound pod Running and Ready), and scaled to 0 and timed until no NodeClaim is left. The scale-down is paced by the
ReplicaSet controller deleting pods (about 20 a second) and by the pods the provisioner's consolidations evict on
the way, so the lap also records when the Deployment had no pod left and the seconds from then to the last node
gone: the tail that is the provisioner's alone, and counts the scale-down's disruption commands, executed and
rejected at validation, by consolidation type (Real.commands: Karpenter's from its metrics, karpui's from its
database). The provisioner's CPU-seconds (user + system, its whole process group) and peak RSS (VmHWM) are read
from /proc over the whole run. Karpenter's own CI bar: 1,000 pods out in under 2 minutes at under 260 MB.

--repeat K runs K laps of each size and provisioner, the provisioners taking turns, and adds a table of each
one's median and range: single laps differ by more than the provisioners do.

--profile DIR runs karpui's engine under cProfile and writes each lap's stats to DIR/kwok-<pods>-<lap>.prof, printing the
functions with the most cumulative time; the profiler's own cost makes that lap's times and CPU-seconds no figures
to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from versus_karpenter import ClusterHandle, Real, real_cluster, write_readme  # noqa: E402

from tests.lab_manifests import documents, nodepool  # noqa: E402

README_START = "<!-- race: start -->"
README_END = "<!-- race: end -->"
LIMIT_SECONDS = 1800.0

NODEPOOL = nodepool(
    requirements=(
        ("kubernetes.io/arch", ("amd64",)),
        ("kubernetes.io/os", ("linux",)),
        ("karpenter.sh/capacity-type", ("on-demand",)),
    ),
    expire_after="720h",
    consolidate_after="0s",
    budgets=[{"nodes": "100%"}],
)
# The Deployment is written out, not built: Karpenter's own pause image and container name, on a real cluster.
MANIFESTS = documents(
    NODEPOOL,
    """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: race, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: race}}
  template:
    metadata: {labels: {app: race}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: main
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: "1", memory: 256Mi}}
""",
)


@dataclass(frozen=True)
class Lap:
    provisioner: str
    pods: int
    up_seconds: float | None
    down_seconds: float | None
    nodes: int
    cpu_seconds: float
    peak_rss: int
    pods_gone_seconds: float | None = None  # scale-down to the Deployment's last pod gone (None in older laps)
    # The scale-down, sampled about every second: (seconds since the scale to 0, the Deployment's status.replicas,
    # NodeClaims). status.replicas moves in the ReplicaSet controller's steps (up to 500 deletions each), not pod by
    # pod: it says when the last pod went, not the pace before.
    down_samples: list[tuple[float, int, int]] = field(default_factory=list)
    # The disruption commands of the scale-down, by consolidation type: [executed, rejected at validation].
    commands: dict[str, list[int]] = field(default_factory=dict)

    @property
    def tail_seconds(self) -> float | None:
        """From the Deployment's last pod gone to the last node gone."""
        if self.down_seconds is None or self.pods_gone_seconds is None:
            return None
        return self.down_seconds - self.pods_gone_seconds


def ready(runner: Real) -> int:
    return replicas(runner, "readyReplicas")


def replicas(runner: Real, status_field: str) -> int:
    said = runner.kubectl("get", "deploy", "race", "-o", f"jsonpath={{.status.{status_field}}}").strip()
    return int(said or 0)


def count(runner: Real, kind: str) -> int:
    return len(runner.kubectl("get", kind, "-o", "name").split())


def until(runner: Real, done: object, started: float) -> float | None:
    while time.monotonic() - started < LIMIT_SECONDS:
        runner.sample()
        if done():  # type: ignore[operator]
            return time.monotonic() - started
        time.sleep(1.0)
    return None


def lap(runner: Real, pods: int, label: str) -> Lap:
    """One lap; the provisioner's log is var/versus/<provisioner>/<label>.log."""
    # The reset deletes the last lap's Events too (thousands: a pod's scheduling, a node's registration), which
    # karpui's engine, informing Events, would list, cache and mirror and Karpenter would not.
    runner.cluster.reset()
    runner.start({}, label)
    runner.apply(MANIFESTS)
    time.sleep(2.0)
    runner.scale("deploy/race", pods)
    started = time.monotonic()
    up = until(runner, lambda: ready(runner) >= pods, started)
    nodes = count(runner, "nodes")
    before = runner.commands()
    runner.scale("deploy/race", 0)
    started = time.monotonic()
    samples: list[tuple[float, int, int]] = []

    def down_done() -> bool:
        # Once the Deployment has no pod left it stays so: no need to ask again.
        left = replicas(runner, "replicas") if not samples or samples[-1][1] else 0
        claims = count(runner, "nodeclaims")
        samples.append((round(time.monotonic() - started, 1), left, claims))
        return claims == 0

    down = until(runner, down_done, started)
    made = runner.commands() - before
    cpu, rss = peak_usage(runner)
    runner.end()
    pods_gone = next((at for at, left, _ in samples if left == 0), None)
    commands = {kind: [made[(kind, "executed")], made[(kind, "rejected")]] for kind, _ in sorted(made)}
    return Lap(runner.name, pods, up, down, nodes, cpu, rss, pods_gone, samples, commands)


def peak_usage(runner: Real) -> tuple[float, int]:
    """The provisioner's CPU-seconds and peak RSS over the lap, sampled once more now."""
    runner.sample()
    return max((u[1] for u in runner.usage), default=0.0), max((u[2] for u in runner.usage), default=0)


NAMES = {"karpenter": "Karpenter v1.15 (kwok provider)", "kwok": "karpui (engine, kwok mode)"}


def secs(value: float | None, unknown: str = "–") -> str:
    return f"{value:.0f}" if value is not None else unknown


def timed(value: float | None) -> str:
    """A time the lap waits for: None is a lap that gave up at the limit."""
    return secs(value, f"> {LIMIT_SECONDS:.0f}")


def commands(one: Lap) -> str:
    """A lap's scale-down commands: executed / rejected, and the types of the rejected ones."""
    if not one.commands:
        return "–"
    executed = sum(done for done, _ in one.commands.values())
    rejected = {kind: count for kind, (_, count) in one.commands.items() if count}
    said = ", ".join(f"{kind} {count}" for kind, count in rejected.items())
    return f"{executed} / {sum(rejected.values())}" + (f" ({said})" if said else "")


def table(laps: list[Lap]) -> str:
    lines = [
        "| pods | provisioner | nodes | scale-up to all Running, s | scale-down: last pod gone, s | last node gone, s "
        "| tail after the last pod, s | scale-down commands executed / rejected | CPU-s | peak RSS MiB |",
        "|---:|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for one in laps:
        lines.append(
            f"| {one.pods:,} | {NAMES.get(one.provisioner, one.provisioner)} | {one.nodes} | {timed(one.up_seconds)} | "
            f"{secs(one.pods_gone_seconds)} | {timed(one.down_seconds)} | {secs(one.tail_seconds)} | "
            f"{commands(one)} | {one.cpu_seconds:.1f} | {one.peak_rss / 2**20:.0f} |"
        )
    return "\n".join(lines)


MEASURES: tuple[tuple[str, Callable[[Lap], float | None]], ...] = (
    ("scale-up to all Running (s)", lambda one: one.up_seconds),
    ("scale-down to last node gone (s)", lambda one: one.down_seconds),
    ("tail after the last pod (s)", lambda one: one.tail_seconds),
    ("provisioner CPU-seconds", lambda one: one.cpu_seconds),
    ("provisioner peak RSS (MiB)", lambda one: one.peak_rss / 2**20),
)


def spread(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    """Median, least and greatest of the laps that measured it (None when none did)."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return statistics.median(known), min(known), max(known)


def groups(laps: list[Lap]) -> dict[tuple[int, str], list[Lap]]:
    """The laps of each size and provisioner, sizes ascending."""
    grouped: dict[tuple[int, str], list[Lap]] = {}
    for one in sorted(laps, key=lambda one: (one.pods, one.provisioner)):
        grouped.setdefault((one.pods, one.provisioner), []).append(one)
    return grouped


def summary(laps: list[Lap]) -> str:
    """Each size and provisioner's median over its laps, with the range (least–greatest) beside it."""

    def cell(values: Sequence[float | None]) -> str:
        found = spread(values)
        if found is None:
            return "–"
        median, least, greatest = found
        return f"{median:.0f} ({least:.0f}–{greatest:.0f})"

    header = " | ".join(title for title, _ in MEASURES)
    lines = [f"| pods | provisioner | laps | {header} |", "|---:|---|---:|" + "---:|" * len(MEASURES)]
    for (pods, name), group in groups(laps).items():
        cells = " | ".join(cell([measure(one) for one in group]) for _, measure in MEASURES)
        lines.append(f"| {pods:,} | {NAMES.get(name, name)} | {len(group)} | {cells} |")
    return "\n".join(lines)


def plot(laps: list[Lap], path: Path) -> None:
    """A bar per size and provisioner for each measure: the median of its laps, the range as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    grouped = groups(laps)
    sizes = sorted({pods for pods, _ in grouped})
    provisioners = sorted({name for _, name in grouped})
    sampled = [size for size in sizes if any(one.down_samples for one in laps if one.pods == size)]
    rows = 2 if sampled else 1
    figure, axes = plt.subplots(rows, len(MEASURES), figsize=(4 * len(MEASURES), 4 * rows), squeeze=False)
    width = 0.8 / max(len(provisioners), 1)
    colours = {name: f"C{index}" for index, name in enumerate(provisioners)}
    for axis, (title, measure) in zip(axes[0], MEASURES, strict=True):
        for index, name in enumerate(provisioners):
            found = [spread([measure(one) for one in grouped.get((size, name), [])]) for size in sizes]
            medians = [f[0] if f else 0.0 for f in found]
            below = [f[0] - f[1] if f else 0.0 for f in found]
            above = [f[2] - f[0] if f else 0.0 for f in found]
            positions = [i + index * width for i in range(len(sizes))]
            axis.bar(positions, medians, width, yerr=[below, above], capsize=3, color=colours[name])
        axis.set_title(title)
        axis.set_xticks([i + width * (len(provisioners) - 1) / 2 for i in range(len(sizes))])
        axis.set_xticklabels([f"{size:,} pods" for size in sizes])
    handles = [Patch(color=colours[name], label=NAMES.get(name, name)) for name in provisioners]
    axes[0][0].legend(handles=handles, fontsize="small")
    if sampled:
        # Each lap's NodeClaims through its scale-down, a dotted line where its Deployment had no pod left.
        for axis, size in zip(axes[1], sampled, strict=False):
            for one in (o for o in laps if o.pods == size and o.down_samples):
                times = [at for at, _, _ in one.down_samples]
                axis.plot(times, [claims for _, _, claims in one.down_samples], color=colours[one.provisioner])
                if one.pods_gone_seconds is not None:
                    axis.axvline(one.pods_gone_seconds, color=colours[one.provisioner], linestyle=":", linewidth=0.8)
            axis.set_title(f"{size:,} pods: NodeClaims in the scale-down")
            axis.set_xlabel("seconds after the scale to 0 (dotted: the last pod gone)")
        for axis in axes[1][len(sampled) :]:
            axis.set_visible(False)
    figure.suptitle("Karpenter and karpui on the same real control plane (hack/kube, kube-apiserver v1.37)")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def lap_arguments(parser: argparse.ArgumentParser, pods: str) -> None:
    """The options every bench of laps on the real cluster takes (this one and bench/burst.py)."""
    parser.add_argument("--pods", default=pods)
    parser.add_argument("--provisioners", default="karpenter,kwok")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--readme", action="store_true")
    parser.add_argument("--save", help="write the laps as JSON to this file")
    parser.add_argument("--laps", help="run nothing: the table from these --save files (comma-separated)")


@contextlib.contextmanager
def laps_cluster(args: argparse.Namespace, prefix: str) -> Iterator[tuple[Path, ClusterHandle]]:
    """The control plane laps run on (started here unless --kubeconfig names one), reset after the last lap."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    handle = real_cluster(folder, args.kubeconfig or os.environ.get("KARPUI_REAL_KUBECONFIG"))
    try:
        yield folder, handle
        handle.cluster.reset()
    finally:
        if handle.owned:
            handle.cluster.stop()


def save_laps(path: str | None, laps: Sequence[object]) -> None:
    """Every lap so far as JSON (after each lap, so that a later lap's failure loses nothing)."""
    if path:
        # A lap a line: a lap's scale-down samples run to hundreds of triples.
        Path(path).write_text("[\n" + ",\n".join(json.dumps(vars(one)) for one in laps) + "\n]\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lap_arguments(parser, "1000,5000")
    parser.add_argument("--plot", default=str(ROOT / "bench" / "race.png"))
    parser.add_argument("--profile", help="a folder: karpui's engine runs under cProfile, its stats written there")
    parser.add_argument("--repeat", type=int, default=1, help="laps of each size and provisioner, taking turns")
    args = parser.parse_args()
    if args.laps:
        laps = [Lap(**one) for path in args.laps.split(",") for one in json.loads(Path(path).read_text())]
        report(sorted(laps, key=lambda one: (one.pods, one.provisioner)), args)
        return
    laps = []
    with laps_cluster(args, "race-") as (folder, handle):
        sizes = [int(p) for p in args.pods.split(",")]
        turns = [(pods, name) for pods in sizes for _ in range(args.repeat) for name in args.provisioners.split(",")]
        for pods, name in turns:
            runner = Real(handle.cluster, folder, name)
            turn = sum(1 for o in laps if (o.pods, o.provisioner) == (pods, name)) + 1
            if args.profile and name == "kwok":
                runner.profile = Path(args.profile) / f"kwok-{pods}-{turn}.prof"
                runner.profile.parent.mkdir(parents=True, exist_ok=True)
            try:
                one = lap(runner, pods, f"race-{pods}" if args.repeat == 1 else f"race-{pods}-{turn}")
            finally:
                runner.end()
            laps.append(one)
            print(table([one]).splitlines()[-1], flush=True)
            if runner.profile is not None:
                pstats.Stats(str(runner.profile)).sort_stats("cumulative").print_stats(40)
            save_laps(args.save, laps)
    report(laps, args)


def report(laps: list[Lap], args: argparse.Namespace) -> None:
    text = table(laps)
    if any(len(group) > 1 for group in groups(laps).values()):
        text += "\n\nMedian (least–greatest) of each size and provisioner's laps:\n\n" + summary(laps)
    print(text)
    plot(laps, Path(args.plot))
    print(f"plot: {args.plot}")
    if args.readme:
        write_readme(text, README_START, README_END)


if __name__ == "__main__":
    main()

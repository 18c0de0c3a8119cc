"""Karpenter and karpui raced on the same real cluster: scale-up to every pod Running, scale-down to the last node
gone, and what each provisioner's process spent doing it. Asserts nothing; prints a table and draws a plot.

Usage: python bench/race.py [--pods 1000,5000] [--provisioners karpenter,kwok] [--kubeconfig FILE] [--readme]
                            [--plot bench/race.png] [--profile DIR]

For each size and provisioner, one at a time from the same empty cluster (hack/kube/cluster.py's control plane,
started here unless --kubeconfig names one): Karpenter's kwok provider v1.15, or karpui's engine in kwok mode
(`manage.py engine`, its own process and database), is started; a NodePool (amd64 on-demand, no limit, a budget
of 100 % so that the budget does not pace the scale-down, consolidateAfter 0s) and a Deployment of one-CPU pods
at 0 replicas are applied; then the Deployment is scaled to N and timed until N replicas are ready (kwok makes a
bound pod Running and Ready), and scaled to 0 and timed until no NodeClaim is left. The provisioner's CPU-seconds
(user + system, its whole process group) and peak RSS (VmHWM) are read from /proc over the whole run. Karpenter's
own CI bar: 1,000 pods out in under 2 minutes at under 260 MB.

--profile DIR runs karpui's engine under cProfile and writes each lap's stats to DIR/kwok-<pods>.prof, printing the
functions with the most cumulative time; the profiler's own cost makes that lap's times and CPU-seconds no figures
to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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


def ready(runner: Real) -> int:
    said = runner.kubectl("get", "deploy", "race", "-o", "jsonpath={.status.readyReplicas}").strip()
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


def lap(runner: Real, pods: int) -> Lap:
    # The reset deletes the last lap's Events too (thousands: a pod's scheduling, a node's registration), which
    # karpui's engine, informing Events, would list, cache and mirror and Karpenter would not.
    runner.cluster.reset()
    runner.start({}, f"race-{pods}")
    runner.apply(MANIFESTS)
    time.sleep(2.0)
    runner.scale("deploy/race", pods)
    started = time.monotonic()
    up = until(runner, lambda: ready(runner) >= pods, started)
    nodes = count(runner, "nodes")
    runner.scale("deploy/race", 0)
    started = time.monotonic()
    down = until(runner, lambda: count(runner, "nodeclaims") == 0, started)
    cpu, rss = peak_usage(runner)
    runner.end()
    return Lap(runner.name, pods, up, down, nodes, cpu, rss)


def peak_usage(runner: Real) -> tuple[float, int]:
    """The provisioner's CPU-seconds and peak RSS over the lap, sampled once more now."""
    runner.sample()
    return max((u[1] for u in runner.usage), default=0.0), max((u[2] for u in runner.usage), default=0)


NAMES = {"karpenter": "Karpenter v1.15 (kwok provider)", "kwok": "karpui (engine, kwok mode)"}


def table(laps: list[Lap]) -> str:
    def secs(value: float | None) -> str:
        return f"{value:.0f}" if value is not None else f"> {LIMIT_SECONDS:.0f}"

    lines = [
        "| pods | provisioner | nodes | scale-up to all Running, s | scale-down to last node gone, s | CPU-s | peak RSS MiB |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for one in laps:
        lines.append(
            f"| {one.pods:,} | {NAMES.get(one.provisioner, one.provisioner)} | {one.nodes} | {secs(one.up_seconds)} | "
            f"{secs(one.down_seconds)} | {one.cpu_seconds:.1f} | {one.peak_rss / 2**20:.0f} |"
        )
    return "\n".join(lines)


def plot(laps: list[Lap], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({one.pods for one in laps})
    provisioners = sorted({one.provisioner for one in laps})
    figure, axes = plt.subplots(1, 4, figsize=(16, 4))
    measures = (
        ("scale-up to all Running (s)", lambda one: one.up_seconds or LIMIT_SECONDS),
        ("scale-down to last node gone (s)", lambda one: one.down_seconds or LIMIT_SECONDS),
        ("provisioner CPU-seconds", lambda one: one.cpu_seconds),
        ("provisioner peak RSS (MiB)", lambda one: one.peak_rss / 2**20),
    )
    width = 0.8 / max(len(provisioners), 1)
    for axis, (title, value) in zip(axes, measures, strict=True):
        for index, name in enumerate(provisioners):
            heights = [next((value(o) for o in laps if o.pods == size and o.provisioner == name), 0) for size in sizes]
            positions = [i + index * width for i in range(len(sizes))]
            axis.bar(positions, heights, width, label=NAMES.get(name, name))
        axis.set_title(title)
        axis.set_xticks([i + width * (len(provisioners) - 1) / 2 for i in range(len(sizes))])
        axis.set_xticklabels([f"{size:,} pods" for size in sizes])
    axes[0].legend(fontsize="small")
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
        Path(path).write_text(json.dumps([vars(one) for one in laps], indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lap_arguments(parser, "1000,5000")
    parser.add_argument("--plot", default=str(ROOT / "bench" / "race.png"))
    parser.add_argument("--profile", help="a folder: karpui's engine runs under cProfile, its stats written there")
    args = parser.parse_args()
    if args.laps:
        laps = [Lap(**one) for path in args.laps.split(",") for one in json.loads(Path(path).read_text())]
        report(sorted(laps, key=lambda one: (one.pods, one.provisioner)), args)
        return
    laps = []
    with laps_cluster(args, "race-") as (folder, handle):
        for pods in (int(p) for p in args.pods.split(",")):
            for name in args.provisioners.split(","):
                runner = Real(handle.cluster, folder, name)
                if args.profile and name == "kwok":
                    runner.profile = Path(args.profile) / f"kwok-{pods}.prof"
                    runner.profile.parent.mkdir(parents=True, exist_ok=True)
                try:
                    one = lap(runner, pods)
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
    print(text)
    plot(laps, Path(args.plot))
    print(f"plot: {args.plot}")
    if args.readme:
        write_readme(text, README_START, README_END)


if __name__ == "__main__":
    main()

"""Karpenter's one-minute cap per scheduling simulation (v1.4) against karpui's, on the same real cluster: N pods
are made pending while no provisioner runs, then the provisioner starts and meets them all in one batch. Asserts
nothing; prints a table.

Usage: python bench/burst.py [--pods 20000] [--shapes identical|mixed] [--provisioners karpenter,kwok]
                             [--kubeconfig FILE] [--save FILE] [--laps FILE,...] [--readme]

The race (bench/race.py) cannot reach the cap: the ReplicaSet controller makes about 18 pods a second, so no batch
there held more than a few hundred pods. Here, for each provisioner, one at a time from the same empty cluster
(hack/kube's control plane, started here unless --kubeconfig names one): the race's NodePool is applied, N pods are
created straight through the API (32 clients at once, no owner; "identical" are the race's 1-CPU pods, "mixed"
draw their requests from 100m-1500m CPU and 100Mi-4Gi memory with a fixed seed, a quarter of them spread over
zones with maxSkew 1), kube-scheduler is left to mark every one unschedulable (only such pods are provisionable,
to both), and only then is the provisioner started (Karpenter's kwok provider at LOG_LEVEL=debug, as
it logs "scheduling simulation timed out" at V(1); karpui's engine in kwok mode logs it at info). Measured: the
first batch as each logs it ("found provisionable pod(s)" with its pods and its simulation's duration, "computed
new nodeclaim(s) to fit pod(s)"), whether any simulation timed out, seconds from the provisioner's start to its
first NodeClaim and to every pod Running, the NodeClaims at the end, and the provisioner's CPU-seconds and peak
RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from race import (  # noqa: E402
    LIMIT_SECONDS,
    NAMES,
    NODEPOOL,
    count,
    lap_arguments,
    laps_cluster,
    peak_usage,
    save_laps,
    until,
)
from versus_karpenter import Real, write_readme  # noqa: E402

from provisioner.cluster.objects import parse_timestamp  # noqa: E402
from provisioner.durations import parse_go_duration  # noqa: E402

README_START = "<!-- burst: start -->"
README_END = "<!-- burst: end -->"
NAMESPACE = "default"
CLIENTS = 32
CPUS = ("100m", "250m", "500m", "1000m", "1500m")
MEMORIES = ("100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi")
ZONE = "topology.kubernetes.io/zone"


@dataclass(frozen=True)
class Lap:
    provisioner: str
    pods: int
    shapes: str
    first_batch_pods: int | None  # "found provisionable pod(s)", the first time it is logged
    first_simulation_seconds: float | None  # that line's duration: the whole simulation
    first_nodeclaims: int | None  # "computed new nodeclaim(s) to fit pod(s)", the first time
    first_scheduled_pods: int | None  # that line's pods: what the first batch placed
    timeouts: int  # "scheduling simulation timed out" lines
    first_nodeclaim_seconds: float | None  # from the provisioner's start to the first's creationTimestamp (1 s)
    running_seconds: float | None  # from the provisioner's start to no pod Pending
    nodeclaims: int
    cpu_seconds: float
    peak_rss: int


def pod_manifests(pods: int, shapes: str) -> list[dict[str, Any]]:
    """The pods, the same for every provisioner (`mixed` draws from a fixed seed)."""
    rng = random.Random(2026)
    made = []
    for index in range(pods):
        labels = {"app": "burst"}
        spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0}
        if shapes == "identical":
            requests = {"cpu": "1", "memory": "256Mi"}
        else:
            requests = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)}
            if index % 4 == 0:
                group = f"spread-{rng.randrange(10)}"
                labels["group"] = group
                spec["topologySpreadConstraints"] = [
                    {
                        "maxSkew": 1,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"group": group}},
                    }
                ]
        spec["containers"] = [
            {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests}}
        ]
        made.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"burst-{index:05d}", "namespace": NAMESPACE, "labels": labels},
                "spec": spec,
            }
        )
    return made


def core_api(kubeconfig: Path) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = CLIENTS
    return client.CoreV1Api(client.ApiClient(configuration))


def create_pods(api: Any, manifests: list[dict[str, Any]]) -> float:
    """Every pod created, CLIENTS requests at a time; the seconds it took."""
    started = time.monotonic()
    with ThreadPoolExecutor(CLIENTS) as pool:
        for _ in pool.map(lambda body: api.create_namespaced_pod(NAMESPACE, body), manifests):
            pass
    return time.monotonic() - started


def unschedulable(api: Any) -> int:
    """Pods kube-scheduler has marked unschedulable (PodScheduled False): only those are provisionable, to Karpenter
    (IsProvisionable) and to karpui alike. Read from the watch cache, and parsed without the client's models."""
    response = api.list_namespaced_pod(NAMESPACE, resource_version="0", _preload_content=False)
    pods = json.loads(response.data)["items"]
    return sum(
        1
        for pod in pods
        if any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in (pod.get("status") or {}).get("conditions") or ()
        )
    )


def wait_unschedulable(api: Any, pods: int) -> float:
    """Seconds until kube-scheduler has marked every pod unschedulable (there are no nodes yet)."""
    started = time.monotonic()
    while unschedulable(api) < pods:
        if time.monotonic() - started > LIMIT_SECONDS:
            raise RuntimeError(f"kube-scheduler had not tried all {pods} pods after {LIMIT_SECONDS:.0f} s")
        time.sleep(5.0)
    return time.monotonic() - started


def all_running(api: Any) -> bool:
    return not api.list_namespaced_pod(NAMESPACE, field_selector="status.phase=Pending", limit=1).items


def logged(path: Path) -> dict[str, Any]:
    """The first batch and the timeouts, as the provisioner's log says them (both log Karpenter's lines)."""
    found: dict[str, Any] = {"timeouts": 0}
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        message = record.get("message") or record.get("msg") or ""
        if message == "found provisionable pod(s)" and "first_batch_pods" not in found:
            named = str(record.get("Pods", ""))
            others = re.search(r"and (\d+) other\(s\)$", named)
            # "a, b, c, d, e and 295 other(s)": the last name shares its part with the others' count
            found["first_batch_pods"] = len(named.split(", ")) + (int(others.group(1)) if others else 0)
            found["first_simulation_seconds"] = parse_go_duration(str(record["duration"]))
        elif message == "computed new nodeclaim(s) to fit pod(s)" and "first_nodeclaims" not in found:
            found["first_nodeclaims"] = int(record["nodeclaims"])
            found["first_scheduled_pods"] = int(record["pods"])
        elif message == "scheduling simulation timed out":
            found["timeouts"] += 1
    return found


def lap(runner: Real, pods: int, shapes: str) -> Lap:
    runner.cluster.reset()
    runner.apply(NODEPOOL)
    api = core_api(runner.cluster.kubeconfig)
    made = create_pods(api, pod_manifests(pods, shapes))
    marked = wait_unschedulable(api, pods)
    print(
        f"{runner.name}: {pods:,} pods created in {made:.0f} s, all unschedulable {marked:.0f} s later",
        file=sys.stderr,
        flush=True,
    )
    env = {"LOG_LEVEL": "debug"} if runner.name == "karpenter" else {}
    started, started_at = time.monotonic(), time.time()
    runner.start(env, f"burst-{shapes}-{pods}")
    running = until(runner, lambda: count(runner, "nodeclaims") and all_running(api), started)
    created = runner.kubectl("get", "nodeclaims", "-o", "jsonpath={.items[*].metadata.creationTimestamp}").split()
    first = min(parse_timestamp(t) for t in created) - started_at if created else None
    nodeclaims = len(created)
    cpu, rss = peak_usage(runner)
    runner.end()  # the pods go with the next lap's reset, by collection
    said = logged(runner.log)
    return Lap(
        runner.name,
        pods,
        shapes,
        said.get("first_batch_pods"),
        said.get("first_simulation_seconds"),
        said.get("first_nodeclaims"),
        said.get("first_scheduled_pods"),
        said["timeouts"],
        first,
        running,
        nodeclaims,
        cpu,
        rss,
    )


def table(laps: list[Lap]) -> str:
    def number(value: float | None, digits: int = 0) -> str:
        return "–" if value is None else f"{value:,.{digits}f}"

    lines = [
        "| pods | shapes | provisioner | first batch: pods | its simulation, s | its NodeClaims / pods placed | "
        "timed out | first NodeClaim, s | all Running, s | NodeClaims | CPU-s | peak RSS MiB |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for one in laps:
        lines.append(
            f"| {one.pods:,} | {one.shapes} | {NAMES.get(one.provisioner, one.provisioner)} | "
            f"{number(one.first_batch_pods)} | {number(one.first_simulation_seconds, 1)} | "
            f"{number(one.first_nodeclaims)} / {number(one.first_scheduled_pods)} | {one.timeouts} | "
            f"{number(one.first_nodeclaim_seconds)} | "
            f"{number(one.running_seconds) if one.running_seconds is not None else f'> {LIMIT_SECONDS:.0f}'} | "
            f"{one.nodeclaims} | {one.cpu_seconds:.1f} | {one.peak_rss / 2**20:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lap_arguments(parser, "20000")
    parser.add_argument("--shapes", default="identical", help="identical or mixed, or both (comma-separated)")
    args = parser.parse_args()
    if args.laps:
        laps = [Lap(**one) for path in args.laps.split(",") for one in json.loads(Path(path).read_text())]
    else:
        laps = run(args)
    text = table(laps)
    print(text)
    if args.readme:
        write_readme(text, README_START, README_END)


def run(args: argparse.Namespace) -> list[Lap]:
    laps: list[Lap] = []
    with laps_cluster(args, "burst-") as (folder, handle):
        for pods in (int(p) for p in args.pods.split(",")):
            for shapes in args.shapes.split(","):
                for name in args.provisioners.split(","):
                    runner = Real(handle.cluster, folder, name)
                    try:
                        laps.append(lap(runner, pods, shapes))
                    finally:
                        runner.end()
                    print(table(laps[-1:]).splitlines()[-1], flush=True)
                    save_laps(args.save, laps)
    return laps


if __name__ == "__main__":
    main()

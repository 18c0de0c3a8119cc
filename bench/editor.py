"""The NodePool editor's speed on a lab like issue 29's walk: prints a table; asserts nothing.

Usage: python bench/editor.py [--pods 2000]
Builds, in a throwaway SQLite database in a temporary directory (KARPUI_VAR_DIR, if set, is used instead), five
NodePools (one with a CPU limit that leaves about a tenth of the pods pending, one spot, one tainted, one arm64,
one weighted), a DaemonSet, and Deployments of one-CPU and half-CPU pods adding up to `--pods`, run until they
settle; then times, in-process with Django's test client (the median of five after one warm-up): opening the
editor, previewing a weight change, previewing a raised limit, and saving.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = Path(os.environ.get("KARPUI_VAR_DIR") or tempfile.mkdtemp(prefix="karpui-bench-editor-"))
os.environ["KARPUI_VAR_DIR"] = str(VAR)
os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"
os.environ["ALLOWED_HOSTS"] = "testserver"
os.environ["DATABASE_URL"] = f"sqlite:///{VAR / 'bench-editor.sqlite3'}"

import django  # noqa: E402

RUNS = 5
POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  {weight}template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity}]}}
        - {{key: kubernetes.io/arch, operator: In, values: [{arch}]}}{taints}
  {limits}disruption: {{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1h}}
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      {selector}containers: [{{name: app, image: pause, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""
DAEMONSET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: agent, image: agent, resources: {requests: {cpu: 100m}}}]
"""


def lab_files(pods: int) -> str:
    pools = [
        POOL.format(name="default", weight="", capacity="on-demand", arch="amd64", taints="", limits=""),
        POOL.format(
            name="capped",
            weight="weight: 10\n  ",
            capacity="on-demand",
            arch="amd64",
            taints="",
            limits=f'limits: {{cpu: "{pods // 4}"}}\n  ',
        ),
        POOL.format(name="batch-spot", weight="", capacity="spot", arch="amd64", taints="", limits=""),
        POOL.format(
            name="gpu",
            weight="",
            capacity="on-demand",
            arch="amd64",
            taints="\n      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]",
            limits="",
        ),
        POOL.format(name="arm", weight="", capacity="on-demand", arch="arm64", taints="", limits=""),
    ]
    deployments = [
        DEPLOYMENT.format(name="web", replicas=pods * 4 // 10, cpu="500m", selector=""),
        DEPLOYMENT.format(
            name="capped-app",
            replicas=pods * 4 // 10,
            cpu="1",
            selector="nodeSelector: {karpenter.sh/nodepool: capped}\n      ",
        ),
        DEPLOYMENT.format(
            name="batch",
            replicas=pods * 2 // 10,
            cpu="250m",
            selector="nodeSelector: {karpenter.sh/nodepool: batch-spot}\n      ",
        ),
    ]
    nodeclass = "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: default}\n"
    return "---\n".join([nodeclass, *pools, DAEMONSET, *deployments])


def build(pods: int) -> None:
    from django.core.management import call_command

    from karpui.clusters import lab

    call_command("migrate", verbosity=0)
    manifest = VAR / "walk.yaml"
    manifest.write_text(lab_files(pods))
    with open(os.devnull, "w") as quiet:
        call_command("karp", "apply", "-f", str(manifest), stdout=quiet)
    for _ in range(12):  # a tick writes at most 2,500 objects: enough advances for every pod to settle
        lab.advance("lab", 30.0)


def measure() -> None:
    from django.contrib.auth.models import User
    from django.test import Client
    from django.test.utils import setup_test_environment

    from karpui import models

    setup_test_environment()  # so the client's responses carry their context (the form's initial values)
    client = Client()
    client.force_login(User.objects.create_superuser("bench", "", "bench-password-not-used"))
    cluster = models.Cluster.objects.get(name="lab")
    pods = models.KubeObject.objects.filter(cluster=cluster, kind="Pod")
    print(
        f"{pods.count()} pods ({pods.filter(unschedulable=True).count()} pending) on "
        f"{models.KubeObject.objects.filter(cluster=cluster, kind='Node').count()} nodes, database in {VAR}"
    )
    form = client.get("/nodepools/capped/").context["form"]
    data = {name: ("" if value is None else value) for name, value in form.initial.items()}
    cases = [
        ("open the editor", "get", {}),
        ("preview a weight change", "post", {"spec.weight": "60", "action": "preview"}),
        ("preview a raised limit", "post", {"spec.limits": "cpu=100000", "action": "preview"}),
    ]
    print(f"{'':<28}{'ms':>8}{'KB':>8}")
    for label, method, change in cases:
        times = []
        for _ in range(RUNS + 1):
            start = time.perf_counter()
            response = (
                client.get("/nodepools/capped/")
                if method == "get"
                else client.post("/nodepools/capped/", {**data, **change})
            )
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200, (label, response.status_code)
        print(f"{label:<28}{statistics.median(times[1:]):>8.0f}{len(response.content) / 1024:>8.1f}")
    start = time.perf_counter()
    saved = client.post("/nodepools/capped/", {**data, "spec.weight": "60", "action": "save"})
    assert saved.status_code == 302, saved.status_code
    print(f"{'save a weight change':<28}{(time.perf_counter() - start) * 1000:>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=2000)
    args = parser.parse_args()
    django.setup()
    build(args.pods)
    measure()


if __name__ == "__main__":
    main()

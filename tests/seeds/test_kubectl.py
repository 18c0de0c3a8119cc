"""The seed experiments through the documents' own kubectl lines, verbatim (taken from the documents' text by
tests/seeds/conftest.py), asserting what tests/fixtures/seeds/README.md lists and what the documents print."""

from __future__ import annotations

import json
import re

import pytest

from tests.seeds import SEEDS, SETUP
from tests.seeds.conftest import Shell, document

# Each test reads what its experiment's transcript printed; the mark makes pytest-django set up the test database
# the module-scoped transcript runs on (tests/seeds/conftest.py).
pytestmark = pytest.mark.django_db

DOC = document("000")
SEEDS_EXP2_NODES = str(SEEDS / "exp2-nodes.yaml")


def lab_apply(path: str, cluster: str = "karpenter-lab") -> None:
    """Set-up the lab stands in for (`kind create cluster`, an image rebuilt with a patch)."""
    from tests.karp import ok

    ok("--cluster", cluster, "apply", "-f", path)


def test_the_seed_manifests_are_the_documents_own() -> None:
    """tests/fixtures/seeds holds the documents' manifests unchanged (experiment 3's four files in two)."""
    for name in ("exp1-nodepool.yaml", "exp1-inflate.yaml", "exp2-cpu-only.yaml", "exp2-gpu-work.yaml"):
        assert DOC.manifest(name) == (SEEDS / name).read_text()
    assert (
        DOC.manifest("exp3-00-deviceclass.yaml") + "---\n" + DOC.manifest("exp3-03-draconfig.yaml")
        == (SEEDS / "exp3-dra.yaml").read_text()
    )
    assert DOC.manifest("exp3-01-dra-test.yaml") == (SEEDS / "exp3-dra-test.yaml").read_text()


# 000, experiment 1 --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exp1(shell: Shell) -> dict[str, str]:
    said: dict[str, str] = {}
    said["use-context"] = shell.run(DOC.line("kubectl config use-context kind-karpenter-lab"))
    said["taint"] = shell.run(DOC.line("kubectl taint node karpenter-lab-control-plane"))
    said["rollout status"] = shell.run(DOC.line("kubectl -n kube-system rollout status deploy/karpenter"))
    said["karpenter pods"] = shell.run(DOC.line("kubectl -n kube-system get pods -l app.kubernetes.io/name=karpenter"))
    said["apply"] = shell.run(DOC.line("kubectl apply -f exp1-nodepool.yaml -f exp1-inflate.yaml"))
    said["get nodes"] = shell.run(DOC.line("kubectl get nodes", 0))
    said["get nodeclaim"] = shell.run(DOC.line("kubectl get nodeclaim", 0))
    said["scale up"] = shell.run(DOC.line("kubectl scale deploy inflate --replicas=5"))
    said["samples"] = shell.run(DOC.block("t0=$(date +%s)", 0))
    said["nodeclaim columns"] = shell.run(DOC.line("kubectl get nodeclaim -o custom-columns=", 0))
    said["node columns"] = shell.run(DOC.line("kubectl get nodes -o custom-columns="))
    said["created log"] = shell.run(DOC.line('kubectl -n kube-system logs deploy/karpenter --tail=100 | grep "created'))
    said["scale down"] = shell.run(DOC.line("kubectl scale deploy inflate --replicas=0"))
    said["until gone"] = shell.run(DOC.block("t0=$(date +%s)", 1))
    said["disruption log"] = shell.run(DOC.line("kubectl -n kube-system logs deploy/karpenter --tail=200 | grep -iE"))
    said["disrupting json"] = shell.run(DOC.line('kubectl -n kube-system logs deploy/karpenter --tail=200 | grep "dis'))
    return said


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_000_exp1_the_control_plane_is_tainted_and_the_lines_run_as_written(exp1: dict[str, str]) -> None:
    assert exp1["use-context"] == 'Switched to context "kind-karpenter-lab".\n'
    assert exp1["taint"] == "node/karpenter-lab-control-plane modified\n"
    assert exp1["apply"] == (
        "nodepool.karpenter.sh/default created\n"
        "kwoknodeclass.karpenter.kwok.sh/default created\n"
        "deployment.apps/inflate created\n"
    )


def test_000_exp1_get_nodes_shows_only_the_control_plane_and_no_nodeclaim_exists(exp1: dict[str, str]) -> None:
    [header, node] = rows(exp1["get nodes"])
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert node[:3] == ["karpenter-lab-control-plane", "Ready", "control-plane"]
    assert exp1["get nodeclaim"] == "No resources found\n"


SAMPLE = re.compile(r"^ *(\d+)s  nodeclaim=(\d+) +節點=(\d+) +pods\( (.*)\)$")


def test_000_exp1_the_first_sample_is_5_pending_and_within_5s_one_nodeclaim_runs_them(exp1: dict[str, str]) -> None:
    """The sampling loop, verbatim; its node column needs kwok's node names (the next test)."""
    assert exp1["scale up"] == "deployment.apps/inflate scaled\n"
    samples = [SAMPLE.match(line) for line in exp1["samples"].splitlines()]
    assert all(samples), exp1["samples"]
    seen = [(int(m[1]), int(m[2]), m[4].strip()) for m in samples if m]
    assert seen == [(0, 0, "5 Pending")] + [(t, 1, "5 Running") for t in range(5, 50, 5)]


def test_000_exp1_the_samples_print_as_the_document_does(exp1: dict[str, str]) -> None:
    assert exp1["samples"].splitlines() == ["  0s  nodeclaim=0  節點=0  pods( 5 Pending )"] + [
        f"{t:3d}s  nodeclaim=1  節點=1  pods( 5 Running )" for t in range(5, 50, 5)
    ]


def test_000_exp1_the_nodeclaim_is_an_on_demand_c8x_and_ready(exp1: dict[str, str]) -> None:
    [header, claim] = rows(exp1["nodeclaim columns"])
    assert header == ["NAME", "TYPE", "CAPACITY", "ZONE", "READY"]
    assert claim[1:3] == ["c-8x-amd64-linux", "on-demand"] and claim[4] == "True"
    assert re.fullmatch(r"default-[a-z0-9]{5}", claim[0]) and re.fullmatch(r"test-zone-[a-d]", claim[3])


def test_000_exp1_the_kwok_node_has_7900m_and_16374mi(exp1: dict[str, str]) -> None:
    [[name, cpu, memory]] = rows(exp1["node columns"])
    assert name.startswith("kwok-default-") and (cpu, memory) == ("7900m", "16374Mi")


def test_000_exp1_the_created_nodeclaim_log_shows_its_requests_and_types(exp1: dict[str, str]) -> None:
    assert exp1["created log"] == (
        '    "requests": {\n'
        '        "cpu": "5",\n'
        '        "pods": "5"\n'
        '    "instance-types": "c-128x-amd64-linux, c-128x-amd64-windows, c-16x-amd64-linux, c-16x-amd64-windows, '
        'c-192x-amd64-linux and 49 other(s)"\n'
    )


UNTIL = re.compile(r"^ *(\d+)s  nodeclaim=(\d+) +節點=(\d+)$")


def test_000_exp1_scaled_to_0_the_nodeclaim_goes_between_31_and_36_seconds(exp1: dict[str, str]) -> None:
    assert exp1["scale down"] == "deployment.apps/inflate scaled\n"
    samples = [UNTIL.match(line) for line in exp1["until gone"].splitlines()]
    assert all(samples), exp1["until gone"]
    seen = [(int(m[1]), int(m[2])) for m in samples if m]
    assert seen == [(t, 1) for t in range(0, 35, 5)] + [(35, 0)]  # there at 30 s, gone by 35 s


def test_000_exp1_scaled_to_0_the_samples_print_as_the_document_does(exp1: dict[str, str]) -> None:
    assert exp1["until gone"].splitlines() == [f"{t:3d}s  nodeclaim=1  節點=1" for t in range(0, 35, 5)] + [
        " 35s  nodeclaim=0  節點=0"
    ]


def test_000_exp1_the_log_shows_the_decision_the_taint_and_the_deletion_6s_apart(exp1: dict[str, str]) -> None:
    records = [json.loads(line) for line in exp1["disruption log"].splitlines()]
    assert [r["message"] for r in records] == ["disrupting node(s)", "tainted node", "deleted nodeclaim"]
    from provisioner.cluster.objects import parse_timestamp

    decided, _, deleted = (parse_timestamp(r["time"]) for r in records)
    assert 5 <= deleted - decided <= 7
    fields = exp1["disrupting json"]
    assert re.search(
        r'"command": "Empty/[^:]+: delete: nodepools=\[default\]: \[kwok-default-.+\] \(savings: \$0\.22\)"', fields
    )
    for line in (
        '"decision": "delete",',
        '"disrupted-node-count": 1,',
        '"replacement-node-count": 0,',
        '"pod-count": 0,',
        '"instance-type": "c-8x-amd64-linux"',
    ):
        assert line in fields


def test_000_exp1_karpenter_runs_as_a_deployment_in_kube_system(exp1: dict[str, str]) -> None:
    assert exp1["rollout status"] == 'deployment "karpenter" successfully rolled out\n'
    [header, pod] = rows(exp1["karpenter pods"])
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert pod[0].startswith("karpenter-") and pod[1:4] == ["1/1", "Running", "0"]


# 000, experiment 2 --------------------------------------------------------------------------------------------------

COUNTS = "kubectl $K -n nodepool get pods -o jsonpath='{range .items[*]}{.spec.nodeName}"


@pytest.fixture(scope="module")
def exp2(shell: Shell) -> dict[str, str]:
    said: dict[str, str] = {}
    lab_apply(SEEDS_EXP2_NODES, cluster="taint-lab")  # kind create cluster --config kind-taint.yaml
    k = DOC.line('K="--context kind-taint-lab"')  # the document's own variable, set once for what follows
    said["get nodes"] = shell.run(DOC.line("kubectl --context kind-taint-lab get nodes"))
    said["apply"] = shell.run(DOC.block('K="--context kind-taint-lab"'))
    said["counts"] = shell.run(DOC.line(COUNTS, 0), prelude=k)
    said["taint"] = shell.run(DOC.line("kubectl $K taint node taint-lab-worker"), prelude=k)
    said["taints"] = shell.run(DOC.line("kubectl $K get node taint-lab-worker -o jsonpath="), prelude=k)
    said["counts tainted"] = shell.run(DOC.line(COUNTS, 1), prelude=k)
    said["restart"] = shell.run(DOC.block("kubectl $K -n nodepool rollout restart deploy cpu-only"), prelude=k)
    said["counts restarted"] = shell.run(DOC.line(COUNTS, 2), prelude=k)
    said["gpu-work"] = shell.run(DOC.line("kubectl $K apply -f exp2-gpu-work.yaml"), prelude=k)
    said["placement"] = shell.run(DOC.line("kubectl $K -n nodepool get pods -o wide --no-headers | awk"), prelude=k)
    return said


def test_000_exp2_the_two_workers_share_four_pods_two_and_two(exp2: dict[str, str]) -> None:
    table = rows(exp2["get nodes"])
    assert table[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [row[:3] for row in table[1:]] == [
        ["taint-lab-control-plane", "Ready", "control-plane"],
        ["taint-lab-worker", "Ready", "<none>"],
        ["taint-lab-worker2", "Ready", "<none>"],
    ]
    assert exp2["apply"] == (
        'namespace/nodepool created\ndeployment.apps/cpu-only created\ndeployment "cpu-only" successfully rolled out\n'
    )
    assert exp2["counts"] == "      2 taint-lab-worker\n      2 taint-lab-worker2\n"


def test_000_exp2_a_noschedule_taint_shows_as_written_and_moves_no_pod(exp2: dict[str, str]) -> None:
    assert exp2["taint"] == "node/taint-lab-worker modified\n"
    assert exp2["taints"] == '[{"effect":"NoSchedule","key":"nvidia.com/gpu","value":"present"}]'
    assert exp2["counts tainted"] == "      2 taint-lab-worker\n      2 taint-lab-worker2\n"


def test_000_exp2_pods_made_again_all_go_to_worker2_and_tolerating_ones_to_the_tainted_worker(
    exp2: dict[str, str],
) -> None:
    assert exp2["restart"] == ('deployment.apps/cpu-only restarted\ndeployment "cpu-only" successfully rolled out\n')
    assert exp2["counts restarted"] == "      4 taint-lab-worker2\n"
    assert exp2["gpu-work"] == "deployment.apps/gpu-work created\n"
    placed = [line.split() for line in exp2["placement"].splitlines()]
    assert [node for _, node in placed] == ["taint-lab-worker2"] * 4 + ["taint-lab-worker"] * 2
    assert all(re.fullmatch(r"cpu-only-[a-z0-9]+-[a-z0-9]{5}", name) for name, _ in placed[:4])
    assert all(re.fullmatch(r"gpu-work-[a-z0-9]+-[a-z0-9]{5}", name) for name, _ in placed[4:])
    assert all(len(line) == 28 + 1 + len(line.split()[1]) for line in exp2["placement"].splitlines())


# 000, experiment 3 --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exp3(shell: Shell) -> dict[str, str]:
    from karpui.clusters import lab

    said: dict[str, str] = {}
    shell.run(DOC.line("kubectl taint node karpenter-lab-control-plane"))
    shell.run(DOC.line("kubectl apply -f exp1-nodepool.yaml -f exp1-inflate.yaml"))
    for name in (
        "exp3-00-deviceclass.yaml",
        "exp3-01-dra-test.yaml",
        "exp3-02-dra-rbac.yaml",
        "exp3-03-draconfig.yaml",
    ):
        (shell.cwd / name).write_text(DOC.manifest(name))
    said["set env"] = shell.run(DOC.line("kubectl -n kube-system set env deploy/karpenter IGNORE_DRA_REQUESTS=false"))
    said["resource rules"] = shell.run(DOC.block("kubectl get clusterrole karpenter -o json | python3 -c"))
    said["rbac"] = shell.run(DOC.block("kubectl apply -f exp3-02-dra-rbac.yaml"))
    lab_apply(str(SETUP / "exp3-kwok-dynamicresources.yaml"))  # git apply the patch, docker build, kind load
    said["set image"] = shell.run(DOC.block("kubectl -n kube-system set image deploy/karpenter"))
    said["draconfig"] = shell.run(DOC.line("kubectl apply -f exp3-03-draconfig.yaml"))
    said["apply"] = shell.run(DOC.line("kubectl apply -f exp3-00-deviceclass.yaml -f exp3-01-dra-test.yaml"))
    lab.advance("karpenter-lab", 60)  # the reader waits for the pods to run, then looks
    said["created logs"] = shell.run(DOC.block('kubectl -n kube-system logs deploy/karpenter --tail=300 | grep "c'))
    said["nodeclaim columns"] = shell.run(DOC.line("kubectl get nodeclaim -o custom-columns=", 1))
    said["slices"] = shell.run(DOC.line("kubectl get resourceslice -o custom-columns="))
    said["claim states"] = shell.run(DOC.line("kubectl get resourceclaim --no-headers | awk"))
    said["allocations"] = shell.run(DOC.line("kubectl get resourceclaim -o jsonpath="))
    said["pods"] = shell.run(DOC.line("kubectl get pod -l app=dra-test -o wide --no-headers | awk"))
    said["delete"] = shell.run(DOC.block("kubectl delete -f exp3-01-dra-test.yaml", 0))
    said["from zero"] = shell.run(DOC.line("printf '節點=%s  slice=%s"))
    said["again"] = shell.run(DOC.line("kubectl apply -f exp3-01-dra-test.yaml"))
    said["samples"] = shell.run(DOC.block("t0=$(date +%s)", 2))
    said["cleanup"] = shell.run(DOC.line("kubectl delete -f exp3-01-dra-test.yaml -f exp3-03-draconfig.yaml"))
    said["cleanup rbac"] = shell.run(DOC.line("kubectl delete -f exp3-00-deviceclass.yaml -f exp3-02-dra-rbac.yaml"))
    return said


def test_000_exp3_the_dra_objects_apply_as_written(exp3: dict[str, str]) -> None:
    assert exp3["draconfig"] == "draconfig.test.karpenter.sh/fake-gpu created\n"
    assert exp3["apply"] == (
        "deviceclass.resource.k8s.io/gpu.example.com created\n"
        "resourceclaimtemplate.resource.k8s.io/one-fake-gpu created\n"
        "deployment.apps/dra-test created\n"
    )


def test_000_exp3_two_pods_each_claiming_the_one_gpu_get_an_m1x_nodeclaim_each(exp3: dict[str, str]) -> None:
    [header, *claims] = rows(exp3["nodeclaim columns"])
    assert header == ["NAME", "TYPE", "ZONE", "READY"]
    assert [(c[1], c[3]) for c in claims] == [("m-1x-amd64-linux", "True")] * 2


def test_000_exp3_each_node_publishes_one_slice_and_each_claim_holds_its_own_nodes_gpu0(
    exp3: dict[str, str],
) -> None:
    [header, *slices] = rows(exp3["slices"])
    assert header == ["DRIVER", "NODE", "DEVICES"]
    assert [(s[0], s[2]) for s in slices] == [("gpu.example.com", "gpu-0")] * 2
    nodes = sorted(s[1] for s in slices)
    assert len(set(nodes)) == 2
    assert exp3["claim states"] == "      2 allocated,reserved\n"
    allocation = exp3["allocations"].splitlines()
    assert len(allocation) == 4 and all(
        re.fullmatch(r"dra-test-[a-z0-9]+-[a-z0-9]{5}-gpu-[a-z0-9]{5}", allocation[i]) for i in (0, 2)
    )
    assert sorted(allocation[i] for i in (1, 3)) == [
        f"  driver=gpu.example.com  pool=gpu.example.com/{node}  device=gpu-0" for node in nodes
    ]
    pods = [line.split() for line in exp3["pods"].splitlines()]
    assert [p[1] for p in pods] == ["Running", "Running"] and sorted(p[2] for p in pods) == nodes


SAMPLE3 = re.compile(r"^ *(\d+)s  nodeclaim=(\d+) +節點=(\d+) +slice=(\d+) +claim=(\S*) +pod=(.*)$")


def test_000_exp3_from_zero_the_nodes_come_first_and_their_devices_after(exp3: dict[str, str]) -> None:
    assert exp3["delete"] == 'deployment.apps "dra-test" deleted\n'
    assert exp3["from zero"] == "節點=0  slice=0\n"
    assert exp3["again"] == "deployment.apps/dra-test created\n"
    samples = [SAMPLE3.match(line) for line in exp3["samples"].splitlines()]
    assert len(samples) == 14 and all(samples), exp3["samples"]
    seen = [(int(m[1]), int(m[2]), int(m[4]), m[5], m[6].strip()) for m in samples if m]
    assert seen[0] == (0, 0, 0, "pending,", "2 Pending")
    assert seen[1] == (5, 2, 0, "pending,", "2 Pending")  # the nodes exist, their devices do not yet
    published = next(i for i, s in enumerate(seen) if s[2])
    assert all(s[1:] == (2, 0, "pending,", "2 Pending") for s in seen[1:published])
    assert all(s[1:] == (2, 2, "allocated,reserved,", "2 Running") for s in seen[published:])
    assert published <= 7  # the driver publishes every 30 s


def test_000_exp3_dra_is_switched_on_through_karpenters_deployment_and_its_logs_show_24_types(
    exp3: dict[str, str],
) -> None:
    assert exp3["set env"] == "deployment.apps/karpenter env updated\n"
    assert exp3["resource rules"] == "0\n"
    assert exp3["rbac"] == (
        "clusterrole.rbac.authorization.k8s.io/karpenter-dra created\n"
        "clusterrolebinding.rbac.authorization.k8s.io/karpenter-dra created\n"
        "deployment.apps/karpenter restarted\n"
    )
    assert exp3["set image"].endswith('deployment "karpenter" successfully rolled out\n')
    lines = exp3["created logs"].splitlines()
    assert len(lines) == 6
    for i in (1, 4):
        assert lines[i] == "   requests       = {'cpu': '10m', 'pods': '1'}"
        assert lines[i + 1] == (
            "   instance-types = m-128x-amd64-linux, m-128x-amd64-windows, m-16x-amd64-linux, m-16x-amd64-windows, "
            "m-192x-amd64-linux and 19 other(s)"
        )
    assert exp3["cleanup rbac"] == (
        'deviceclass.resource.k8s.io "gpu.example.com" deleted\n'
        'resourceclaimtemplate.resource.k8s.io "one-fake-gpu" deleted\n'
        'clusterrole.rbac.authorization.k8s.io "karpenter-dra" deleted\n'
        'clusterrolebinding.rbac.authorization.k8s.io "karpenter-dra" deleted\n'
    )


def test_000_exp3_the_nodes_are_counted_by_the_kwok_in_their_names(exp3: dict[str, str]) -> None:
    assert all(p.split()[2].startswith("kwok-default-") for p in exp3["pods"].splitlines())
    samples = [SAMPLE3.match(line) for line in exp3["samples"].splitlines()]
    assert all(m and m[2] == m[3] for m in samples)


def test_000_exp3_cleaning_up_deletes_what_was_applied(exp3: dict[str, str]) -> None:
    assert exp3["cleanup"] == ('deployment.apps "dra-test" deleted\ndraconfig.test.karpenter.sh "fake-gpu" deleted\n')


# 004 ----------------------------------------------------------------------------------------------------------------

DOC4 = document("004")


def lab_state() -> dict[str, object]:
    """What the document's screenshots show, read from the lab: nodes by instance type and their pods."""
    from karpui import models

    claims = {
        row.body["status"].get("nodeName"): row.body["metadata"]["labels"]["node.kubernetes.io/instance-type"]
        for row in models.KubeObject.objects.filter(kind="NodeClaim")
    }
    pods: dict[str, int] = {}
    for row in models.KubeObject.objects.filter(kind="Pod", namespace="default"):
        pods[row.body["spec"].get("nodeName", "")] = pods.get(row.body["spec"].get("nodeName", ""), 0) + 1
    return {"types": sorted(claims.values()), "pods": sorted(pods.get(node, 0) for node in claims)}


@pytest.fixture(scope="module")
def s004(shell: Shell) -> dict[str, object]:
    """Seed 004 after seed 000's experiment 1, whose KWOKNodeClass "default" it leaves in place."""
    from karpui.clusters import lab

    said: dict[str, object] = {}
    shell.run(DOC.line("kubectl taint node karpenter-lab-control-plane"))
    shell.run(DOC.line("kubectl apply -f exp1-nodepool.yaml -f exp1-inflate.yaml"))
    said["clean up"] = shell.run(DOC4.block("kubectl delete deployment"))
    cd = DOC4.line("cd ~/environment/karpenter")
    shell.run(DOC4.line("mkdir -p ~/environment/karpenter"))
    said["nodepool"] = shell.run(
        DOC4.block("cat <<EoF> spottospot.yaml") + "\n" + DOC4.line("kubectl apply -f spottospot.yaml"), prelude=cd
    )
    said["spottospot.yaml"] = (shell.home / "environment" / "karpenter" / "spottospot.yaml").read_text()
    said["deployment"] = shell.run(
        DOC4.block("cat <<EoF> spot-consolidation.yaml") + "\n" + DOC4.line("kubectl apply -f spot-consolidation.yaml"),
        prelude=cd,
    )
    said["spot-consolidation.yaml"] = (shell.home / "environment" / "karpenter" / "spot-consolidation.yaml").read_text()
    lab.advance("karpenter-lab", 30)
    said["eight"] = lab_state()
    said["scale 4"] = shell.run(DOC4.line("kubectl scale deployment inflate --replicas 4"))
    said["split"] = lab_state()
    lab.advance("karpenter-lab", 60)
    said["consolidated"] = lab_state()
    said["logs"] = shell.run(DOC4.line("kubectl -n karpenter logs -l app.kubernetes.io/name=karpenter"))
    said["scale 3"] = shell.run(DOC4.line("kubectl scale deployment inflate --replicas 3"))
    lab.advance("karpenter-lab", 600)
    said["three"] = lab_state()
    said["delete"] = shell.run(DOC4.block("cd ~/environment/karpenter", 2))
    return said


def test_004_its_here_documents_write_the_seed_manifests(s004: dict[str, object]) -> None:
    assert s004["spottospot.yaml"] == (SEEDS / "spottospot.yaml").read_text()
    assert s004["spot-consolidation.yaml"] == (SEEDS / "spot-consolidation.yaml").read_text()


def test_004_the_previous_experiments_objects_are_deleted_as_written(s004: dict[str, object]) -> None:
    assert s004["clean up"] == (
        'deployment.apps "inflate" deleted\n'
        'nodepool.karpenter.sh "default" deleted\n'
        'Error from server (NotFound): ec2nodeclasses.karpenter.k8s.aws "default" not found\n'
    )


def test_004_eight_spot_pods_get_a_2xlarge_and_a_large_of_the_ec2nodeclass(s004: dict[str, object]) -> None:
    assert s004["nodepool"] == "nodepool.karpenter.sh/default created\nec2nodeclass.karpenter.k8s.aws/default created\n"
    assert s004["deployment"] == "deployment.apps/inflate created\n"
    assert s004["eight"] == {"types": ["c5.2xlarge", "c5.large"], "pods": [1, 7]}


def test_004_scaled_to_4_the_pods_split_3_to_1_and_the_large_node_goes(s004: dict[str, object]) -> None:
    assert s004["scale 4"] == "deployment.apps/inflate scaled\n"
    assert s004["split"] == {"types": ["c5.2xlarge", "c5.large"], "pods": [1, 3]}
    assert s004["consolidated"] == {"types": ["c5.2xlarge"], "pods": [4]}


def test_004_scaled_to_3_the_spot_2xlarge_is_not_replaced(s004: dict[str, object]) -> None:
    assert s004["scale 3"] == "deployment.apps/inflate scaled\n"
    assert s004["three"] == {"types": ["c5.2xlarge"], "pods": [3]}


def test_004_cleaning_up_deletes_the_nodepool_the_nodeclass_and_the_deployment(s004: dict[str, object]) -> None:
    assert s004["delete"] == (
        'nodepool.karpenter.sh "default" deleted\n'
        'ec2nodeclass.karpenter.k8s.aws "default" deleted\n'
        'deployment.apps "inflate" deleted\n'
    )


def test_004_karpenters_log_says_it_deleted_the_large_node_by_consolidation(s004: dict[str, object]) -> None:
    logs = str(s004["logs"])
    assert "disrupting via consolidation delete" in logs and "terminating 1 nodes" in logs

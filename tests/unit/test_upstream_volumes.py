"""Karpenter's volume topology tests ported to karpui's engine: a pod's bound PV or its StorageClass decides which
zones (or other labels) its node may have, without changing how topology spread counts the pod.

Ported from sigs.k8s.io/karpenter@v1.15.0 pkg/controllers/provisioning/suite_test.go (Context "Volume Topology
Requirements", lines 1987-2386), pkg/controllers/provisioning/scheduling/suite_test.go (lines 3289-3445) and
topology_test.go (Describe "Topology with Volume Requirements"). Each test names the upstream It it follows. A pod's
volume alternatives are read from PVC, PV and StorageClass objects by provisioner.volumes, as the provisioning
controller reads them; `Cluster.provision` plays ExpectProvisioned (see test_upstream_topology).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from provisioner.cluster.memory import ObjectStore
from provisioner.controllers.snapshot import cluster_view
from provisioner.disruption.consolidation import ClusterView, simulate
from provisioner.disruption.types import Candidate
from provisioner.pods import Pod
from provisioner.requirements import Requirements
from provisioner.scheduling.scheduler import PoolOffer
from provisioner.volumes import merge_alternatives, pod_volumes, requirement_alternatives, validation_error
from tests.builders import CAPACITY_TYPE, HOSTNAME, ZONE, fake_catalog, instance_type, node, nodepool, pod, r, req
from tests.lab_builders import lab, nodepool_doc
from tests.unit.test_upstream_disruption import nc
from tests.unit.test_upstream_scheduling_b import unschedulable_pod
from tests.unit.test_upstream_topology import LABELS, Cluster, anti, default_pool, pods, tsc

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
EXOTIC = "special"  # fake.ExoticInstanceLabelKey


# Builders of the objects Karpenter's test package makes ------------------------------------------------------------


def storage_class(name: str = "default-storage-class", *terms: dict[str, list[str]], **options: Any) -> dict[str, Any]:
    """test.StorageClass: WaitForFirstConsumer unless `binding` says otherwise; each term one allowedTopologies term."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": options.get("provisioner", "test-provisioner"),
        "volumeBindingMode": options.get("binding", "WaitForFirstConsumer"),
        "allowedTopologies": [
            {"matchLabelExpressions": [{"key": key, "values": values} for key, values in term.items()]}
            for term in terms
        ],
    }


def persistent_volume(
    name: str = "test-pv", *terms: list[dict[str, Any]], local: bool = False, host_path: bool = False
) -> dict[str, Any]:
    """test.PersistentVolume: each term one required node selector term (its expressions ANDed)."""
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    if local:
        spec["local"] = {"path": "/mnt/local-disks"}
    elif host_path:
        spec["hostPath"] = {"path": "/mnt/host"}
    else:
        spec["csi"] = {"driver": "test-driver", "volumeHandle": name}
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def zones(*values: str) -> list[dict[str, Any]]:
    return [{"key": ZONE, "operator": "In", "values": list(values)}]


def hostname(value: str) -> list[dict[str, Any]]:
    return [{"key": HOSTNAME, "operator": "In", "values": [value]}]


def claim(name: str = "test-pvc", *, storage_class_name: str | None = None, volume_name: str = "") -> dict[str, Any]:
    """test.PersistentVolumeClaim: one naming a volume is bound (and carries bind-completed)."""
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume_name:
        spec["volumeName"] = volume_name
        metadata["annotations"] = {BIND_COMPLETED: "yes"}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Bound" if volume_name else "Pending"},
    }


def with_claims(p: Pod, objects: list[dict[str, Any]], *claims: str, ephemeral: bool = False) -> Pod:
    """The pod using `claims` (or, `ephemeral`, one ephemeral volume whose PVC is <pod>-tmp-ephemeral), its volume
    alternatives and its PVCs by CSI driver read from `objects` as the provisioning controller reads them; it must
    pass validation."""
    volumes: list[dict[str, Any]] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    if ephemeral:
        volumes.append({"name": "tmp-ephemeral", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    store = ObjectStore(clock=lambda: 0.0)
    for obj in objects:
        store.create(obj)
    manifest = {"metadata": {"name": p.name, "namespace": p.namespace}, "spec": {"volumes": volumes}}
    assert validation_error(store, manifest) is None
    return replace(
        p, volume_requirements=requirement_alternatives(store, manifest), csi_volumes=pod_volumes(store, manifest)
    )


def scheduled_zone(cluster: Cluster, p: Pod) -> str | None:
    placed = cluster.node_of(p)
    return None if placed is None else placed.labels.get(ZONE)


# suite_test.go, Context("Volume Topology Requirements") ---------------------------------------------------------------

# BeforeEach: a WaitForFirstConsumer StorageClass offering test-zone-2 and test-zone-3.
ZONES_2_3 = storage_class("default-storage-class", {ZONE: ["test-zone-2", "test-zone-3"]})
ZONE_1_OR_3 = [r(ZONE, "In", "test-zone-1", "test-zone-3")]


@pytest.mark.parametrize("ephemeral", [False, True], ids=["pvc", "ephemeral volume"])
def test_should_schedule_to_storage_class_zones_if_volume_does_not_exist(ephemeral: bool) -> None:
    """ "should schedule to storage class zones if volume does not exist" (and its ephemeral volume twin)."""
    p = pod(name="web", required=[ZONE_1_OR_3])
    made = claim("web-tmp-ephemeral" if ephemeral else "test-pvc", storage_class_name="default-storage-class")
    p = with_claims(p, [ZONES_2_3, made], *(() if ephemeral else ("test-pvc",)), ephemeral=ephemeral)
    cluster = Cluster()
    cluster.provision([p])
    assert scheduled_zone(cluster, p) == "test-zone-3"


@pytest.mark.parametrize("ephemeral", [False, True], ids=["pvc", "ephemeral volume"])
def test_should_not_schedule_if_storage_class_zones_are_incompatible(ephemeral: bool) -> None:
    """ "should not schedule if storage class zones are incompatible" (and its ephemeral volume twin)."""
    p = pod(name="web", required=[[r(ZONE, "In", "test-zone-1")]])
    made = claim("web-tmp-ephemeral" if ephemeral else "test-pvc", storage_class_name="default-storage-class")
    p = with_claims(p, [ZONES_2_3, made], *(() if ephemeral else ("test-pvc",)), ephemeral=ephemeral)
    cluster = Cluster()
    result = cluster.provision([p])
    assert scheduled_zone(cluster, p) is None
    assert "incompatible volume requirements" in result.failures[p.id].message


@pytest.mark.parametrize("ephemeral", [False, True], ids=["pvc", "ephemeral volume"])
def test_should_schedule_to_volume_zones_if_volume_already_bound(ephemeral: bool) -> None:
    """ "should schedule to volume zones if volume already bound" (and its ephemeral volume twin)."""
    p = pod(name="web")
    name = "web-tmp-ephemeral" if ephemeral else "test-pvc"
    objects = [
        ZONES_2_3,
        persistent_volume("test-pv", zones("test-zone-3")),
        claim(name, storage_class_name="default-storage-class", volume_name="test-pv"),
    ]
    p = with_claims(p, objects, *(() if ephemeral else (name,)), ephemeral=ephemeral)
    cluster = Cluster()
    cluster.provision([p])
    assert scheduled_zone(cluster, p) == "test-zone-3"


@pytest.mark.parametrize("ephemeral", [False, True], ids=["pvc", "ephemeral volume"])
@pytest.mark.parametrize("kind", ["local", "hostPath"])
def test_should_ignore_hostname_affinity_scheduling_when_using_local_path_volumes(kind: str, ephemeral: bool) -> None:
    """ "should ignore hostname affinity scheduling when using local path volumes" (both entries, and the ephemeral
    volume table): a new node cannot be the PV's old host, so that affinity is dropped."""
    p = pod(name="web")
    name = "web-tmp-ephemeral" if ephemeral else "test-pvc"
    objects = [
        storage_class("local-path", provisioner="kubernetes.io/no-provisioner"),
        persistent_volume("test-pv", hostname("some-old-node"), local=kind == "local", host_path=kind == "hostPath"),
        claim(name, storage_class_name="local-path", volume_name="test-pv"),
    ]
    p = with_claims(p, objects, *(() if ephemeral else (name,)), ephemeral=ephemeral)
    cluster = Cluster()
    cluster.provision([p])
    assert cluster.node_of(p) is not None


def test_should_not_ignore_hostname_affinity_when_using_non_local_path_volumes() -> None:
    """ "should not ignore hostname affinity when using non-local path volumes"."""
    objects = [
        ZONES_2_3,
        persistent_volume("test-pv", hostname("some-old-node")),
        claim(storage_class_name="default-storage-class", volume_name="test-pv"),
    ]
    p = with_claims(pod(name="web"), objects, "test-pvc")
    cluster = Cluster()
    cluster.provision([p])
    assert cluster.node_of(p) is None


@pytest.mark.parametrize("ephemeral", [False, True], ids=["pvc", "ephemeral volume"])
def test_should_not_schedule_if_volume_zones_are_incompatible(ephemeral: bool) -> None:
    """ "should not schedule if volume zones are incompatible" (and its ephemeral volume twin)."""
    p = pod(name="web", required=[[r(ZONE, "In", "test-zone-1")]])
    name = "web-tmp-ephemeral" if ephemeral else "test-pvc"
    objects = [
        ZONES_2_3,
        persistent_volume("test-pv", zones("test-zone-3")),
        claim(name, storage_class_name="default-storage-class", volume_name="test-pv"),
    ]
    p = with_claims(p, objects, *(() if ephemeral else (name,)), ephemeral=ephemeral)
    cluster = Cluster()
    cluster.provision([p])
    assert cluster.node_of(p) is None


def test_should_not_relax_an_added_volume_topology_zone_node_selector_away() -> None:
    """ "should not relax an added volume topology zone node-selector away": the first required term cannot be met
    and is relaxed; the volume's zone is no term of the pod's, so it stays."""
    objects = [
        ZONES_2_3,
        persistent_volume("test-pv", zones("test-zone-3")),
        claim(storage_class_name="default-storage-class", volume_name="test-pv"),
    ]
    p = pod(name="web", required=[[r("example.com/label", "In", "unsupported")], [r(CAPACITY_TYPE, "In", "on-demand")]])
    p = with_claims(p, objects, "test-pvc")
    cluster = Cluster()
    cluster.provision([p])
    assert scheduled_zone(cluster, p) == "test-zone-3"


# scheduling/suite_test.go ---------------------------------------------------------------------------------------------


def test_should_schedule_pods_using_a_pv_with_multiple_zones() -> None:
    """ "should schedule pods using a PV with multiple zones": two terms are two alternatives, and zonal
    anti-affinity sends the two pods to one zone each."""
    placed = []
    for i in range(2):
        objects = [
            persistent_volume(f"multi-zone-pv-{i}", zones("test-zone-1"), zones("test-zone-2")),
            claim(f"multi-zone-pvc-{i}", volume_name=f"multi-zone-pv-{i}"),
        ]
        p = pod(name=f"pod-{i}", labels={"app": "multi-zone-app"}, anti_affinity=[anti(ZONE, app="multi-zone-app")])
        placed.append(with_claims(p, objects, f"multi-zone-pvc-{i}"))
    cluster = Cluster()
    cluster.provision(placed)
    found = [scheduled_zone(cluster, p) for p in placed]
    assert set(found) == {"test-zone-1", "test-zone-2"}


@pytest.mark.parametrize("kind", ["local", "hostPath"])
def test_should_preserve_unconstrained_pv_alternatives_after_ignoring_hostname_affinity(kind: str) -> None:
    """ "should preserve unconstrained PV alternatives after ignoring hostname affinity": the hostname-only term
    allows anywhere once the hostname is dropped, so the impossible zone term does not strand the pod."""
    objects = [
        persistent_volume(
            "hostname-or-zone-pv",
            hostname("existing-host"),
            zones("invalid-zone"),
            local=kind == "local",
            host_path=kind == "hostPath",
        ),
        claim("hostname-or-zone-pvc", volume_name="hostname-or-zone-pv"),
    ]
    p = with_claims(pod(name="hostname-or-zone-pod"), objects, "hostname-or-zone-pvc")
    cluster = Cluster()
    cluster.provision([p])
    assert cluster.node_of(p) is not None


def test_should_schedule_pods_using_a_storage_class_with_multiple_zones_in_allowed_topologies() -> None:
    """ "should schedule pods using a StorageClass with multiple zones in AllowedTopologies"."""
    sc = storage_class("multi-zone-sc", {ZONE: ["test-zone-1"]}, {ZONE: ["test-zone-2"]})
    placed = []
    for i in range(2):
        objects = [sc, claim(f"multi-zone-pvc-{i}", storage_class_name="multi-zone-sc")]
        p = pod(
            name=f"sc-pod-{i}", labels={"app": "multi-zone-sc-app"}, anti_affinity=[anti(ZONE, app="multi-zone-sc-app")]
        )
        placed.append(with_claims(p, objects, f"multi-zone-pvc-{i}"))
    cluster = Cluster()
    cluster.provision(placed)
    assert {scheduled_zone(cluster, p) for p in placed} == {"test-zone-1", "test-zone-2"}


def test_should_schedule_pods_when_a_valid_multi_volume_topology_alternative_remains_after_pruning() -> None:
    """ "should schedule pods when a valid multi-volume topology alternative remains after pruning disjoint
    branches": of the four cross-product branches only zone-1 with `optional` and zone-2 with `required` intersect,
    and only the first has an instance type."""
    objects = [
        storage_class("pruned-overlap-a", {EXOTIC: ["required"]}, {EXOTIC: ["optional"]}),
        storage_class(
            "pruned-overlap-b",
            {ZONE: ["test-zone-1"], EXOTIC: ["optional"]},
            {ZONE: ["test-zone-2"], EXOTIC: ["required"]},
        ),
        claim("pruned-overlap-pvc-a", storage_class_name="pruned-overlap-a"),
        claim("pruned-overlap-pvc-b", storage_class_name="pruned-overlap-b"),
    ]
    p = with_claims(pod(name="pruned-overlap-pod"), objects, "pruned-overlap-pvc-a", "pruned-overlap-pvc-b")
    assert len(p.volume_requirements) == 2
    # fake.InstanceTypes(5)'s largest type gives the exotic label `optional`, in every zone; none gives `required`.
    types = [instance_type("fake-it-4", "5", "10Gi", labels={EXOTIC: "optional"})]
    cluster = Cluster(types)
    cluster.provision([p], [default_pool(req(CAPACITY_TYPE, "Exists"), req(EXOTIC, "Exists"))])
    placed = cluster.node_of(p)
    assert placed is not None
    assert placed.labels[ZONE] == "test-zone-1"
    assert placed.labels[EXOTIC] == "optional"


# topology_test.go, Describe("Topology with Volume Requirements") ------------------------------------------------------


def test_should_schedule_pod_with_pvc_and_tsc_min_domains_3_when_pods_are_spread_across_3_zones() -> None:
    """ "should schedule pod with PVC and TSC minDomains=3 when pods are spread across 3 zones": the volume's zone
    narrows the NodeClaim only, so the spread still counts three domains and lets the pod into zone 1."""
    spread = [tsc(ZONE, min_domains=3)]
    pool = default_pool(req(CAPACITY_TYPE, "In", "on-demand"))
    cluster = Cluster()
    first = pods(3, spread=spread)
    cluster.provision(first, [pool])
    assert cluster.skew(ZONE) == [1, 1, 1]
    objects = [persistent_volume("test-pv", zones("test-zone-1")), claim(volume_name="test-pv")]
    with_pvc = with_claims(pod(labels=LABELS, spread=spread), objects, "test-pvc")
    cluster.provision([with_pvc], [pool])
    assert scheduled_zone(cluster, with_pvc) == "test-zone-1"
    assert cluster.skew(ZONE) == [1, 1, 2]


# Focused: what the ported cases leave unpinned ------------------------------------------------------------------------


def test_disjoint_volume_alternatives_are_kept_when_no_branch_intersects() -> None:
    """mergeVolumeRequirementAlternatives keeps every branch when none is compatible: scheduling then finds none
    fits, rather than the pod losing its volume constraints."""
    one, two = Requirements([r(ZONE, "In", "test-zone-1")]), Requirements([r(ZONE, "In", "test-zone-2")])
    assert merge_alternatives([one], [two]) == [
        Requirements([r(ZONE, "In", "test-zone-1"), r(ZONE, "In", "test-zone-2")])
    ]
    assert merge_alternatives([one], [one, two]) == [one]


def test_the_volume_zone_keeps_an_existing_node_in_another_zone_for_other_pods() -> None:
    """Existing nodes try the alternatives too: a node in zone 2 is no place for a pod whose PV is in zone 1."""
    existing = node("existing", labels={ZONE: "test-zone-2", CAPACITY_TYPE: "on-demand"})
    objects = [persistent_volume("test-pv", zones("test-zone-1")), claim(volume_name="test-pv")]
    p = with_claims(pod("100m", name="web"), objects, "test-pvc")
    cluster = Cluster(nodes=[existing])
    result = cluster.provision([p])
    assert "existing" not in result.placements
    assert scheduled_zone(cluster, p) == "test-zone-1"


def test_a_lab_pod_on_a_zonal_volume_gets_a_nodeclaim_in_the_volumes_zone() -> None:
    """End to end: the provisioning controller reads the PVC and PV and the NodeClaim asks for their zone."""
    made = lab(
        nodepool_doc(),
        persistent_volume("pv-1", zones("test-zone-b")),
        claim("data", volume_name="pv-1"),
        unschedulable_pod("web", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
    )
    made.advance(2)
    [nodeclaim] = made.store.list("NodeClaim")
    asked = {s["key"]: s for s in nodeclaim["spec"]["requirements"]}
    assert asked[ZONE]["values"] == ["test-zone-b"]
    assert nodeclaim["metadata"]["labels"][ZONE] == "test-zone-b"


def test_a_pod_without_the_volume_still_fits_the_node_its_twin_with_the_volume_could_not() -> None:
    """A pod's volumes are part of its class (PodData.class_key): a node written off for the twin with a zone-1 PV
    stays open to the same pod without it."""
    existing = node("existing", labels={ZONE: "test-zone-2", CAPACITY_TYPE: "on-demand"})
    objects = [persistent_volume("test-pv", zones("test-zone-1")), claim(volume_name="test-pv")]
    with_volume = with_claims(pod("100m", name="a"), objects, "test-pvc")
    without = pod("100m", name="b")
    cluster = Cluster(nodes=[existing])
    result = cluster.provision([with_volume, without])
    assert [p.name for p in result.placements["existing"]] == ["b"]
    assert scheduled_zone(cluster, with_volume) == "test-zone-1"


def test_a_consolidation_simulation_moves_a_pod_only_where_its_volume_can_follow() -> None:
    """Karpenter's SimulateScheduling gets the candidates' pods' volume topology as provisioning does: a pod on a
    zone-1 PV does not count on room in zone 2 when its node would go."""
    moving = replace(pod("100m", name="web"), node_name="candidate", unschedulable=False, phase="Running")
    candidate = Candidate(nc("candidate"), nodepool(), (moving,), 1.0)
    other = node("other", labels={ZONE: "test-zone-2", CAPACITY_TYPE: "on-demand"})
    view = ClusterView(claimed=[], nodes=[other], pending=[], pools=[PoolOffer(nodepool(), fake_catalog())], now=0.0)
    assert [p.name for p in simulate([candidate], view).placements["other"]] == ["web"]
    zone_1 = Requirements([r(ZONE, "In", "test-zone-1")])
    pinned = simulate([candidate], replace(view, volume_requirements={moving.uid: (zone_1,)}))
    assert "other" not in pinned.placements
    [planned] = pinned.new_nodeclaims
    assert planned.requirements[ZONE].values == frozenset({"test-zone-1"})


def test_the_disruption_snapshot_reads_each_running_pods_volume_alternatives() -> None:
    """The lab end to end: the pod placed in its PV's zone keeps that zone as its alternative in disruption's view."""
    made = lab(
        nodepool_doc(),
        persistent_volume("pv-1", zones("test-zone-b")),
        claim("data", volume_name="pv-1"),
        unschedulable_pod("web", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
    )
    made.advance(30)
    view, _ = cluster_view(made.ctx)
    assert view.volume_requirements == {"uid-web": (Requirements([r(ZONE, "In", "test-zone-b")]),)}


def test_a_pending_pod_whose_claim_is_missing_takes_no_room_in_disruptions_view() -> None:
    """Karpenter's SimulateScheduling reads GetPendingPods, which validates PVCs: a pending pod whose claim does not
    exist leaves no room to be kept for it, while its twin with a usable claim does."""
    made = lab(
        nodepool_doc(),
        persistent_volume("pv-1", zones("test-zone-b")),
        claim("data", volume_name="pv-1"),
        unschedulable_pod("usable", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
        unschedulable_pod("missing", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "nowhere"}}]),
    )
    view, _ = cluster_view(made.ctx)
    assert [p.name for p in view.pending] == ["usable"]

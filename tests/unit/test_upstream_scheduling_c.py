"""Karpenter v1.15.0's scheduling suites (pkg/controllers/provisioning/scheduling/suite_test.go, topology_test.go), the
Its the earlier ports (test_upstream_scheduling_a/_b, test_upstream_topology) left out.

Each test names the Describe/Context/It it follows. The topology tests run on test_upstream_topology's Cluster, which
plays ExpectProvisioned and ExpectSkew over the fake cloud provider's catalog.
"""

from __future__ import annotations

from typing import Any

from provisioner.pods import PodAffinityTerm
from provisioner.taints import Taint
from tests.builders import CAPACITY_TYPE, HOSTNAME, ZONE, pod, selector
from tests.lab_builders import lab, nodepool_doc
from tests.unit.test_upstream_scheduling_a import LABELLED, scheduled, solve
from tests.unit.test_upstream_scheduling_b import unschedulable_pod
from tests.unit.test_upstream_topology import Cluster, default_pool, pods, scheduled_ids, tsc

S2 = {"security": "s2"}


def affinity(key: str, **fields: Any) -> PodAffinityTerm:
    return PodAffinityTerm(topology_key=key, selector=selector(**S2), **fields)


# suite_test.go Describe("Custom Constraints") ---------------------------------------------------------------------


def test_a_node_selector_conflicting_with_the_nodepools_label_is_not_scheduled():
    """Context("NodePool with Labels") It("should not schedule pods that have conflicting node selectors"): the pool
    labels test-key=test-value, the pod selects test-key=different-value."""
    result = solve([pod(node_selector={"test-key": "different-value"})], pools=[LABELLED])
    assert scheduled(result) == 0 and len(result.failures) == 1


def test_a_nodepool_that_is_not_ready_provisions_nothing():
    """Context("Scheduling Logic") It("should not schedule pods with nodePool which is not ready "): karpui's NodePool
    is not Ready while its node class does not exist (NodeClassReady false), the one way a lab NodePool is not."""
    missing = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "missing"}
    made = lab(nodepool_doc(template_spec={"nodeClassRef": missing}), unschedulable_pod("p"))
    made.advance(30)
    assert made.store.list("NodeClaim") == []


# topology_test.go -------------------------------------------------------------------------------------------------


def test_zonal_spread_balances_pods_selected_by_match_labels():
    """Context("Zonal") It("should balance pods across zones (match labels)")."""
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(ZONE)]))
    assert cluster.skew(ZONE) == [1, 1, 2]


def test_hostname_spread_balances_pods_across_nodes():
    """Context("Hostname") It("should balance pods across nodes")."""
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(HOSTNAME)]))
    assert cluster.skew(HOSTNAME) == [1, 1, 1, 1]


def test_hostname_spread_with_max_skew_four_puts_four_pods_on_one_node():
    """Context("Hostname") It("should balance pods on the same hostname up to maxskew")."""
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(HOSTNAME, max_skew=4)]))
    assert cluster.skew(HOSTNAME) == [4]


def test_capacity_type_spread_balances_pods_across_capacity_types():
    """Context("CapacityType") It("should balance pods across capacity types"): the suite's NodePool has capacity-type
    Exists, yet the fake provider's types offer spot and on-demand only, so two domains."""
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(CAPACITY_TYPE)]))
    assert cluster.skew(CAPACITY_TYPE) == [2, 2]


def test_match_label_keys_spread_each_value_separately():
    """Context("MatchLabelKeys") It("should support matchLabelKeys"): two pods labelled test-label=value-a and two
    value-b spread on hostname each among their own, so two nodes hold one of each."""
    constraint = tsc(HOSTNAME, match_label_keys=("test-label",))
    group_a = pods(2, labels={"test": "test", "test-label": "value-a"}, spread=[constraint])
    group_b = pods(2, labels={"test": "test", "test-label": "value-b"}, spread=[constraint])
    cluster = Cluster()
    cluster.provision([*group_a, *group_b])
    assert cluster.skew(HOSTNAME) == [2, 2]
    assert {cluster.node_of(p).name for p in group_a} == {cluster.node_of(p).name for p in group_b}


def test_self_affinity_on_hostname_puts_three_pods_on_one_node():
    """Describe("Pod Affinity/Anti-Affinity") It("should respect self pod affinity (hostname)")."""
    group = [pod(labels=S2, affinity=[affinity(HOSTNAME)]) for _ in range(3)]
    cluster = Cluster()
    cluster.provision(group)
    assert {cluster.node_of(p).name for p in group} == {"node-1"}


def test_self_affinity_on_zone_puts_three_pods_on_one_node():
    """Describe("Pod Affinity/Anti-Affinity") It("should respect self pod affinity (zone)"): all three small pods fit
    the one NodeClaim launched in the zone the first picked."""
    group = [pod(labels=S2, affinity=[affinity(ZONE)]) for _ in range(3)]
    cluster = Cluster()
    cluster.provision(group)
    assert {cluster.node_of(p).name for p in group} == {"node-1"}


def test_simple_hostname_anti_affinity_separates_the_pods_every_time():
    """Describe("Pod Affinity/Anti-Affinity") It("should separate nodes using simple pod anti-affinity on hostname"):
    ten rounds, the anti-affine pod given first each time."""
    cluster = Cluster()
    for _ in range(10):
        target = pod(labels=S2)
        avoider = pod(anti_affinity=[affinity(HOSTNAME)])
        result = cluster.provision([avoider, target])
        assert scheduled_ids(result) == {target.id, avoider.id}
        assert cluster.node_of(target).name != cluster.node_of(avoider).name


def test_pod_affinity_to_a_listed_namespace_finds_its_target():
    """Describe("Pod Affinity/Anti-Affinity") It("should filter pod affinity topologies by namespace, matching pods
    namespace list"): ten hostname-spread pods make ten nodes; the follower's term lists the target's namespace."""
    target = pod(labels=S2, namespace="other-ns-list")
    follower = pod(affinity=[affinity(HOSTNAME, namespaces=frozenset({"other-ns-list"}))])
    cluster = Cluster()
    cluster.provision([*pods(10, spread=[tsc(HOSTNAME)]), target, follower])
    assert cluster.node_of(target) is not None
    assert cluster.node_of(target).name == cluster.node_of(follower).name


def test_a_startup_taint_alone_does_not_stop_the_pod():
    """It("should provision nodes with taints and schedule pods if the taint is only a startup taint")."""
    startup = Taint("ignore-me", "NoSchedule", "nothing-to-see-here")
    p = pod()
    cluster = Cluster()
    result = cluster.provision([p], [default_pool(startup_taints=[startup])])
    assert scheduled_ids(result) == {p.id}
    [nodeclaim] = result.new_nodeclaims
    assert nodeclaim.startup_taints == (startup,)


# suite_test.go Describe("VolumeUsage") ---------------------------------------------------------------------------


def test_pods_sharing_an_nfs_volume_all_go_to_the_existing_node():
    """Describe("VolumeUsage") It("should not fail for NFS volumes"): a node launched for a first pod; then an NFS
    PersistentVolume in that node's zone, bound to a claim with storage class "", and five pods each mounting the
    claim twice: all five fit the existing node, so no second node. (The lab's zones are kwok's, so the volume's zone
    is the one the first node landed in rather than test-zone-1.)"""
    made = lab(nodepool_doc(), unschedulable_pod("first"))
    made.advance(60)
    [first_node] = made.store.list("Node")
    zone = first_node["metadata"]["labels"][ZONE]
    made.store.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "my-volume"},
            "spec": {
                "storageClassName": "nfs",
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "nfs": {"server": "fake.server", "path": "/some/path"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]
                    }
                },
            },
            "status": {"phase": "Bound"},
        }
    )
    made.store.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "my-claim",
                "namespace": "default",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {
                "storageClassName": "",
                "volumeName": "my-volume",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
            "status": {"phase": "Bound"},
        }
    )
    for i in range(5):
        sharing = unschedulable_pod(f"nfs-{i}", cpu="100m")
        sharing["spec"]["volumes"] = [
            {"name": "a", "persistentVolumeClaim": {"claimName": "my-claim"}},
            {"name": "b", "persistentVolumeClaim": {"claimName": "my-claim"}},
        ]
        made.store.create(sharing)
    made.advance(60)
    assert [n["metadata"]["name"] for n in made.store.list("Node")] == [first_node["metadata"]["name"]]
    assert len(made.store.list("NodeClaim")) == 1

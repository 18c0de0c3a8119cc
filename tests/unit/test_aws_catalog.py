import pytest

from provisioner.catalog.aws import aws_catalog, kube_reserved_cpu_millis, kube_reserved_memory_bytes
from provisioner.quantity import format_resources

BY_NAME = aws_catalog().by_name()


def test_the_sample_has_c_m_r_families_in_x86_and_graviton():
    families = {it.labels["karpenter.k8s.aws/instance-family"] for it in BY_NAME.values()}
    assert families == {"c5", "m5", "r5", "c6g", "m6g", "r6g"}
    assert len(BY_NAME) == 45
    assert BY_NAME["c6g.large"].labels["kubernetes.io/arch"] == "arm64"


@pytest.mark.parametrize(("vcpus", "millis"), [(2, 70), (4, 80), (8, 90), (16, 110), (96, 310)])
def test_eks_kube_reserved_cpu(vcpus, millis):
    assert kube_reserved_cpu_millis(vcpus) == millis


def test_eks_kube_reserved_memory_is_11mi_per_pod_plus_255mi():
    assert kube_reserved_memory_bytes(29) == 574 * 2**20


def test_m5_large_capacity_and_allocatable_follow_the_eks_formulas():
    it = BY_NAME["m5.large"]
    assert format_resources(it.capacity) == {"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi"}
    # 7577Mi - (574Mi kube-reserved + 100Mi eviction) = 6903Mi; 20Gi - 1Gi - 2Gi (10% nodefs) = 17Gi.
    assert format_resources(it.allocatable) == {
        "cpu": "1930m",
        "memory": "6903Mi",
        "pods": "29",
        "ephemeral-storage": "17Gi",
    }


def test_labels_and_offerings():
    it = BY_NAME["r5.2xlarge"]
    assert it.labels["karpenter.k8s.aws/instance-category"] == "r"
    assert it.labels["karpenter.k8s.aws/instance-memory"] == "65536"
    assert it.labels["karpenter.k8s.aws/instance-size"] == "2xlarge"
    on_demand = {o.price for o in it.offerings if o.capacity_type == "on-demand"}
    assert on_demand == {0.504}
    assert len(it.offerings) == 6

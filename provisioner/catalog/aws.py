"""An AWS-style sample catalog for EC2NodeClass NodePools: c/m/r families, x86 and Graviton, with EKS overhead.

Prices are us-east-1 Linux on-demand list prices as published in 2024-2026 (approximate; check the AWS
price list before relying on them). Spot prices are not published as list prices; they are modelled as a
fixed per-zone fraction of on-demand (SPOT_FRACTION), which is also approximate.
"""

from __future__ import annotations

import math

from provisioner import labels as wk
from provisioner.catalog.instance_type import Catalog, InstanceType, Offering, Overhead
from provisioner.quantity import MILLI

PRICES_AS_OF = "2026-11"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
SPOT_FRACTION = {"us-east-1a": 0.38, "us-east-1b": 0.41, "us-east-1c": 0.44}
MI = 2**20
GI = 2**30
VM_MEMORY_OVERHEAD_PERCENT = 0.075
EPHEMERAL_STORAGE = 20 * GI  # the default EBS root volume of Karpenter's AL2023 EC2NodeClass
EVICTION_MEMORY = 100 * MI
EVICTION_NODEFS_PERCENT = 10
KUBE_RESERVED_EPHEMERAL = 1 * GI

# size -> (vCPU, ENI-based max pods)
SIZES = {
    "large": (2, 29),
    "xlarge": (4, 58),
    "2xlarge": (8, 58),
    "4xlarge": (16, 234),
    "8xlarge": (32, 234),
    "9xlarge": (36, 234),
    "12xlarge": (48, 234),
    "16xlarge": (64, 737),
    "18xlarge": (72, 737),
    "24xlarge": (96, 737),
}

# family -> (category, generation, arch, GiB per vCPU, {size: on-demand $/h})
FAMILIES: dict[str, tuple[str, str, str, int, dict[str, float]]] = {
    "c5": (
        "c",
        "5",
        "amd64",
        2,
        {
            "large": 0.085,
            "xlarge": 0.17,
            "2xlarge": 0.34,
            "4xlarge": 0.68,
            "9xlarge": 1.53,
            "12xlarge": 2.04,
            "18xlarge": 3.06,
            "24xlarge": 4.08,
        },
    ),
    "m5": (
        "m",
        "5",
        "amd64",
        4,
        {
            "large": 0.096,
            "xlarge": 0.192,
            "2xlarge": 0.384,
            "4xlarge": 0.768,
            "8xlarge": 1.536,
            "12xlarge": 2.304,
            "16xlarge": 3.072,
            "24xlarge": 4.608,
        },
    ),
    "r5": (
        "r",
        "5",
        "amd64",
        8,
        {
            "large": 0.126,
            "xlarge": 0.252,
            "2xlarge": 0.504,
            "4xlarge": 1.008,
            "8xlarge": 2.016,
            "12xlarge": 3.024,
            "16xlarge": 4.032,
            "24xlarge": 6.048,
        },
    ),
    "c6g": (
        "c",
        "6",
        "arm64",
        2,
        {
            "large": 0.068,
            "xlarge": 0.136,
            "2xlarge": 0.272,
            "4xlarge": 0.544,
            "8xlarge": 1.088,
            "12xlarge": 1.632,
            "16xlarge": 2.176,
        },
    ),
    "m6g": (
        "m",
        "6",
        "arm64",
        4,
        {
            "large": 0.077,
            "xlarge": 0.154,
            "2xlarge": 0.308,
            "4xlarge": 0.616,
            "8xlarge": 1.232,
            "12xlarge": 1.848,
            "16xlarge": 2.464,
        },
    ),
    "r6g": (
        "r",
        "6",
        "arm64",
        8,
        {
            "large": 0.1008,
            "xlarge": 0.2016,
            "2xlarge": 0.4032,
            "4xlarge": 0.8064,
            "8xlarge": 1.6128,
            "12xlarge": 2.4192,
            "16xlarge": 3.2256,
        },
    ),
}


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """EKS kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% above."""
    millis = vcpus * 1000
    reserved = 0.0
    for start, end, fraction in ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, math.inf, 0.0025)):
        if millis > start:
            reserved += (min(millis, end) - start) * fraction
    return int(reserved)


def kube_reserved_memory_bytes(max_pods: int) -> int:
    """EKS kube-reserved memory: 11 MiB per pod plus 255 MiB."""
    return (11 * max_pods + 255) * MI


def memory_capacity_bytes(memory_mib: int) -> int:
    """Memory the kubelet reports: EC2 memory less the VM overhead (7.5%, rounded up to whole MiB)."""
    return (memory_mib - math.ceil(memory_mib * VM_MEMORY_OVERHEAD_PERCENT)) * MI


def instance_type(family: str, size: str) -> InstanceType:
    category, generation, arch, gib_per_vcpu, prices = FAMILIES[family]
    vcpus, max_pods = SIZES[size]
    memory_mib = vcpus * gib_per_vcpu * 1024
    price = prices[size]
    offerings = tuple(
        Offering(zone=zone, capacity_type=capacity_type, price=price * (SPOT_FRACTION[zone] if spot else 1.0))
        for spot, capacity_type in ((True, wk.CAPACITY_TYPE_SPOT), (False, wk.CAPACITY_TYPE_ON_DEMAND))
        for zone in ZONES
    )
    overhead = Overhead(
        kube_reserved={
            "cpu": kube_reserved_cpu_millis(vcpus),
            "memory": kube_reserved_memory_bytes(max_pods) * MILLI,
            "ephemeral-storage": KUBE_RESERVED_EPHEMERAL * MILLI,
        },
        eviction_threshold={
            "memory": EVICTION_MEMORY * MILLI,
            "ephemeral-storage": EPHEMERAL_STORAGE * EVICTION_NODEFS_PERCENT // 100 * MILLI,
        },
    )
    return InstanceType(
        name=f"{family}.{size}",
        capacity={
            "cpu": vcpus * MILLI,
            "memory": memory_capacity_bytes(memory_mib) * MILLI,
            "pods": max_pods * MILLI,
            "ephemeral-storage": EPHEMERAL_STORAGE * MILLI,
        },
        offerings=offerings,
        labels={
            wk.ARCH: arch,
            wk.OS: "linux",
            wk.AWS_PREFIX + "instance-category": category,
            wk.AWS_PREFIX + "instance-family": family,
            wk.AWS_PREFIX + "instance-generation": generation,
            wk.AWS_PREFIX + "instance-size": size,
            wk.AWS_PREFIX + "instance-cpu": str(vcpus),
            wk.AWS_PREFIX + "instance-memory": str(memory_mib),
            wk.AWS_PREFIX + "instance-hypervisor": "nitro",
        },
        overhead=overhead,
    )


def aws_catalog() -> Catalog:
    types = tuple(instance_type(family, size) for family, spec in FAMILIES.items() for size in spec[4])
    return Catalog(
        name="aws-sample",
        instance_types=types,
        node_class_kinds=("EC2NodeClass",),
        description=f"AWS-style sample: c5/m5/r5 and Graviton c6g/m6g/r6g, approximate us-east-1 prices ({PRICES_AS_OF}).",
    )

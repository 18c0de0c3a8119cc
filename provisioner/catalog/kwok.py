"""The kwok provider's catalog, generated as Karpenter's `kwok/tools/gen_instance_types.go` does: 144 types."""

from __future__ import annotations

from provisioner import labels as wk
from provisioner.catalog.instance_type import Catalog, InstanceType, Offering, Overhead
from provisioner.quantity import MILLI, format_quantity

CPUS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
# Family letter by GiB of memory per vCPU.
FAMILIES = ((2, "c"), (4, "s"), (8, "m"))
OPERATING_SYSTEMS = ("linux", "windows")
ARCHITECTURES = ("amd64", "arm64")
ZONES = ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")
CAPACITY_TYPES = (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)
SPOT_DISCOUNT = 0.7
GI = 2**30
EPHEMERAL_STORAGE = 20 * GI
# kwok's only overhead: kube-reserved 100m CPU and 10Mi memory (no system-reserved, no eviction threshold).
KWOK_OVERHEAD = Overhead(kube_reserved={"cpu": 100, "memory": 10 * 2**20 * MILLI})


def on_demand_price(cpu: int, memory_bytes: int) -> float:
    """kwok's price formula: $0.025 per vCPU plus $0.001 per (decimal) GB of memory, per hour."""
    return 0.025 * cpu + 0.001 * (memory_bytes / 1e9)


def instance_type(cpu: int, memory_factor: int, family: str, os: str, arch: str) -> InstanceType:
    memory = cpu * memory_factor * GI
    name = f"{family}-{cpu}x-{arch}-{os}"
    price = on_demand_price(cpu, memory)
    offerings = tuple(
        Offering(
            zone=zone, capacity_type=capacity_type, price=price * SPOT_DISCOUNT if capacity_type == "spot" else price
        )
        for capacity_type in CAPACITY_TYPES
        for zone in ZONES
    )
    return InstanceType(
        name=name,
        capacity={
            "cpu": cpu * MILLI,
            "memory": memory * MILLI,
            "pods": min(16 * cpu, 1024) * MILLI,
            "ephemeral-storage": EPHEMERAL_STORAGE * MILLI,
        },
        offerings=offerings,
        labels={
            wk.ARCH: arch,
            wk.OS: os,
            wk.KWOK_INSTANCE_SIZE: str(cpu),
            wk.KWOK_INSTANCE_FAMILY: family,
            wk.KWOK_INSTANCE_CPU: str(cpu),
            wk.KWOK_INSTANCE_MEMORY: format_quantity(memory * MILLI, "memory"),
        },
        overhead=KWOK_OVERHEAD,
    )


def kwok_catalog() -> Catalog:
    """All 144 types in the generator's order: cpu × memory factor × OS × arch."""
    types = tuple(
        instance_type(cpu, factor, family, os, arch)
        for cpu in CPUS
        for factor, family in FAMILIES
        for os in OPERATING_SYSTEMS
        for arch in ARCHITECTURES
    )
    return Catalog(
        name="kwok",
        instance_types=types,
        node_class_kinds=("KWOKNodeClass",),
        description="Karpenter's kwok provider catalog: c/s/m families, 1-256 vCPU, linux/windows, amd64/arm64.",
    )

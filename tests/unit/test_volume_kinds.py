"""The kube adapter reads PVCs, PVs and StorageClasses where the cluster serves them, and skips them where it does
not (the lab's API serves the core group without them), so its cache still syncs."""

from __future__ import annotations

from provisioner.adapters.kinds import BY_KIND, INFORMED, listed_in_core, resolve


def test_pvcs_pvs_and_storage_classes_are_informed_at_their_scope() -> None:
    informed = {k.kind: k for k in INFORMED}
    assert informed["PersistentVolumeClaim"].namespaced
    assert not informed["PersistentVolume"].namespaced
    assert informed["StorageClass"].group == "storage.k8s.io"
    assert not informed["StorageClass"].namespaced


def test_core_kinds_the_core_listing_leaves_out_are_not_informed() -> None:
    kinds = [BY_KIND[k] for k in ("Pod", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "NodePool")]
    resources = resolve(kinds, {"": ["v1"], "karpenter.sh": ["v1"]})
    listing = {"resources": [{"name": "pods"}, {"name": "pods/status"}]}
    assert sorted(listed_in_core(resources, listing)) == ["NodePool", "Pod"]
    everything = {"resources": [{"name": n} for n in ("pods", "persistentvolumeclaims", "persistentvolumes")]}
    assert sorted(listed_in_core(resources, everything)) == [
        "NodePool",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Pod",
    ]

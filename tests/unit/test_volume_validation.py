"""A pending pod whose PVC kube-scheduler would refuse gets no node, and is told so in Karpenter's words: its
"ignoring pod" log line, its FailedScheduling event and the verdict the dashboard shows."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.cluster.memory import ObjectStore
from provisioner.volumes import VolumeError, requirement_alternatives, validation_error
from tests.lab_builders import lab, nodepool_doc
from tests.unit.test_upstream_scheduling_b import (
    claim,
    claim_volume,
    ephemeral_volume,
    storage_class,
    unschedulable_pod,
)
from tests.unit.test_upstream_scheduling_b import volume as persistent_volume


def store(*objects: dict[str, Any]) -> ObjectStore:
    cluster = ObjectStore(clock=lambda: 0.0)
    for obj in objects:
        cluster.create(obj)
    return cluster


WEB = unschedulable_pod("web", volumes=claim_volume())


@pytest.mark.parametrize(
    ("objects", "error"),
    [
        (
            [],
            'getting persistent volume claim, persistentvolumeclaims "tmp-ephemeral" not found '
            "(PersistentVolumeClaim=tmp-ephemeral)",
        ),
        (
            [claim(deleting=True)],
            "persistentvolumeclaim is being deleted (PersistentVolumeClaim=default/tmp-ephemeral)",
        ),
        (
            [claim(volume_name="pv-1", phase="Lost")],
            "persistentvolumeclaim bound to non-existent persistentvolume "
            "(PersistentVolume=pv-1, PersistentVolumeClaim=default/tmp-ephemeral)",
        ),
        (
            [claim(volume_name="pv-1", bound=True, phase="Bound")],
            'failed to validate pvc, persistentvolumes "pv-1" not found '
            "(PersistentVolume=pv-1, PersistentVolumeClaim=default/tmp-ephemeral, StorageClass=default-storage-class)",
        ),
        (
            [persistent_volume("pv-1", deleting=True), claim(volume_name="pv-1", bound=True, phase="Bound")],
            "failed to validate pvc, persistentvolume is being deleted "
            "(PersistentVolume=pv-1, PersistentVolumeClaim=default/tmp-ephemeral, StorageClass=default-storage-class)",
        ),
        (
            [persistent_volume("pv-1"), claim(volume_name="pv-1", phase="Bound")],
            "pvc is considered unbound because it does not contain annotation "
            "(PersistentVolume=pv-1, PersistentVolumeClaim=tmp-ephemeral, annotation=pv.kubernetes.io/bind-completed)",
        ),
        (
            [claim(storage_class_name=None)],
            "unbound pvc must define a storage class (PersistentVolumeClaim=default/tmp-ephemeral, StorageClass=)",
        ),
        (
            [claim()],
            "failed to validate pvc, failed to get storage class, storageclasses.storage.k8s.io "
            '"default-storage-class" not found '
            "(PersistentVolumeClaim=default/tmp-ephemeral, StorageClass=default-storage-class)",
        ),
        (
            [storage_class(binding="Immediate"), claim()],
            "failed to validate pvc, pvc with immediate volume binding mode must be bound "
            "(PersistentVolumeClaim=default/tmp-ephemeral, StorageClass=default-storage-class)",
        ),
    ],
    ids=[
        "missing",
        "deleting",
        "lost",
        "bound to a missing PV",
        "bound to a deleting PV",
        "bind not completed",
        "no storage class",
        "missing storage class",
        "immediate binding",
    ],
)
def test_each_refused_pvc_is_named_with_karpenters_error_text(objects: list[dict[str, Any]], error: str) -> None:
    assert validation_error(store(*objects), WEB) == error


def test_usable_pvcs_and_volumes_without_claims_pass() -> None:
    pod = unschedulable_pod("web", volumes=[*claim_volume(), {"name": "scratch", "emptyDir": {}}])
    assert validation_error(store(storage_class(), claim()), pod) is None


def test_an_ephemeral_volume_reads_the_claim_named_after_the_pod_and_the_volume() -> None:
    pod = unschedulable_pod("web", volumes=ephemeral_volume("default-storage-class"))
    assert validation_error(store(storage_class(), claim("web-tmp-ephemeral")), pod) is None


def test_an_ignored_pod_gets_a_log_line_an_event_and_a_verdict_but_no_node() -> None:
    made = lab(
        nodepool_doc(), storage_class(binding="Immediate"), claim(), unschedulable_pod("web", volumes=claim_volume())
    )
    made.advance(2)
    error = (
        "failed to validate pvc, pvc with immediate volume binding mode must be bound "
        "(PersistentVolumeClaim=default/tmp-ephemeral, StorageClass=default-storage-class)"
    )
    assert made.store.list("NodeClaim") == []
    logged = [rec.record for rec in made.logs if rec.record.message == "ignoring pod"]
    assert logged and logged[0].fields == {"Pod": {"name": "web", "namespace": "default"}, "error": error}
    assert logged[0].level == "DEBUG"
    told = [e["message"] for e in made.store.list("Event") if e["reason"] == "FailedScheduling"]
    assert told == [f"Failed to schedule pod, {error}"]


def test_a_volume_that_cannot_be_read_names_what_is_missing_as_karpenters_get_requirements() -> None:
    """The error the provisioning controller logs ("failed getting volume topology requirements") before leaving a
    deleting node's pod out of the batch, as Karpenter's getVolumeTopologyRequirements."""
    with pytest.raises(VolumeError) as missing_claim:
        requirement_alternatives(store(), WEB)
    assert str(missing_claim.value) == (
        "discovering persistent volume claim, getting persistent volume claim, "
        'persistentvolumeclaims "tmp-ephemeral" not found (PersistentVolumeClaim=tmp-ephemeral)'
    )
    with pytest.raises(VolumeError) as missing_volume:
        requirement_alternatives(store(claim(volume_name="pv-1", bound=True, phase="Bound")), WEB)
    assert str(missing_volume.value) == (
        'getting existing requirements, getting persistent volume, persistentvolumes "pv-1" not found '
        "(PersistentVolume=pv-1)"
    )

"""Karpenter v1.15.0's NodePool hash suite (pkg/controllers/nodepool/hash/suite_test.go) ported onto karpui's drift
hash, each test naming the It it follows.

karpui does not write the hash onto the NodePool: it computes it from the NodePool where Karpenter would read its
karpenter.sh/nodepool-hash annotation, so the Its about the NodePool's own annotations test that computation, and
those about NodeClaims' annotations (a hash version change) test the drift controller, which does that part of the
hash controller's work.
"""

from __future__ import annotations

from typing import Any

from provisioner.cluster.conditions import set_claim_condition
from provisioner.controllers import lifecycle
from provisioner.controllers.drift import DriftController
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash
from provisioner.lab import Lab
from provisioner.manifests.nodepool import parse_nodepool
from tests.lab_builders import KWOK_REF, lab

HASH = "karpenter.sh/nodepool-hash"
HASH_VERSION_KEY = "karpenter.sh/nodepool-hash-version"


def _doc(annotations: dict[str, str] | None = None, **changes: Any) -> dict[str, Any]:
    """The suite's BeforeEach NodePool; `changes` replace its template spec's fields, or its spec's own with spec_."""
    template_spec = {
        "nodeClassRef": KWOK_REF,
        "requirements": [],
        "taints": [{"key": "key", "effect": "NoExecute"}],
        # the Go suite's startup taint is its taint again; karpui's manifest check (nodeclaim_validation.go's) refuses
        # a duplicate, so the startup taint has a key of its own
        "startupTaints": [{"key": "startupkey", "effect": "NoExecute"}],
        "expireAfter": "5m",
        "terminationGracePeriod": "5m",
    }
    spec: dict[str, Any] = {}
    metadata = {
        "annotations": {"keyAnnotation": "valueAnnotation", "keyAnnotation2": "valueAnnotation2"},
        "labels": {"keyLabel": "valueLabel"},
    }
    for key, value in changes.items():
        if key.startswith("spec_"):
            spec[key.removeprefix("spec_")] = value
        elif key.startswith("metadata_"):
            metadata[key.removeprefix("metadata_")] = value
        else:
            template_spec[key] = value
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "annotations": dict(annotations or {})},
        "spec": {"template": {"metadata": metadata, "spec": template_spec}, **spec},
    }


def _hash(**changes: Any) -> str:
    return nodepool_hash(parse_nodepool(_doc(**changes)))


def test_should_update_the_drift_hash_when_nodepool_static_field_is_updated():
    """Static Drift Hash: "should update the drift hash when NodePool static field is updated" (the labels changed,
    the annotations written in another order)."""
    before = _hash()
    after = _hash(
        metadata_labels={"keyLabeltest": "valueLabeltest"},
        metadata_annotations={"keyAnnotation2": "valueAnnotation2", "keyAnnotation": "valueAnnotation"},
    )
    assert after != before
    assert after == _hash(metadata_labels={"keyLabeltest": "valueLabeltest"})


def test_should_not_update_the_drift_hash_when_nodepool_behavior_field_is_updated():
    """Static Drift Hash: "should not update the drift hash when NodePool behavior field is updated"."""
    changed = _hash(
        spec_limits={"cpu": "16"},
        spec_disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
        requirements=[
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test"]},
            {"key": "topology.kubernetes.io/zone", "operator": "Gt", "values": ["1"]},
            {"key": "topology.kubernetes.io/zone", "operator": "Lt", "values": ["1"]},
        ],
        spec_weight=80,
    )
    assert changed == _hash()


def test_the_hash_takes_the_taints_as_a_set():
    """apis/v1/nodepool.go Hash: hashstructure with SlicesAsSets, so taints written in another order are the same
    template (no drift)."""
    taints = [{"key": "a", "effect": "NoExecute"}, {"key": "b", "value": "v", "effect": "NoSchedule"}]
    startup = [{"key": "c", "effect": "NoExecute"}, {"key": "d", "effect": "NoSchedule"}]
    assert _hash(taints=taints, startupTaints=startup) == _hash(taints=taints[::-1], startupTaints=startup[::-1])
    assert _hash(taints=taints) != _hash(taints=taints[:1])


def test_the_hash_takes_durations_by_their_length():
    """apis/v1/nodepool.go Hash: expireAfter and terminationGracePeriod hash as time.Durations (NillableDuration's
    Raw text is `hash:"ignore"`), so "60m" is the same template as "1h"; Never differs from any length."""
    assert _hash(expireAfter="60m", terminationGracePeriod="90s") == _hash(
        expireAfter="1h", terminationGracePeriod="1m30s"
    )
    assert _hash(expireAfter="Never") != _hash(expireAfter="720h")
    assert _hash(terminationGracePeriod="5m") != _hash(terminationGracePeriod="6m")


def _lab(pool_annotations: dict[str, str]) -> Lab:
    return lab(_doc(pool_annotations))


def _claim(made: Lab, name: str, annotations: dict[str, str], drifted: bool = False) -> None:
    claim: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": "default"},
            "annotations": dict(annotations),
            "finalizers": [lifecycle.TERMINATION_FINALIZER],
        },
        "spec": {"nodeClassRef": dict(KWOK_REF), "requirements": []},
        "status": {},
    }
    if drifted:
        set_claim_condition(claim, "Drifted", "True", made.now, "Drifted")
    made.store.create(claim)


def _annotations(made: Lab, name: str) -> dict[str, str]:
    found: dict[str, str] = made.store.must_get("NodeClaim", name)["metadata"]["annotations"]
    return {k: v for k, v in found.items() if k in (HASH, HASH_VERSION_KEY)}


def test_should_update_nodepool_hash_versions_on_all_nodeclaims_when_they_dont_match_the_controllers():
    """Static Drift Hash: "should update nodepool hash versions on all nodeclaims when the hash versions don't match
    the controller hash version"."""
    made = _lab({HASH: "abceduefed", HASH_VERSION_KEY: "test"})
    for name in ("one", "two"):
        _claim(made, name, {HASH: "123456", HASH_VERSION_KEY: "test"})
    DriftController().reconcile(made.ctx)
    expected = {HASH: nodepool_hash(made.ctx.nodepools[0]), HASH_VERSION_KEY: HASH_VERSION}
    assert (_annotations(made, "one"), _annotations(made, "two")) == (expected, expected)


def test_should_not_update_nodepool_hash_on_nodeclaims_when_the_hash_versions_match_the_controllers():
    """Static Drift Hash: "should not update nodepool hash on all nodeclaims when the hash versions match the
    controller hash version"."""
    made = _lab({HASH: "abceduefed", HASH_VERSION_KEY: "test-version"})
    _claim(made, "nodeclaim", {HASH: "1234564654", HASH_VERSION_KEY: HASH_VERSION})
    DriftController().reconcile(made.ctx)
    assert _annotations(made, "nodeclaim") == {HASH: "1234564654", HASH_VERSION_KEY: HASH_VERSION}


def test_should_not_update_nodepool_hash_on_the_nodeclaim_if_its_drifted():
    """Static Drift Hash: "should not update nodepool hash on the nodeclaim if it's drifted" (its version is)."""
    made = _lab({HASH: "abceduefed", HASH_VERSION_KEY: "test"})
    _claim(made, "nodeclaim", {HASH: "123456", HASH_VERSION_KEY: "test"}, drifted=True)
    DriftController().reconcile(made.ctx)
    assert _annotations(made, "nodeclaim") == {HASH: "123456", HASH_VERSION_KEY: HASH_VERSION}

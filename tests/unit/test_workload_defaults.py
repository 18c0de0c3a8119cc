"""kube-apiserver's defaults for the apps/v1 workloads, applied in place or read through."""

from __future__ import annotations

import copy
from typing import Any

from provisioner.apimachinery.defaults import defaulted_spec, set_defaults


def deployment(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {}, **spec},
    }


def daemonset(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {"template": {}, **spec},
    }


def defaulted(obj: dict[str, Any]) -> dict[str, Any]:
    """The spec after defaulting, without the fields defaulting does not touch."""
    spec = set_defaults(obj)["spec"]
    return {key: value for key, value in spec.items() if key not in ("template", "selector")}


def test_a_deployment_gets_a_rolling_update_a_history_limit_and_a_progress_deadline() -> None:
    assert defaulted(deployment()) == {
        "replicas": 3,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
    }


def test_what_the_writer_gave_is_kept_and_only_absent_or_null_fields_are_defaulted() -> None:
    given = deployment(strategy={"type": "Recreate"}, revisionHistoryLimit=None, progressDeadlineSeconds=30)
    del given["spec"]["replicas"]
    assert defaulted(given) == {
        "replicas": 1,
        "strategy": {"type": "Recreate"},  # no rollingUpdate for Recreate
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 30,
    }
    assert defaulted(deployment(strategy={"rollingUpdate": {"maxSurge": 0}}))["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"},
    }
    assert defaulted(deployment(strategy="bad"))["strategy"] == "bad"  # left for validation to refuse


def test_a_daemonset_gets_a_rolling_update_of_one_node_at_a_time() -> None:
    assert defaulted(daemonset()) == {
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
        "revisionHistoryLimit": 10,
    }
    assert defaulted(daemonset(updateStrategy={"type": "OnDelete"}))["updateStrategy"] == {"type": "OnDelete"}


def test_a_replicaset_gets_one_replica_and_other_kinds_nothing() -> None:
    assert set_defaults({"kind": "ReplicaSet", "spec": {}})["spec"] == {"replicas": 1}
    assert set_defaults({"kind": "Pod", "spec": {}})["spec"] == {}


def test_a_spec_read_through_the_defaults_leaves_the_object_as_it_was() -> None:
    stored = deployment(strategy={"rollingUpdate": {"maxSurge": 0}})
    before = copy.deepcopy(stored)
    assert defaulted_spec(stored)["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": "25%"}
    assert stored == before

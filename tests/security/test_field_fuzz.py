"""Issue 27, points 3 and 8: a fuzz test per field family. Hypothesis generates values past every range of each
family (durations, quantities, integers, int-or-percent, names and label keys, cron schedules, dollar amounts)
and puts them where a NodePool or a workload holds them. Each is either refused with an error naming that field,
or accepted, and then everything the engine asks of it works: an accepted NodePool's budgets and durations can
be evaluated at any moment (one that could not stopped every disruption pass of its cluster). Never a crash."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.disruption import budgets
from provisioner.durations import MAX_SECONDS, parse_duration
from provisioner.manifests.cluster import validate_cluster_object
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.nodepool import parse_nodepool

TODAY = datetime(2026, 12, 5, tzinfo=UTC).timestamp()
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "fuzz"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "d"},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            }
        },
        "disruption": {"consolidateAfter": "10s"},
    },
}

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}},
    },
}


def put(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    node: Any = doc
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {}) if not part.isdigit() else node[int(part)]
    node[int(last) if last.isdigit() else last] = value
    return doc


def named(error: ManifestError, field: str) -> bool:
    return error.field == field or error.field.startswith(field) or field in error.message


# Values past every range -------------------------------------------------------------------------------------

huge_ints = st.one_of(
    st.integers(min_value=2**31 - 5, max_value=2**70),
    st.integers(min_value=-(2**70), max_value=-1),
    st.sampled_from([0, 2**31, 2**63 - 1, 2**63, -(2**63), 2**64]),
)
durations = st.one_of(
    st.builds(lambda n, u: f"{n}{u}", st.integers(min_value=0, max_value=10**15), st.sampled_from(["h", "m", "s"])),
    st.builds(
        lambda h, m: f"{h}h{m}m",
        st.integers(min_value=2562040, max_value=2562060),
        st.integers(min_value=0, max_value=99),
    ),
    st.sampled_from(["2562047h47m16s", "2562047h47m17s", "2562048h", "999999999999h", "Never", "", "-1h", "1.5h"]),
    st.text(max_size=12),
)
quantities = st.one_of(
    st.builds(
        lambda n, s: f"{n}{s}",
        st.integers(min_value=-(10**30), max_value=10**30),
        st.sampled_from(
            ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e9", "e18", "e30"]
        ),
    ),
    st.sampled_from(["1e999", "NaN", "Infinity", "-0", "0.0001", "9223372036854775807", "9223372036854775808Ei"]),
    st.text(max_size=10),
)
percents = st.one_of(
    st.builds(lambda n: f"{n}%", st.integers(min_value=-1000, max_value=1000)),
    st.builds(str, huge_ints),
    huge_ints,
    st.text(max_size=6),
)
names = st.one_of(
    st.text(min_size=0, max_size=300), st.from_regex(r"[a-z0-9]([-a-z0-9]{0,300}[a-z0-9])?", fullmatch=True)
)
crons = st.one_of(
    st.sampled_from(["@yearly", "@hourly", "@every 5m", "0 0 * * *", "61 25 32 13 8", "* * * * * *", "0 0 30 2 *"]),
    st.text(max_size=20),
)


# NodePools: refused naming the field, or evaluable ------------------------------------------------------------


def accepted_nodepool_is_evaluable(doc: dict[str, Any], field: str) -> None:
    try:
        pool = parse_nodepool(doc)
    except ManifestError as error:
        assert named(error, field), (field, error.field, error.message)
        return
    # From the epoch to as far as `karp advance` can take a lab (Go's longest duration past today), and beyond.
    for moment in (0.0, TODAY, TODAY + MAX_SECONDS, datetime(9999, 12, 31, 23, 0, tzinfo=UTC).timestamp()):
        budgets.evaluate(pool, moment)
    for duration in (pool.expire_after, pool.consolidate_after):
        if duration not in (None, "Never"):
            assert parse_duration(str(duration), allow_never=True) is not None


@FUZZ
@given(durations)
def test_budget_durations(value: Any) -> None:
    budget = {"nodes": "0", "schedule": "0 0 * * *", "duration": value}
    accepted_nodepool_is_evaluable(put(NODEPOOL, "spec.disruption.budgets", [budget]), "spec.disruption.budgets[0]")


@FUZZ
@given(durations, st.sampled_from(["spec.disruption.consolidateAfter", "spec.template.spec.expireAfter"]))
def test_nodepool_durations(value: Any, field: str) -> None:
    accepted_nodepool_is_evaluable(put(NODEPOOL, field, value), field)


@FUZZ
@given(durations)
def test_termination_grace_periods(value: Any) -> None:
    field = "spec.template.spec.terminationGracePeriod"
    accepted_nodepool_is_evaluable(put(NODEPOOL, field, value), field)


@FUZZ
@given(crons)
def test_budget_schedules(value: Any) -> None:
    budget = {"nodes": "0", "schedule": value, "duration": "1h"}
    accepted_nodepool_is_evaluable(put(NODEPOOL, "spec.disruption.budgets", [budget]), "spec.disruption.budgets[0]")


@FUZZ
@given(percents)
def test_budget_nodes(value: Any) -> None:
    accepted_nodepool_is_evaluable(
        put(NODEPOOL, "spec.disruption.budgets", [{"nodes": value}]), "spec.disruption.budgets[0].nodes"
    )


@FUZZ
@given(huge_ints)
def test_nodepool_weights(value: Any) -> None:
    accepted_nodepool_is_evaluable(put(NODEPOOL, "spec.weight", value), "spec.weight")


@FUZZ
@given(quantities, st.sampled_from(["cpu", "memory", "nodes", "pods"]))
def test_nodepool_limits(value: Any, resource: str) -> None:
    accepted_nodepool_is_evaluable(put(NODEPOOL, "spec.limits", {resource: value}), "spec.limits")


@FUZZ
@given(st.one_of(st.text(max_size=20), st.builds(str, st.floats(allow_nan=True, allow_infinity=True))))
def test_approval_thresholds(value: Any) -> None:
    doc = put(
        NODEPOOL,
        "metadata.annotations",
        {"karpui.dev/approval-mode": "auto-below", "karpui.dev/approval-threshold": value},
    )
    accepted_nodepool_is_evaluable(doc, "metadata.annotations")


@FUZZ
@given(names)
def test_nodepool_names(value: Any) -> None:
    accepted_nodepool_is_evaluable(put(NODEPOOL, "metadata.name", value), "metadata.name")


# Workloads: refused naming the field, or within kube-apiserver's ranges ------------------------------------------


def workload_refused_or_in_range(doc: dict[str, Any], field: str, *also: str) -> bool:
    """Whether `doc` was accepted; refused, the error names `field` (or one of `also`, fields whose rule involves
    it: a minReadySeconds past progressDeadlineSeconds is the deadline's error)."""
    try:
        validate_cluster_object(doc)
    except ManifestError as error:
        assert any(named(error, name) for name in (field, *also)), (field, error.field, error.message)
        return False
    return True


@FUZZ
@given(huge_ints, st.sampled_from(["spec.replicas", "spec.revisionHistoryLimit", "spec.minReadySeconds"]))
def test_workload_integers(value: Any, field: str) -> None:
    if workload_refused_or_in_range(put(DEPLOYMENT, field, value), field, "spec.progressDeadlineSeconds"):
        assert 0 <= value <= 2**31 - 1


@FUZZ
@given(percents, st.sampled_from(["maxUnavailable", "maxSurge"]))
def test_rolling_update_int_or_percent(value: Any, name: str) -> None:
    field = f"spec.strategy.rollingUpdate.{name}"
    doc = put(DEPLOYMENT, "spec.strategy", {"type": "RollingUpdate", "rollingUpdate": {name: value}})
    if workload_refused_or_in_range(doc, "spec.strategy"):
        number = int(value[:-1]) if isinstance(value, str) else value
        assert isinstance(value, int | str) and number >= 0
        assert not (name == "maxUnavailable" and isinstance(value, str) and number > 100), field


@FUZZ
@given(huge_ints, st.sampled_from(["containerPort", "hostPort"]))
def test_container_ports(value: Any, name: str) -> None:
    ports = [{"containerPort": 80, name: value}]
    doc = put(DEPLOYMENT, "spec.template.spec.containers", [{"name": "a", "image": "x", "ports": ports}])
    if workload_refused_or_in_range(doc, "spec.template.spec.containers[0].ports[0]"):
        assert value == 0 and name == "hostPort" or 1 <= value <= 65535


@FUZZ
@given(quantities, st.sampled_from(["cpu", "memory"]))
def test_container_resources(value: Any, resource: str) -> None:
    resources = {"requests": {resource: value}}
    doc = put(DEPLOYMENT, "spec.template.spec.containers", [{"name": "a", "image": "x", "resources": resources}])
    workload_refused_or_in_range(doc, "spec.template.spec.containers[0].resources")


@FUZZ
@given(names)
def test_container_names(value: Any) -> None:
    doc = put(DEPLOYMENT, "spec.template.spec.containers", [{"name": value, "image": "x"}])
    if workload_refused_or_in_range(doc, "spec.template.spec.containers[0].name"):
        assert 0 < len(value) <= 63


@FUZZ
@given(names)
def test_node_names(value: Any) -> None:
    doc = put(DEPLOYMENT, "spec.template.spec.nodeName", value)
    if workload_refused_or_in_range(doc, "spec.template.spec.nodeName") and value:
        assert len(value) <= 253

"""Migrations that move data keep it: upgrading a lab fills the new summary columns of its pods and commands."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("karpui", "0004_device_declarations")]
AFTER = [("karpui", "0005_pod_summaries")]


@pytest.mark.django_db(transaction=True)
def test_0005_fills_summary_columns_of_existing_pods() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    cluster = old.get_model("karpui", "Cluster").objects.create(name="upgraded")
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default", "uid": "u-1"},
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}],
        },
        "status": {"phase": "Running"},
    }
    old.get_model("karpui", "KubeObject").objects.create(
        cluster=cluster, kind="Pod", namespace="default", name="web-0", uid="u-1", body=body
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    row = new.get_model("karpui", "KubeObject").objects.get(name="web-0")

    assert (row.phase, row.node_name, row.unschedulable, row.cpu_millis, row.memory_bytes) == (
        "Running",
        "node-a",
        False,
        250,
        1073741824,
    )
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_0006_fills_the_phase_of_existing_disruption_commands() -> None:
    before, after = [("karpui", "0005_pod_summaries")], [("karpui", "0006_cost_history")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    cluster = old.get_model("karpui", "Cluster").objects.create(name="upgraded")
    body = {"kind": "DisruptionCommand", "metadata": {"name": "empty-1"}, "spec": {}, "status": {"phase": "Denied"}}
    old.get_model("karpui", "KubeObject").objects.create(
        cluster=cluster, kind="DisruptionCommand", name="empty-1", uid="u-2", body=body
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    new = executor.loader.project_state(after).apps

    assert new.get_model("karpui", "KubeObject").objects.get(name="empty-1").phase == "Denied"
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_0010_lets_an_existing_editors_group_write_the_labs_objects() -> None:
    before, after = [("karpui", "0009_trends")], [("karpui", "0010_engine_token_and_editors")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    group = old.get_model("auth", "Group").objects.get(name="editors")
    kubeobject = old.get_model("auth", "Permission").objects.filter(codename__endswith="_kubeobject")
    group.permissions.remove(*kubeobject)  # as a group made before editors wrote workloads

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    new = executor.loader.project_state(after).apps
    codenames = (
        new.get_model("auth", "Group").objects.get(name="editors").permissions.values_list("codename", flat=True)
    )
    assert sorted(c for c in codenames if c.endswith("_kubeobject")) == [
        "add_kubeobject",
        "change_kubeobject",
        "delete_kubeobject",
    ]
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

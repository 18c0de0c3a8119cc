"""Which pod spec stands for a DaemonSet's overhead: its newest live pod, with the template's required node
affinity, else its template (Karpenter's getDaemonSetPods and Cluster.UpdateDaemonSet)."""

from __future__ import annotations

from types import SimpleNamespace

from provisioner.controllers.provisioning import daemonsets
from provisioner.labels import NODE_NAME_FIELD
from provisioner.quantity import parse_resources

ZONE = "topology.kubernetes.io/zone"


def spec(cpu: str, affinity_terms: list | None = None) -> dict:
    result: dict = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if affinity_terms is not None:
        required = {"nodeSelectorTerms": affinity_terms}
        result["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    return result


def daemonset(template_spec: dict, name: str = "ds") -> dict:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"{name}-uid"},
        "spec": {"template": {"spec": template_spec}},
    }


def daemon_pod(name: str, pod_spec: dict, created: str, owner: str = "ds") -> dict:
    ref = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": owner, "uid": f"{owner}-uid", "controller": True}
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"{name}-uid",
            "creationTimestamp": created,
            "ownerReferences": [ref],
        },
        "spec": pod_spec,
    }


def overhead(daemonset_objs: list[dict], pods: list[dict]) -> list:
    objects = {"DaemonSet": daemonset_objs, "Pod": pods}
    api = SimpleNamespace(list=lambda kind, *a, **k: objects.get(kind, []), scan=lambda kind: objects.get(kind, []))
    return daemonsets(SimpleNamespace(api=api, ignore_dra_requests=False))


def pinned(node: str) -> list:
    return [{"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}]}]


def test_without_a_live_pod_the_template_stands_for_the_daemonset():
    [ds] = overhead([daemonset(spec("4"))], [])
    assert ds.template.requests == parse_resources({"cpu": "4"})


def test_the_newest_live_pod_stands_for_the_daemonset():
    pods = [
        daemon_pod("ds-old", spec("1"), "2026-01-01T00:00:00Z"),
        daemon_pod("ds-new", spec("2"), "2026-01-02T00:00:00Z"),
        daemon_pod("other-new", spec("3"), "2026-01-03T00:00:00Z", owner="other"),
    ]
    [ds] = overhead([daemonset(spec("4"))], pods)
    assert ds.template.requests == parse_resources({"cpu": "2"})


def test_the_live_pods_pin_to_its_node_gives_way_to_the_templates_required_affinity():
    zone_term = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a"]}]}]
    pods = [daemon_pod("ds-a", spec("2", pinned("node-1")), "2026-01-01T00:00:00Z")]
    [ds] = overhead([daemonset(spec("4", zone_term))], pods)
    [term] = ds.template.required_terms
    assert set(term.requirements.keys()) == {ZONE}


def test_a_template_without_required_affinity_leaves_the_live_pod_unpinned():
    pods = [daemon_pod("ds-a", spec("2", pinned("node-1")), "2026-01-01T00:00:00Z")]
    [ds] = overhead([daemonset(spec("4"))], pods)
    assert ds.template.required_terms == () and ds.template.requests == parse_resources({"cpu": "2"})

"""Karpenter as a lab cluster shows it: the objects `helm install karpenter kwok/charts -n kube-system` leaves in a
kind cluster (the controller's Deployment, its ServiceAccount, ClusterRoles and bindings) and kind's control-plane
node the controller's pod runs on. The Deployment is the engine's face: its pods' logs are the engine's log, and
its controller container's environment holds the cluster's Karpenter options (provisioner.options), so `kubectl
set env deploy/karpenter FEATURE_GATES=...` changes what the engine does, as it would restart Karpenter.

Karpenter's own guides install it in `kube-system`; older ones (EKS workshops, v1beta1 days) in a namespace
`karpenter`, and read its logs there (`kubectl -n karpenter logs -l app.kubernetes.io/name=karpenter`). A lab shows
the one engine in both, as two releases of the chart: both Deployments' pods log the engine's lines, and setting an
option on either sets it on both (karpui.karpenter), so they never disagree."""

from __future__ import annotations

import copy
from typing import Any

from provisioner.cluster.conditions import healthy_node_conditions, node_info
from provisioner.cluster.objects import Obj

NAMESPACE = "kube-system"
NAME = "karpenter"
# Where the controller's Deployment is, by release; the first is the one Karpenter's guides use today.
NAMESPACES = (NAMESPACE, "karpenter")
CONTAINER = "controller"
APP_LABEL = "app.kubernetes.io/name"
SELECTOR = {APP_LABEL: NAME, "app.kubernetes.io/instance": NAME}
LABELS = {
    "helm.sh/chart": "karpenter-1.8.0",
    **SELECTOR,
    "app.kubernetes.io/version": "1.8.0",
    "app.kubernetes.io/managed-by": "karpui",
}
IMAGE = "karpui/karpenter-lab:1.8.0"
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"
# kind's node image reports the kubelet it runs; the lab's nodes print this version (karpui.kubectl.resources).
KUBELET_VERSION = "v1.34.0"


def control_plane_name(cluster: str) -> str:
    """kind names its control-plane node after the cluster: `kind create cluster --name karpenter-lab` makes
    `karpenter-lab-control-plane`."""
    return f"{cluster}-control-plane"


def control_plane_node(cluster: str, created: str) -> Obj:
    """kind's control-plane node, tainted as kind's multi-node clusters taint it, so that workloads wait for the
    nodes Karpenter makes (kind's single-node cluster leaves it open; the lab's pods would all land on it)."""
    name = control_plane_name(cluster)
    resources = {"cpu": "4", "ephemeral-storage": "100Gi", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                CONTROL_PLANE_ROLE: "",
                "node.kubernetes.io/exclude-from-external-load-balancers": "",
            },
        },
        "spec": {
            "podCIDR": "10.244.0.0/24",
            "providerID": f"kind://docker/{cluster}/{name}",
            "taints": [{"key": CONTROL_PLANE_ROLE, "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "phase": "Running",
            "conditions": healthy_node_conditions(created),
            "addresses": [{"type": "InternalIP", "address": "172.18.0.2"}, {"type": "Hostname", "address": name}],
            "nodeInfo": node_info(
                "amd64",
                "linux",
                KUBELET_VERSION,
                "containerd://2.1.1",
                kernel="6.1.0",
                image="Debian GNU/Linux 12 (bookworm)",
            ),
        },
    }


def _env(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


def deployment(
    namespace: str = NAMESPACE, preference_policy: str = "Respect", min_values_policy: str = "Strict"
) -> Obj:
    """The controller's Deployment as the chart renders it: its values `settings.preferencePolicy` and
    `settings.minValuesPolicy` are the deployment's (KARPUI_PREFERENCE_POLICY, KARPUI_MIN_VALUES_POLICY; the chart's
    defaults otherwise). FEATURE_GATES and IGNORE_DRA_REQUESTS are left out, so the cluster keeps karpui's defaults
    (KARPUI_FEATURE_GATES, KARPUI_IGNORE_DRA_REQUESTS) until someone sets them here. The pod also tolerates kind's
    control-plane taint, which the lab keeps on its control-plane node."""
    container = {
        "name": CONTAINER,
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            _env("KUBERNETES_MIN_VERSION", "1.19.0-0"),
            _env("KARPENTER_SERVICE", NAME),
            _env("LOG_LEVEL", "info"),
            _env("METRICS_PORT", "8080"),
            _env("HEALTH_PROBE_PORT", "8081"),
            {
                "name": "SYSTEM_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
            _env("BATCH_MAX_DURATION", "10s"),
            _env("BATCH_IDLE_DURATION", "1s"),
            _env("PREFERENCE_POLICY", preference_policy),
            _env("MIN_VALUES_POLICY", min_values_policy),
        ],
        "ports": [
            {"name": "http-metrics", "containerPort": 8080, "protocol": "TCP"},
            {"name": "http", "containerPort": 8081, "protocol": "TCP"},
        ],
        "securityContext": {
            "runAsUser": 65536,
            "runAsGroup": 65536,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "selector": {"matchLabels": dict(SELECTOR)},
            "template": {
                "metadata": {"labels": dict(SELECTOR)},
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {"fsGroup": 65536},
                    "dnsPolicy": "Default",
                    "containers": [container],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}
                                ]
                            }
                        },
                    },
                    "tolerations": [
                        {"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": CONTROL_PLANE_ROLE, "operator": "Exists", "effect": "NoSchedule"},
                    ],
                },
            },
        },
    }


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, list[str]]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


# The chart's ClusterRoles (kwok/charts/templates/clusterrole*.yaml): the provider's own, and Karpenter's core.
CLUSTER_ROLES: dict[str, list[dict[str, list[str]]]] = {
    NAME: [
        _rule(["karpenter.kwok.sh"], ["kwoknodeclasses"], ["get", "list", "watch"]),
        _rule(["karpenter.kwok.sh"], ["kwoknodeclasses", "kwoknodeclasses/status"], ["patch", "update"]),
    ],
    f"{NAME}-core": [
        _rule(
            ["karpenter.sh"],
            ["nodepools", "nodepools/status", "nodeclaims", "nodeclaims/status", "nodeoverlays", "nodeoverlays/status"],
            ["get", "list", "watch"],
        ),
        _rule(
            ["autoscaling.x-k8s.io"],
            ["capacitybuffers", "capacitybuffers/status"],
            ["get", "list", "watch", "update", "patch"],
        ),
        _rule(
            [""],
            [
                "pods",
                "nodes",
                "persistentvolumes",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "namespaces",
                "podtemplates",
                "services",
            ],
            ["get", "list", "watch"],
        ),
        _rule(["storage.k8s.io"], ["storageclasses", "csinodes", "volumeattachments"], ["get", "watch", "list"]),
        _rule(["apps"], ["daemonsets", "deployments", "replicasets", "statefulsets"], ["get", "list", "watch"]),
        _rule(["autoscaling.k8s.io"], ["verticalpodautoscalers"], ["get", "list", "watch"]),
        _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], ["watch", "list"]),
        _rule(["policy"], ["poddisruptionbudgets"], ["get", "list", "watch"]),
        _rule(
            ["karpenter.sh"],
            ["nodeclaims", "nodeclaims/status", "nodeclaims/finalizers"],
            ["create", "delete", "update", "patch"],
        ),
        _rule(
            ["karpenter.sh"],
            ["nodepools", "nodepools/status", "nodepools/finalizers", "nodeoverlays/status"],
            ["update", "patch"],
        ),
        _rule([""], ["events"], ["create", "patch"]),
        _rule([""], ["nodes"], ["create", "patch", "delete", "update"]),
        _rule([""], ["pods/eviction"], ["create"]),
        _rule([""], ["pods"], ["delete"]),
    ],
}


def install(preference_policy: str = "Respect", min_values_policy: str = "Strict") -> list[Obj]:
    """Every object of both releases but the node, in the order helm creates them, the Deployments rendered with
    the two policies given."""
    objects: list[Obj] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}, "status": {"phase": "Active"}}
        for namespace in NAMESPACES[1:]
    ]
    objects += [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
        }
        for namespace in NAMESPACES
    ]
    for name, rules in CLUSTER_ROLES.items():
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name, "labels": dict(LABELS)},
                "rules": copy.deepcopy(rules),
            }
        )
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name, "labels": dict(LABELS)},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns} for ns in NAMESPACES],
            }
        )
    objects += [deployment(namespace, preference_policy, min_values_policy) for namespace in NAMESPACES]
    return objects


def is_controller_pod(pod: Any) -> bool:
    """A pod of a controller's Deployment: its logs are the engine's."""
    meta = pod.get("metadata") or {}
    return (
        meta.get("namespace") in NAMESPACES
        and (meta.get("labels") or {}).get(APP_LABEL) == NAME
        and any(
            ref.get("kind") == "ReplicaSet" and str(ref.get("name", "")).startswith(f"{NAME}-")
            for ref in meta.get("ownerReferences") or []
        )
    )

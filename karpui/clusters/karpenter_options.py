"""The Karpenter options each cluster's controllers decide with (FEATURE_GATES, PREFERENCE_POLICY, MIN_VALUES_POLICY,
IGNORE_DRA_REQUESTS): every lookup goes through `cluster_options`, so where they are set is decided in one place."""

from __future__ import annotations

import copy

from django.conf import settings

from karpui import models
from karpui.people.audit import Actor, audit_event_create
from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import Obj
from provisioner.manifests import ManifestError
from provisioner.options import OPTION_VARIABLES, KarpenterOptions, container_env, env_problem
from provisioner.sim import karpenter as face


def cluster_options(cluster: models.Cluster) -> KarpenterOptions:
    """The cluster's options: today the deployment's settings (KARPUI_FEATURE_GATES, KARPUI_PREFERENCE_POLICY,
    KARPUI_MIN_VALUES_POLICY, KARPUI_IGNORE_DRA_REQUESTS, KARPUI_LEGACY_NODE_REPAIR), the same for every cluster."""
    return KarpenterOptions(
        feature_gates=dict(settings.KARPUI_FEATURE_GATES),
        preference_policy=settings.KARPUI_PREFERENCE_POLICY,
        min_values_policy=settings.KARPUI_MIN_VALUES_POLICY,
        ignore_dra_requests=settings.KARPUI_IGNORE_DRA_REQUESTS,
        legacy_node_repair=settings.KARPUI_LEGACY_NODE_REPAIR,
    )


# Karpenter's Deployment in a lab ----------------------------------------------------------------------------------
#
# A lab's Karpenter is the Deployment `karpenter` in kube-system (or in `karpenter`, where older guides install it;
# provisioner.sim.karpenter renders the chart's): the lab reads its controller's environment over the options above
# (provisioner.lab). A write that changes it is checked here, made on both releases alike, and audited.

OptionEnv = dict[str, dict[str, str]]  # namespace -> the option variables its Deployment sets


def is_controller(obj: Obj) -> bool:
    meta = obj.get("metadata") or {}
    return (
        obj.get("kind") == "Deployment" and meta.get("name") == face.NAME and meta.get("namespace") in face.NAMESPACES
    )


def check(obj: Obj) -> None:
    """Refuse a controller Deployment whose environment Karpenter could not start with, naming the field."""
    if is_controller(obj) and (problem := env_problem(obj, face.CONTAINER)) is not None:
        raise ManifestError(problem[1], field=problem[0])


def option_env(api: ClusterAPI) -> OptionEnv:
    """Each release's option variables, as stored now."""
    found: OptionEnv = {}
    for namespace in face.NAMESPACES:
        deployment = api.get("Deployment", face.NAME, namespace)
        if deployment is not None:
            found[namespace] = container_env(deployment, face.CONTAINER)
    return found


def options_written(cluster: models.Cluster, api: ClusterAPI, before: OptionEnv, actor: Actor | None) -> None:
    """After a write: if it changed a release's option variables, give the other release the same ones (it rolls
    out too, as Karpenter restarts to read them) and record the change in the audit trail."""
    after = option_env(api)
    changed = [ns for ns in face.NAMESPACES if ns in after and after[ns] != before.get(ns)]
    if not changed:
        return
    source = changed[0]
    wanted = after[source]
    for namespace in face.NAMESPACES:
        if namespace != source and namespace in after and after[namespace] != wanted:
            deployment = api.get("Deployment", face.NAME, namespace)
            assert deployment is not None
            api.update(_with_option_env(deployment, wanted), spec_changed=True)
    if actor is not None:  # else the install itself, not a person's decision
        audit_event_create(
            actor,
            "set options",
            "Deployment",
            f"{source}/{face.NAME}",
            before.get(source, {}),
            dict(wanted),
            reason=f"Karpenter options of cluster {cluster.name}",
            cluster=cluster,
        )


def _with_option_env(deployment: Obj, wanted: dict[str, str]) -> Obj:
    """The Deployment with its controller container's option variables made `wanted`, other variables kept."""
    updated = copy.deepcopy(deployment)
    for container in updated["spec"]["template"]["spec"].get("containers") or []:
        if container.get("name") == face.CONTAINER:
            env = [e for e in container.get("env") or [] if e.get("name") not in OPTION_VARIABLES or "valueFrom" in e]
            container["env"] = env + [{"name": name, "value": value} for name, value in wanted.items()]
    return updated

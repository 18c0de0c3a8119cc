"""The kwok cloud provider in the lab: launching picks the cheapest offering; Nodes appear after the class's
registration delay and become Ready, as Karpenter's kwok provider and kwok's node stages do."""

from __future__ import annotations

import random
from typing import Any

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.cluster.objects import Obj
from provisioner.quantity import format_resources
from provisioner.requirements import Requirements
from provisioner.scheduling.launch import cheapest_launch
from provisioner.scheduling.results import InstanceTypeOption, NodeClaimPlan
from provisioner.taints import UNREGISTERED


class LaunchError(Exception):
    """No instance type of the NodeClaim can be launched (insufficient capacity)."""


def launch(nodeclaim: Obj, instance_types: dict[str, InstanceType], rng: random.Random) -> dict[str, Any]:
    """Choose the type and offering for a NodeClaim: the cheapest compatible available offering."""
    requirements = Requirements.from_specs(nodeclaim["spec"].get("requirements") or [])
    names = requirements.get(wk.INSTANCE_TYPE)
    options = []
    for name in sorted(names.values if names is not None else ()):
        it = instance_types.get(name)
        if it is not None:
            price = it.cheapest_price(requirements)
            if price is not None:
                options.append(InstanceTypeOption(it, price))
    if not options:
        raise LaunchError("all requested instance types were unavailable during launch")
    plan = NodeClaimPlan(
        nodepool="",
        pods=(),
        requests={},
        requirements=requirements,
        options=tuple(options),
        labels={},
        taints=(),
        startup_taints=(),
    )
    chosen = cheapest_launch(plan, rng)
    it, offering = chosen.instance_type, chosen.offering
    labels = {
        **(nodeclaim["metadata"].get("labels") or {}),
        **{k: v.any_value() for k, v in requirements.items() if v.operator == "In" and len(v.values) == 1},
        wk.INSTANCE_TYPE: it.name,
        **it.labels,
        wk.CAPACITY_TYPE: offering.capacity_type,
        wk.ZONE: offering.zone,
    }
    return {
        "instance_type": it.name,
        "zone": offering.zone,
        "capacity_type": offering.capacity_type,
        "price": offering.price,
        "labels": labels,
        "capacity": format_resources(it.capacity),
        "allocatable": format_resources(it.allocatable),
    }


def node_for(nodeclaim: Obj, now_ready: bool = True) -> Obj:
    """The Node kwok creates for a launched NodeClaim (named like it; hostname label = NodeClaim name)."""
    status = nodeclaim["status"]
    name = nodeclaim["metadata"]["name"]
    labels = {
        **(nodeclaim["metadata"].get("labels") or {}),
        wk.HOSTNAME: name,
        "eks-node-viewer/instance-price": f"{float(nodeclaim['metadata']['annotations'].get('karpui.dev/price', 0)):f}",
        "kwok-partition": "a",
        "kwok.x-k8s.io/node": "fake",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {
            "providerID": status["providerID"],
            "taints": [{"key": UNREGISTERED, "effect": "NoExecute"}],
        },
        "status": {
            "capacity": dict(status.get("capacity") or {}),
            "allocatable": dict(status.get("allocatable") or {}),
            "phase": "Running",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if now_ready else "False",
                    "reason": "KubeletReady",
                    "message": "kwok node is ready",
                }
            ],
        },
    }

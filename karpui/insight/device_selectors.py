"""Read-only queries for DRA: the Devices page, and the devices instance types declare (for the catalog page)."""

from __future__ import annotations

from typing import Any

from karpui import models
from karpui.clusters import configuration, lab, store
from karpui.insight.pending import pending_pods
from karpui.kinds import display
from provisioner.cluster.dra import declare
from provisioner.dra.cel import Device, matches
from provisioner.dra.claims import dra_config_pools


def devices_overview(cluster: models.Cluster) -> dict[str, Any]:
    """DeviceClasses, published slices per node, claims and their allocations, pods pending on devices."""
    claims = lab.objects(cluster, "ResourceClaim")
    allocations = []
    for claim in claims:
        status = claim.get("status") or {}
        for result in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []:
            allocations.append(
                {
                    "claim": f"{claim['metadata'].get('namespace')}/{claim['metadata']['name']}",
                    "pods": [r["name"] for r in status.get("reservedFor") or []],
                    **result,
                }
            )
    slices = lab.objects(cluster, "ResourceSlice")
    nodes = {(s["spec"]["driver"], s["spec"]["pool"]["name"]): s["spec"].get("nodeName", "") for s in slices}
    for allocation in allocations:
        allocation["node"] = nodes.get((allocation.get("driver"), allocation.get("pool")), "")
    waiting = pending_pods(cluster=cluster, group="none")["pods"]
    pending = [p for p in waiting if any(v.get("kind") == "devices" for v in p["verdicts"])]
    classes = _requested_classes(cluster, [(p["namespace"], p["name"]) for p in pending]) if pending else {}
    for pod in pending:
        pod["classes"] = classes.get((pod["namespace"], pod["name"]), [])
    return {
        "slices": slices,
        "claims": claims,
        "allocations": allocations,
        "pending": pending,
    }


def _requested_classes(cluster: models.Cluster, pods: list[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
    """The DeviceClasses each pod's claims ask for, from its ResourceClaims or, before they exist, its templates.
    Three queries for any number of pods."""
    objects = models.KubeObject.objects.filter(cluster=cluster, namespace__in={ns for ns, _ in pods})
    bodies = {
        (row.namespace, row.name): row.body for row in objects.filter(kind="Pod", name__in={name for _, name in pods})
    }
    claims = {
        (r.kind, r.namespace, r.name): r.body
        for r in objects.filter(kind__in=("ResourceClaim", "ResourceClaimTemplate"))
    }
    result = {}
    for (namespace, name), pod in bodies.items():
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        made = {s["name"]: s.get("resourceClaimName") for s in statuses}
        specs = []
        for entry in pod["spec"].get("resourceClaims") or []:
            claim = entry.get("resourceClaimName") or made.get(entry["name"])
            if claim and ("ResourceClaim", namespace, claim) in claims:
                specs.append(claims["ResourceClaim", namespace, claim]["spec"])
            elif template := claims.get(("ResourceClaimTemplate", namespace, entry.get("resourceClaimTemplateName"))):
                specs.append(template["spec"].get("spec") or {})
        named = {
            choice.get("deviceClassName", "")
            for spec in specs
            for request in (spec.get("devices") or {}).get("requests") or []
            for choice in ([request["exactly"]] if request.get("exactly") else request.get("firstAvailable") or [])
        }
        result[namespace, name] = sorted(named - {""})
    return result


def declared_types(cluster: models.Cluster) -> dict[str, Any]:
    """Instance types by name with the devices the provisioner believes they get: from the catalog file, from
    DeviceDeclarations, and (in the lab) from DRAConfigs."""

    pools = [pool for config in lab.objects(cluster, "DRAConfig") for pool in dra_config_pools(config)]
    return {
        it.name: it for catalog in declare(configuration.lab_config(cluster).catalogs, pools).values() for it in catalog
    }


def declared_devices(cluster: models.Cluster) -> dict[str, list[str]]:
    """`driver: device, ...` per instance type that declares any, for the catalog page."""
    return {
        name: [f"{group['driver']}: {', '.join(str(d['name']) for d in group['devices'])}" for group in it.devices]
        for name, it in declared_types(cluster).items()
        if it.devices
    }


def device_classes(cluster: models.Cluster) -> list[dict[str, Any]]:
    """Each DeviceClass with the instance types whose declared devices (DeviceDeclarations, or a lab DRAConfig)
    its CEL selectors match: the types a NodePool could launch for a claim of that class."""

    types = declared_types(cluster)
    devices = [
        (name, Device.from_spec(spec, str(group["driver"]), str(group["pool"])))
        for name, it in sorted(types.items())
        for group in it.devices
        for spec in group["devices"]  # type: ignore[attr-defined]
    ]
    result = []
    for manifest in lab.objects(cluster, "DeviceClass"):
        selectors = [s["cel"]["expression"] for s in (manifest.get("spec") or {}).get("selectors") or [] if "cel" in s]
        matching = sorted({name for name, device in devices if all(matches(e, device) for e in selectors)})
        result.append({"name": manifest["metadata"]["name"], "selectors": selectors, "instance_types": matching})
    return result


def declarations(cluster: models.Cluster) -> list[dict[str, Any]]:
    """Every source of declared devices, DeviceDeclarations and (in the lab) each DRAConfig pool, with the
    instance types it covers. Where a DRAConfig's driver publishes on a type, it replaces a declaration of the
    same driver there (provisioner.cluster.dra.declare), and the declaration's row says on how many."""
    pools = [pool for config in lab.objects(cluster, "DRAConfig") for pool in dra_config_pools(config)]
    specs = {row.name: row.spec for row in models.DeviceDeclaration.objects.order_by("name")}
    types = [(row.name, it) for row in store.catalogs_with_types() for it in store.catalog_domain(row).instance_types]
    published = {
        (it.name, pool.driver)
        for _, it in types
        for pool in pools
        if pool.covers({**it.labels, "node.kubernetes.io/instance-type": it.name})
    }
    rows = []
    for declaration in store.device_declarations():
        covered = [it.name for catalog, it in types if declaration.applies_to(catalog, it)]
        spec = specs.get(declaration.name) or {}
        rows.append(
            {
                "source": "DeviceDeclaration",
                "name": declaration.name,
                "driver": declaration.driver,
                "selector": display.label_selector(spec.get("instanceTypeSelector")),
                "devices": [str(d.get("name", "")) for d in declaration.devices],
                "types": len(covered),
                "superseded": sum((name, declaration.driver) in published for name in covered),
            }
        )
    for config in lab.objects(cluster, "DRAConfig"):
        spec = config.get("spec") or {}
        for pool, entry in zip(dra_config_pools(config), spec.get("pools") or [], strict=False):
            labels = [{**it.labels, "node.kubernetes.io/instance-type": it.name} for _, it in types]
            rows.append(
                {
                    "source": "DRAConfig",
                    "name": f"{config['metadata']['name']} (pool {pool.name})",
                    "driver": pool.driver,
                    "selector": display.node_selector_terms(entry.get("nodeSelectorTerms")),
                    "devices": [str(d.get("name", "")) for entries in pool.slices for d in entries],
                    "types": sum(pool.covers(each) for each in labels),
                    "superseded": 0,
                }
            )
    return rows

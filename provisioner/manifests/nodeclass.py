"""Node class manifests: KWOKNodeClass (validated) and EC2NodeClass (accepted, spec kept as given)."""

from __future__ import annotations

import re
from typing import Any

from provisioner.durations import DurationError, parse_duration
from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.objects import NodeClass

KWOK_API = "karpenter.kwok.sh/v1alpha1"
KWOK_KIND = "KWOKNodeClass"
EC2_APIS = ("karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1")
EC2_KIND = "EC2NodeClass"
# The node classes karpui's cloud provider supports.
NODE_CLASS_KINDS = {KWOK_KIND: (KWOK_API,), EC2_KIND: EC2_APIS}
# What a v1beta1 nodeClassRef without a kind means until the node classes that exist say otherwise: the kind taken
# where no node class of its name exists yet (provisioner.nodeclasses, whose rule the services apply on every write).
DEFAULT_NODE_CLASS_KIND = EC2_KIND


def default_group(kind: str) -> str:
    """A v1beta1 nodeClassRef's group when it gives no apiVersion: its kind's own (Karpenter's conversion takes the
    cloud provider's node class's group whatever the kind, where a node class of another group could never be
    found)."""
    versions = NODE_CLASS_KINDS.get(kind) or NODE_CLASS_KINDS[DEFAULT_NODE_CLASS_KIND]
    return versions[0].split("/", 1)[0]


def kind_of_group(group: str) -> str:
    """The node class kind an API group serves ("" for none)."""
    return next(
        (kind for kind, versions in NODE_CLASS_KINDS.items() if group in {v.split("/")[0] for v in versions}), ""
    )


_DURATION = re.compile(r"^([0-9]+(s|m|h))+$")


def parse_nodeclass(doc: dict[str, Any]) -> NodeClass:
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    versions = NODE_CLASS_KINDS.get(str(kind), ())
    if api_version not in versions:
        raise ManifestError(
            f'no matches for kind "{kind}" in version "{api_version}" (use {" or ".join(versions)})',
            field="apiVersion",
        )
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "spec", "status"))
    meta = f.metadata(doc)
    if kind == KWOK_KIND:
        spec = f.mapping(doc.get("spec"), "spec", allowed=("nodeRegistrationDelay",))
        delay = f.string(spec.get("nodeRegistrationDelay"), "spec.nodeRegistrationDelay", pattern=_DURATION)
        if delay is not None:
            try:
                parse_duration(delay)
            except DurationError as error:
                raise ManifestError(str(error), field="spec.nodeRegistrationDelay") from None
    else:
        # EC2NodeClass fields belong to the AWS provider; karpui stores them untouched.
        spec = f.mapping(doc.get("spec"), "spec")
    return NodeClass(
        api_version=str(api_version),
        kind=str(kind),
        name=meta["name"],
        spec=spec,
        labels=f.string_map(meta.get("labels"), "metadata.labels"),
        annotations=f.string_map(meta.get("annotations"), "metadata.annotations"),
        generation=meta["generation"] if isinstance(meta.get("generation"), int) else 1,
    )


def nodeclass_to_manifest(nodeclass: NodeClass) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": nodeclass.name}
    if nodeclass.labels:
        metadata["labels"] = dict(nodeclass.labels)
    if nodeclass.annotations:
        metadata["annotations"] = dict(nodeclass.annotations)
    return {
        "apiVersion": nodeclass.api_version,
        "kind": nodeclass.kind,
        "metadata": metadata,
        "spec": dict(nodeclass.spec),
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]},
    }


def node_registration_delay_seconds(nodeclass: NodeClass) -> int:
    delay = nodeclass.spec.get("nodeRegistrationDelay")
    return parse_duration(delay) or 0 if isinstance(delay, str) else 0

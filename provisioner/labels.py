"""Well-known and restricted node label keys, and the aliases Kubernetes and Karpenter normalise."""

from __future__ import annotations

NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
# The one node field required node affinity may select (matchFields): the DaemonSet controller pins its pods to their
# node with it. Held among a node's requirements as if it were a label, so one compatibility check covers both.
NODE_NAME_FIELD = "metadata.name"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
# When a deleting NodeClaim's drain stops waiting for PDBs and do-not-disrupt (terminationGracePeriod, or a repair).
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
# karpui's own: the $/h of the offering a NodeClaim launched on, and a Node that termination has drained.
PRICE = "karpui.dev/price"
DRAINED = "karpui.dev/drained"
# A NodePool's human gate on disruption (karpui/disruption.py): auto, manual, auto-below (with a $/h threshold), dry-run.
APPROVAL_MODE = "karpui.dev/approval-mode"
APPROVAL_THRESHOLD = "karpui.dev/approval-threshold"
# A NodePool's choice of plans (provisioner/scheduling/improve.py): "disabled" (the default) keeps Karpenter's exact
# NodeClaims; "enabled" re-packs each batch's new NodeClaims into cheaper instance types when every constraint allows.
PLAN_IMPROVEMENT = "karpui.dev/plan-improvement"
PLAN_IMPROVEMENT_ENABLED = "enabled"
PLAN_IMPROVEMENT_DISABLED = "disabled"

KWOK_INSTANCE_SIZE = "karpenter.kwok.sh/instance-size"
KWOK_INSTANCE_FAMILY = "karpenter.kwok.sh/instance-family"
KWOK_INSTANCE_CPU = "karpenter.kwok.sh/instance-cpu"
KWOK_INSTANCE_MEMORY = "karpenter.kwok.sh/instance-memory"

AWS_PREFIX = "karpenter.k8s.aws/"

# A reserved offering's capacity reservation (Karpenter's cloudprovider.ReservationIDLabel and
# ReservedCapacityLabels): karpui's catalogs name reservations with the AWS provider's labels, the only provider that
# has them; `capacity-block` is an EC2 Capacity Block, `default` an on-demand capacity reservation.
RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
RESERVATION_TYPES = ("default", "capacity-block")

CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_RESERVED = "reserved"
KNOWN_CAPACITY_TYPES = frozenset({CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_RESERVED})

# Keys a pod may leave undefined on a NodePool: they narrow the NodeClaim instead of being refused
# (Karpenter's v1.WellKnownLabels plus the kwok provider's four).
WELL_KNOWN_LABELS = frozenset(
    {
        NODEPOOL,
        ZONE,
        REGION,
        INSTANCE_TYPE,
        ARCH,
        OS,
        CAPACITY_TYPE,
        WINDOWS_BUILD,
        KWOK_INSTANCE_SIZE,
        KWOK_INSTANCE_FAMILY,
        KWOK_INSTANCE_CPU,
        KWOK_INSTANCE_MEMORY,
        AWS_PREFIX + "instance-category",
        AWS_PREFIX + "instance-family",
        AWS_PREFIX + "instance-generation",
        AWS_PREFIX + "instance-size",
        AWS_PREFIX + "instance-cpu",
        AWS_PREFIX + "instance-memory",
        AWS_PREFIX + "instance-hypervisor",
        RESERVATION_ID,
        RESERVATION_TYPE,
    }
)

# Label domains only Karpenter itself may set (v1.9+: karpenter.sh and the kwok provider's domain).
RESTRICTED_LABEL_DOMAINS = ("karpenter.sh", "karpenter.kwok.sh")
# Keys inside restricted domains that users may still write.
LABEL_DOMAIN_EXCEPTIONS = frozenset({CAPACITY_TYPE})

ALIASES = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
}


def normalize_key(key: str) -> str:
    return ALIASES.get(key, key)


def label_domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def is_restricted_label(key: str) -> bool:
    """True for keys users may not put on NodePool labels/requirements or select pods with."""
    if key in (NODEPOOL, HOSTNAME):
        return True
    if key in LABEL_DOMAIN_EXCEPTIONS or key in WELL_KNOWN_LABELS:
        return False
    domain = label_domain(key)
    return any(domain == d or domain.endswith("." + d) for d in RESTRICTED_LABEL_DOMAINS)

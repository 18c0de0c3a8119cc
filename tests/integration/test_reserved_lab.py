"""Reserved capacity through the database: a catalog with a capacity reservation imported, shown on the catalog
page, and used by the lab's NodeClaims (the round trip through the Offering rows keeps the reservation)."""

import io
import json

from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tests.karp import ok
from tests.lab_manifests import documents, nodepool

CATALOG = {
    "apiVersion": "karpui.dev/v1alpha1",
    "kind": "InstanceCatalog",
    "metadata": {"name": "reserved"},
    "spec": {
        "nodeClassKinds": ["KWOKNodeClass"],
        "instanceTypes": [
            {
                "name": "r-2x-amd64-linux",
                "labels": {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
                "capacity": {"cpu": "2", "memory": "4Gi", "pods": "32"},
                "offerings": [
                    {"zone": "test-zone-a", "capacityType": "on-demand", "price": 0.054295},
                    {
                        "zone": "test-zone-a",
                        "capacityType": "reserved",
                        "price": 0.0000054295,
                        "reservationID": "cr-lab",
                        "reservationCapacity": 1,
                    },
                ],
            }
        ],
    },
}
INFLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate}
spec:
  replicas: 2
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers: [{name: c, image: pause, resources: {requests: {cpu: 1500m}}}]
"""
# Only the reserved type, so the second pod's node is its on-demand offering; no disruption block.
NODEPOOL = documents(
    nodepool(
        requirements=(("node.kubernetes.io/instance-type", ("r-2x-amd64-linux",)),),
        consolidation_policy=None,
        consolidate_after=None,
    ),
    INFLATE,
)


def test_a_reservation_from_an_imported_catalog_launches_one_reserved_node_then_on_demand(lab, tmp_path):
    path = tmp_path / "reserved.json"
    path.write_text(json.dumps(CATALOG))
    call_command("catalog", "import", str(path), stdout=io.StringIO())
    client = Client()
    client.force_login(User.objects.create_user("viewer", password="pw-only-for-tests"))
    page = client.get("/catalog/?capacity_type=reserved").content.decode()
    assert "reservation cr-lab (default, 1 instance)" in page
    ok("apply", "-f", "-", stdin=NODEPOOL)
    ok("advance", "30s")
    nodes = json.loads(ok("get", "nodes", "-o", "json"))["items"]
    labels = [n["metadata"]["labels"] for n in nodes]
    assert sorted(
        (ls["karpenter.sh/capacity-type"], ls.get("karpenter.k8s.aws/capacity-reservation-id", "")) for ls in labels
    ) == [("on-demand", ""), ("reserved", "cr-lab")]

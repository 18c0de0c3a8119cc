"""Static NodePools through karp, the lab's Kubernetes API and the dashboard: kubectl scale nodepool, the
transition rule, and the scale control on the NodePool's page."""

import json
import re

from django.contrib.auth.models import Permission, User
from django.test import Client

from karpui.models import AuditEvent
from karpui.settings import feature_gates
from tests.karp import EXAMPLES, karp, ok, rows

STATIC = """
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: static}
spec:
  replicas: 1
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c-2x-amd64-linux]}
"""


def test_karp_scale_nodepool_and_the_scale_subresource(lab, settings):
    settings.KARPUI_FEATURE_GATES = feature_gates("StaticCapacity=true")
    ok("apply", "-f", "-", stdin=STATIC)
    ok("advance", "10s")
    assert len(rows("get", "nodes")) == 1
    assert ok("scale", "nodepool/static", "--replicas", "3") == "nodepool.karpenter.sh/static scaled\n"
    ok("advance", "10s")
    assert len(rows("get", "nodes")) == 3
    [row] = rows("get", "nodepools")
    assert row[:3] == ["static", "default", "3"]  # NAME NODECLASS NODES
    assert json.loads(ok("get", "nodepool", "static", "-o", "json"))["spec"]["replicas"] == 3


def test_a_dynamic_nodepool_cannot_be_scaled_into_a_static_one(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    code, _, err = karp("scale", "nodepool/default", "--replicas", "2")
    assert code == 1
    assert (
        "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
        in err
    )


def test_the_nodepool_page_shows_replicas_and_scales_with_an_audit_row(lab, settings):
    settings.KARPUI_FEATURE_GATES = feature_gates("StaticCapacity=true")
    ok("apply", "-f", "-", stdin=STATIC)
    ok("advance", "10s")
    editor = User.objects.create_user("editor", password="pw-only-for-tests")
    editor.user_permissions.add(Permission.objects.get(codename="change_nodepool"))
    client = Client()
    client.force_login(editor)
    listing = client.get("/nodepools/").content.decode()
    row = re.search(r'<tr id="nodepool-static">.*?</tr>', listing, re.S).group(0)
    assert '<td class="replicas">1 (static)</td>' in row
    page = client.get("/nodepools/static/").content.decode()
    assert "1 replica wanted, 1 node now" in page
    response = client.post("/nodepools/static/scale", {"replicas": "2"})
    assert response.status_code == 302
    assert json.loads(ok("get", "nodepool", "static", "-o", "json"))["spec"]["replicas"] == 2
    audit = AuditEvent.objects.filter(target_kind="NodePool", target_name="static").latest("id")
    assert (audit.actor_name, audit.after["spec"]["replicas"]) == ("editor", 2)
    viewer = Client()
    viewer.force_login(User.objects.create_user("viewer", password="pw-only-for-tests"))
    assert viewer.post("/nodepools/static/scale", {"replicas": "5"}).status_code == 403
    assert json.loads(ok("get", "nodepool", "static", "-o", "json"))["spec"]["replicas"] == 2

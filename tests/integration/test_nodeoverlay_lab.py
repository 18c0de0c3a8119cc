"""NodeOverlays through karp, the lab's API and the dashboard: applied as Karpenter's manifests, listed with the CRD's
printer columns, and shown on the NodePool's page with the prices they change."""

import json
import re

from django.contrib.auth.models import User
from django.test import Client

from karpui.settings import feature_gates
from tests.karp import EXAMPLES, karp, ok, rows, table

OVERLAY = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: discount-c}
spec:
  weight: 10
  requirements:
    - {key: karpenter.kwok.sh/instance-family, operator: In, values: [c]}
  priceAdjustment: "-50%"
"""


def test_an_overlay_is_applied_listed_and_shown_on_the_nodepool_page(lab, settings):
    settings.KARPUI_FEATURE_GATES = feature_gates("NodeOverlay=true")
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    assert ok("apply", "-f", "-", stdin=OVERLAY) == "nodeoverlay.karpenter.sh/discount-c created\n"
    ok("advance", "1s")
    assert rows("get", "nodeoverlays") == [["discount-c", "True", table("get", "nodeoverlays")[0]["AGE"]]]
    assert table("get", "overlays", "-o", "wide")[0]["WEIGHT"] == "10"
    stored = json.loads(ok("get", "nodeoverlay", "discount-c", "-o", "json"))
    assert {c["type"]: c["status"] for c in stored["status"]["conditions"]} == {
        "ValidationSucceeded": "True",
        "Ready": "True",
    }
    client = Client()
    client.force_login(User.objects.create_user("viewer", password="pw-only-for-tests"))
    page = client.get("/nodepools/default/").content.decode()
    row = re.search(r'<tr id="overlay-discount-c">(.*?)</tr>', page, re.S).group(1)
    assert re.findall(r"<td>(.*?)</td>", row) == ["discount-c", "10", "price -50%", "48", "applied"]
    prices = re.search(r'<table id="overlaid-prices">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    first = re.findall(r"<td>(.*?)</td>", prices)[:5]
    assert first == ["c-1x-amd64-linux", "test-zone-a", "spot", "0.019003", "0.009502"]


def test_a_bad_overlay_is_refused_naming_the_field(lab):
    bad = OVERLAY.replace('priceAdjustment: "-50%"', 'price: "1"\n  priceAdjustment: "-50%"')
    code, _, err = karp("apply", "-f", "-", stdin=bad)
    assert code == 1
    assert "spec: cannot set both 'price' and 'priceAdjustment'" in err

"""Registration health where a platform engineer looks for it: the NodePools list and the NodePool's page."""

import re

from django.contrib.auth.models import User
from django.test import Client

from tests.karp import EXAMPLES, ok

NEVER_REGISTERING = """
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
spec: {nodeRegistrationDelay: 20m}
"""


def test_an_unhealthy_nodepool_says_so_on_the_list_and_its_page(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("apply", "-f", "-", stdin=NEVER_REGISTERING)  # nodes would register after 20 minutes: every launch times out
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "32m")
    client = Client()
    client.force_login(User.objects.create_user("viewer", password="pw-only-for-tests"))
    listing = client.get("/nodepools/").content.decode()
    row = re.search(r'<tr id="nodepool-default">.*?</tr>', listing, re.S).group(0)
    assert "<strong>Unhealthy</strong>: RegistrationFailed — Failed to register node" in row
    page = client.get("/nodepools/default/").content.decode()
    health = re.search(r'<tr id="condition-NodeRegistrationHealthy">(.*?)</tr>', page, re.S).group(1)
    assert re.findall(r"<td>(.*?)</td>", health)[:4] == [
        "NodeRegistrationHealthy",
        "False",
        "RegistrationFailed",
        "Failed to register node",
    ]
    ready = re.search(r'<tr id="condition-Ready">(.*?)</tr>', page, re.S).group(1)
    assert re.findall(r"<td>(.*?)</td>", ready)[:3] == ["Ready", "True", "Ready"]

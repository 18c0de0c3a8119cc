"""NodePools are listed in Karpenter's order (OrderByWeight: the heaviest first, no weight counting as 0, then by
name, later in the alphabet first) on every database: PostgreSQL sorts NULLs first in a descending order, which put
unweighted pools ahead of the weight-10 one on the NodePools list and the approval table."""

from __future__ import annotations

from karpui import models
from tests.integration.test_dashboard import logged_in, user
from tests.karp import ok

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  {weight}template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
"""
CLASS = "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: default}\n"


def test_nodepools_are_in_karpenters_order_on_the_list_and_the_approval_table(lab):
    pools = [("alpha", ""), ("heavy", "weight: 10\n  "), ("zulu", ""), ("light", "weight: 1\n  ")]
    ok("apply", "-f", "-", stdin="---\n".join([CLASS, *(POOL.format(name=n, weight=w) for n, w in pools)]))
    expected = ["heavy", "light", "zulu", "alpha"]
    assert [p.name for p in models.NodePool.objects.filter(cluster=lab)] == expected
    client = logged_in(user())
    listing = client.get("/nodepools/").content.decode()
    assert [listing.index(f'id="nodepool-{name}"') for name in expected] == sorted(
        listing.index(f'id="nodepool-{name}"') for name in expected
    )
    queue = client.get("/disruption/").content.decode()
    assert [queue.index(f'id="approval-{name}"') for name in expected] == sorted(
        queue.index(f'id="approval-{name}"') for name in expected
    )

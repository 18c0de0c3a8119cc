"""The requests a client sends, read as the API server's authorizer reads them (group, resource, verb)."""

from __future__ import annotations

import pytest

from tests.kube.rbac import Attributes, attributes, denied, roles

PREFIX = "/k8s/clusters/kwok-1"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/api/v1/pods?resourceVersion=0", Attributes("", "pods", "list")),
        ("GET", "/api/v1/pods?watch=true&resourceVersion=12", Attributes("", "pods", "watch")),
        ("GET", "/api/v1/namespaces/default", Attributes("", "namespaces", "get")),
        ("POST", "/api/v1/namespaces/default/pods/web-1/eviction", Attributes("", "pods/eviction", "create")),
        ("DELETE", "/api/v1/namespaces/default/pods/web-1", Attributes("", "pods", "delete")),
        (
            "PUT",
            "/apis/karpenter.sh/v1/nodeclaims/default-x/status",
            Attributes("karpenter.sh", "nodeclaims/status", "update"),
        ),
        ("PATCH", "/apis/karpenter.sh/v1/nodepools/default", Attributes("karpenter.sh", "nodepools", "patch")),
        (
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/karpui/leases",
            Attributes("coordination.k8s.io", "leases", "create"),
        ),
        ("GET", "/apis/karpenter.sh/v1", None),
        ("GET", "/api", None),
    ],
)
def test_a_request_needs_the_verb_on_its_resource(method: str, path: str, expected: Attributes | None) -> None:
    assert attributes(method, PREFIX + path) == expected


@pytest.mark.parametrize(
    ("method", "path", "refused"),
    [
        # The Role in karpui grants the engines' Lease there, and nowhere else.
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/karpui/leases/karpui-engine", False),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/karpui/leases/karpui-engine", False),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/karpui-engine", True),
        # A Role is no grant across every namespace: an informer of every Lease in the cluster is a 403.
        ("GET", "/apis/coordination.k8s.io/v1/leases?watch=true&resourceVersion=7", True),
        ("GET", "/apis/coordination.k8s.io/v1/leases?limit=500", True),
        # The ClusterRole grants in every namespace and across all of them.
        ("GET", "/api/v1/pods?limit=500", False),
        ("POST", "/api/v1/namespaces/team-a/pods/web-1/eviction", False),
        ("POST", "/api/v1/namespaces/team-a/pods", True),
    ],
)
def test_roles_grant_only_in_their_namespace_and_cluster_roles_everywhere(
    method: str, path: str, refused: bool
) -> None:
    assert denied([(method, PREFIX + path, 200)], roles("kwok")) == ([(method, PREFIX + path)] if refused else [])

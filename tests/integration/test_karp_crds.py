"""`karp crds`: the CustomResourceDefinitions a kwok cluster needs before karpui drives it, at their storage version."""

from __future__ import annotations

import yaml

from tests.karp import ok


def test_karp_crds_prints_every_kind_kwok_mode_reads_including_ec2nodeclass(db) -> None:
    documents = list(yaml.safe_load_all(ok("crds")))
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [
        ("CustomResourceDefinition", "nodepools.karpenter.sh"),
        ("CustomResourceDefinition", "nodeclaims.karpenter.sh"),
        ("CustomResourceDefinition", "kwoknodeclasses.karpenter.kwok.sh"),
        ("CustomResourceDefinition", "ec2nodeclasses.karpenter.k8s.aws"),
    ]
    assert [[(v["name"], v["served"], v["storage"]) for v in d["spec"]["versions"]] for d in documents] == [
        [("v1", True, True)],
        [("v1", True, True)],
        [("v1alpha1", True, True)],
        [("v1", True, True)],
    ]

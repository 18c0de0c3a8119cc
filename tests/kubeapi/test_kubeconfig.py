"""`karp kubeconfig`: a kubeconfig selecting the cluster's API, with a new token of a user whose digest only is
kept."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import yaml
from django.contrib.auth.models import User

from karpui import models
from karpui.kubeapi import auth
from tests.karp import karp


def test_the_kubeconfig_selects_the_cluster_with_a_token_of_the_user(lab: Any, tmp_path: Path) -> None:
    User.objects.create_superuser("admin", "", "admin-pass-1")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    code, out, err = karp("kubeconfig", "--server", "https://karpui.example:8443/", "--certificate-authority", str(ca))
    assert (code, err) == (0, "")
    config = yaml.safe_load(out)
    token = config["users"][0]["user"]["token"]
    assert config["current-context"] == "karpui-lab"
    assert config["clusters"] == [
        {
            "name": "karpui-lab",
            "cluster": {
                "server": "https://karpui.example:8443/k8s/clusters/lab",
                "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
            },
        }
    ]
    assert config["contexts"] == [
        {"name": "karpui-lab", "context": {"cluster": "karpui-lab", "user": "admin@karpui-lab", "namespace": "default"}}
    ]
    [row] = models.ApiToken.objects.all()
    assert (row.user.username, row.digest) == ("admin", hashlib.sha256(token.encode()).hexdigest())
    assert token not in str(list(models.ApiToken.objects.values()))  # only the digest is stored


def test_a_named_user_gets_the_token_and_an_unknown_one_is_refused(lab: Any) -> None:
    User.objects.create_user("vera", password="vera-pass-1")
    code, out, err = karp("kubeconfig", "--as", "vera", "--cluster", "lab")
    assert code == 0 and yaml.safe_load(out)["users"][0]["name"] == "vera@karpui-lab"
    assert err.startswith("note: kubectl sends the token only over HTTPS")  # the default server is plain HTTP
    assert karp("kubeconfig", "--as", "nobody") == (1, "", 'error: user "nobody" not found\n')
    assert models.ApiToken.objects.count() == 1


def test_without_a_superuser_the_user_must_be_named(lab: Any) -> None:
    assert karp("kubeconfig")[2] == "error: no superuser yet: name one with --as USER\n"


def test_each_kubeconfig_has_its_own_token(lab: Any) -> None:
    user = User.objects.create_user("vera", password="vera-pass-1")
    first, second = auth.token_create(user=user), auth.token_create(user=user)
    assert first != second and first.startswith("karp_") and len(first) > 40
    assert models.ApiToken.objects.filter(user=user).count() == 2


def test_kind_names_and_several_clusters_make_the_seed_documents_contexts(lab: Any) -> None:
    """`kind create cluster --name karpenter-lab` names its kubeconfig's entries kind-karpenter-lab; the documents then
    say `kubectl config use-context kind-karpenter-lab` and `kubectl --context kind-taint-lab`."""
    User.objects.create_superuser("admin", "", "admin-pass-1")
    assert karp("cluster", "create", "karpenter-lab")[0] == 0
    assert karp("cluster", "create", "taint-lab")[0] == 0
    code, out, _ = karp("kubeconfig", "karpenter-lab", "taint-lab", "--kind", "--server", "https://127.0.0.1:8443")
    assert code == 0
    config = yaml.safe_load(out)
    assert config["current-context"] == "kind-karpenter-lab"
    assert [(c["name"], c["context"]["cluster"], c["context"]["user"]) for c in config["contexts"]] == [
        ("kind-karpenter-lab", "kind-karpenter-lab", "kind-karpenter-lab"),
        ("kind-taint-lab", "kind-taint-lab", "kind-taint-lab"),
    ]
    assert [(c["name"], c["cluster"]["server"]) for c in config["clusters"]] == [
        ("kind-karpenter-lab", "https://127.0.0.1:8443/k8s/clusters/karpenter-lab"),
        ("kind-taint-lab", "https://127.0.0.1:8443/k8s/clusters/taint-lab"),
    ]
    # A token per cluster, each knowing its cluster (the one its requests at the server's root reach).
    tokens = {u["name"]: u["user"]["token"] for u in config["users"]}
    for name in ("karpenter-lab", "taint-lab"):
        digest = hashlib.sha256(tokens[f"kind-{name}"].encode()).hexdigest()
        assert models.ApiToken.objects.get(digest=digest).cluster == name
    assert karp("kubeconfig", "nowhere", "--kind") == (
        1,
        "",
        'error: cluster "nowhere" not found (karp cluster create nowhere makes it)\n',
    )

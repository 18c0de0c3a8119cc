"""The lab API server's /livez, /readyz and /healthz, under the cluster's path as kube-apiserver serves them at its
root: "ok", `?verbose` listing the checks, `exclude`, one check by its path, open without a token."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError
from django.test import Client

from karpui.kubeapi import views

BASE = "/k8s/clusters/lab"


def get(path: str) -> tuple[int, str, str]:
    response = Client().get(BASE + path)
    return response.status_code, response["Content-Type"], response.content.decode()


@pytest.mark.parametrize("endpoint", ["livez", "readyz", "healthz"])
def test_each_answers_ok_and_lists_its_checks_when_verbose(lab: Any, endpoint: str) -> None:
    text = "text/plain; charset=utf-8"
    assert get(f"/{endpoint}") == (200, text, "ok")
    assert get(f"/{endpoint}?verbose") == (200, text, f"[+]ping ok\n[+]database ok\n{endpoint} check passed\n")
    assert get(f"/{endpoint}?verbose=true&exclude=database&exclude=etcd") == (
        200,
        text,
        f'[+]ping ok\n[+]database excluded: ok\nwarn: some health checks cannot be excluded: no matches for "etcd"\n'
        f"{endpoint} check passed\n",
    )
    assert get(f"/{endpoint}/ping") == (200, text, "ok")
    assert get(f"/{endpoint}/database") == (200, text, "ok")
    assert get(f"/{endpoint}/etcd") == (404, text, "404 page not found\n")


def test_a_failing_check_is_a_500_listing_every_check_without_its_reason(lab: Any, monkeypatch: Any) -> None:
    def down() -> dict[str, Any]:
        return {"ok": False, "error": DatabaseError.__name__}

    monkeypatch.setattr(views.health, "database", down)
    assert get("/readyz")[:1] == (500,)
    assert get("/readyz")[2] == "[+]ping ok\n[-]database failed: reason withheld\nreadyz check failed\n"
    assert get("/readyz?exclude=database") == (200, "text/plain; charset=utf-8", "ok")
    assert get("/readyz/database")[::2] == (500, "internal server error: database check failed\n")


def test_an_unknown_cluster_has_none(lab: Any) -> None:
    assert Client().get("/k8s/clusters/nowhere/readyz").status_code == 404


def test_kubectl_get_raw_readyz_livez_and_healthz(kubectl: Any) -> None:
    for endpoint in ("readyz", "livez", "healthz"):
        assert kubectl.ok("get", "--raw", f"/k8s/clusters/lab/{endpoint}") == "ok"
    assert kubectl.ok("get", "--raw", "/k8s/clusters/lab/readyz?verbose").splitlines()[-1] == "readyz check passed"

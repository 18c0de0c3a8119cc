import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from karpui.clusters import ticks
from karpui.settings import feature_gates

ROOT = Path(__file__).parent.parent.parent


def test_the_tick_advances_the_lab_clock_by_wall_time(lab):
    start = timezone.now()
    ticks.clusters_tick(now=start)
    lab.refresh_from_db()
    clock = lab.clock
    ticks.clusters_tick(now=start + timedelta(seconds=7))
    lab.refresh_from_db()
    assert lab.clock - clock == timedelta(seconds=7)
    assert lab.ticked_at == start + timedelta(seconds=7)


def test_a_lab_ahead_of_wall_time_keeps_moving_at_wall_times_rate(lab):
    from tests.karp import ok

    start = timezone.now()
    ticks.clusters_tick(now=start)
    ok("advance", "10m")  # `karp advance` while the server runs: the lab is now ten minutes ahead
    lab.refresh_from_db()
    ahead = lab.clock
    ticks.clusters_tick(now=start + timedelta(seconds=7))
    ticks.clusters_tick(now=start + timedelta(seconds=9))
    lab.refresh_from_db()
    assert lab.clock - ahead == timedelta(seconds=9)  # it did not stand still for ten minutes


def test_a_lab_behind_wall_time_catches_up(lab):
    """An hour behind, the lab catches up to wall time; a tick stops at its one-second budget, so on a loaded machine
    it takes more than one (each takes up where the last stopped), never more than a handful for an idle hour."""
    start = timezone.now()
    ticks.clusters_tick(now=start)
    for _ in range(5):
        ticks.clusters_tick(now=start + timedelta(hours=1))
        lab.refresh_from_db()
        if lab.clock == start + timedelta(hours=1):
            break
    assert lab.clock == start + timedelta(hours=1)


def test_the_tick_task_body_runs(lab):
    from karpui.tasks import clusters_tick

    clusters_tick.run()
    lab.refresh_from_db()
    assert lab.ticked_at is not None


def test_feature_gates_parse_karpenters_syntax_over_its_defaults():
    """Karpenter's ParseFeatureGates: the gates not named keep DefaultFeatureGates() (ReservedCapacity on)."""
    assert feature_gates("SpotToSpotConsolidation=true, NodeRepair=false") == {
        "NodeRepair": False,
        "ReservedCapacity": True,
        "SpotToSpotConsolidation": True,
        "NodeOverlay": False,
        "StaticCapacity": False,
        "CapacityBuffer": False,
    }
    with pytest.raises(Exception, match="malformed pair, expect string=bool"):
        feature_gates("SpotToSpotConsolidation")


def test_production_settings_pass_check_deploy(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "karpui.settings_production",
        "SECRET_KEY": "k" * 20 + "Q7-random-enough-for-the-check-!@#$%^&*()x" * 2,
        "ALLOWED_HOSTS": "karpui.example.com",
        "KARPUI_VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_settings_refuse_a_missing_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(DJANGO_SETTINGS_MODULE="karpui.settings_production", KARPUI_VAR_DIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


@pytest.mark.redis
def test_celery_uses_redis_as_the_broker_when_redis_url_is_set():
    """A real round trip through Redis with the broker settings karpui derives from REDIS_URL."""
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("REDIS_URL is not set")
    script = (
        "import django, os; django.setup();"
        "from django.conf import settings; from karpui.celery import app;"
        "assert settings.CELERY_BROKER_URL == os.environ['REDIS_URL'], settings.CELERY_BROKER_URL;"
        "q = app.connection().SimpleQueue('karpui-test-roundtrip'); q.put({'n': 42});"
        "m = q.get(timeout=5); m.ack(); print(m.payload['n']); q.close()"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "karpui.settings"}
    env.pop("CELERY_BROKER_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "42"


@pytest.mark.parametrize(
    ("name", "value", "expect"),
    [
        ("KARPUI_KUBE_CLIENT_QPS", "0", "KARPUI_KUBE_CLIENT_QPS must be a finite number of at least 1, got '0'"),
        ("KARPUI_KUBE_CLIENT_BURST", "1.5", "KARPUI_KUBE_CLIENT_BURST must be a whole number, got '1.5'"),
    ],
)
def test_the_kube_client_limits_refuse_a_bad_value_naming_it(tmp_path, name, value, expect):
    env = {**os.environ, name: value, "KARPUI_VAR_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert expect in result.stderr


def test_a_kube_clusters_client_is_limited_as_karpenters_by_default_and_by_the_settings(tmp_path, settings):
    """KUBE_CLIENT_QPS=200 and KUBE_CLIENT_BURST=300 are Karpenter's defaults; the settings change them."""
    from karpui import models
    from karpui.clusters import remote

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    cluster = models.Cluster(name="k", mode="kwok", kubeconfig=str(kubeconfig))
    limiter = remote.transport(cluster).limiter
    assert (limiter.qps, limiter.burst) == (200, 300)
    settings.KARPUI_KUBE_CLIENT_QPS, settings.KARPUI_KUBE_CLIENT_BURST = 20, 30
    limiter = remote.transport(cluster).limiter
    assert (limiter.qps, limiter.burst) == (20, 30)

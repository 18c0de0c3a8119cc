"""Shared fixtures. Integration tests use the database named by DATABASE_URL (PostgreSQL in CI) and, when REDIS_URL
is set, the real Redis cache."""

import uuid

import pytest


@pytest.fixture
def lab(db):
    from karpui.models import Cluster

    return Cluster.objects.get(name="lab")


@pytest.fixture
def node(lab):
    """The provisioning example with three one-CPU inflate pods, all on one c-4x on-demand node: its name."""
    from tests.karp import EXAMPLES, ok, table

    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    ok("advance", "30s")
    [name] = [r["NAME"] for r in table("get", "nodes")]
    return name


@pytest.fixture
def nodeclaim(node):
    """The NodeClaim behind `node` (kwok names a node after its NodeClaim, with more after it)."""
    from tests.karp import table

    [name] = [r["NAME"] for r in table("get", "nodeclaims") if r["NODE"] == node]
    return name


@pytest.fixture(autouse=True)
def _own_cache_keys(settings):
    """Each test gets its own cache key prefix, so counters such as failed logins never leak between tests or
    between CI runs sharing one Redis (and nothing needs flushing a database Celery also uses)."""
    default = dict(settings.CACHES["default"])
    default["KEY_PREFIX"] = f"karpui-test-{uuid.uuid4().hex[:12]}"
    settings.CACHES = {**settings.CACHES, "default": default}


@pytest.fixture(autouse=True)
def _no_ticks_asked_for(settings):
    """A write to a ticked lab asks the worker for a tick (karpui.clusters.lab.nudge): in a test there is no worker
    to take it, and a message left in CI's Redis would be taken by the next test's live one. Tests of the nudge
    turn it back on."""
    settings.KARPUI_TICK_ON_WRITE = False


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Django's own advice for test suites: hash passwords with MD5. PBKDF2's 870,000 rounds cost 0.8 s of CPU per
    create_user or password login, which was minutes of the suite; no test asserts how a hash is made (the login
    throttle's race test asks for the real hasher back, as its threads must overlap in the check)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def lab_api(tmp_path_factory):
    """The lab's Kubernetes API served by a process of its own (tests.kube.labserver), for the kube adapter."""
    from tests.kube.harness import LabServer

    server = LabServer(tmp_path_factory.mktemp("labapi")).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _no_kept_preview_lab():
    """The NodePool editor's what-if keeps the lab it last read per process and catches it up from the change log;
    a test's rolled-back rows are a history that log never saw, so each test starts without one."""
    yield
    from karpui.insight import whatif

    whatif.forget_read_lab()


def _real_tier_unavailable():
    """Why the real-cluster tier cannot run here (None: it can), worked out once per process."""
    global _REAL_TIER
    if _REAL_TIER is _UNKNOWN:
        from tests.kube.realcluster import unavailable

        _REAL_TIER = unavailable()
    return _REAL_TIER


_UNKNOWN = object()
_REAL_TIER = _UNKNOWN


def pytest_report_header(config):
    """One line on the real-cluster tier: whether it runs here, and if not, why."""
    reason = _real_tier_unavailable()
    return f"real cluster tier: {'runs' if reason is None else 'skipped: ' + reason}"


def pytest_terminal_summary(terminalreporter):
    """The same line at the end, where `-q` (the suite's default) shows it."""
    reason = _real_tier_unavailable()
    if reason is not None:
        terminalreporter.write_line(f"real cluster tier skipped: {reason}")


def pytest_collection_modifyitems(config, items):
    """Where the real-cluster tier cannot run, its tests are left out, and the header's one line says why (unless
    KARPUI_REAL_REQUIRED is set, as in CI: then they run and fail)."""
    import os

    if os.environ.get("KARPUI_REAL_REQUIRED") or _real_tier_unavailable() is None:
        return
    left_out = [item for item in items if item.get_closest_marker("real") is not None]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item.get_closest_marker("real") is None]


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory):
    """A real control plane (hack/kube/cluster.py) for the session, or the cluster KARPUI_REAL_KUBECONFIG names.
    Skipped in one line where it cannot run (no Go, binaries not built), unless KARPUI_REAL_REQUIRED is set (CI)."""
    import os
    import time

    from tests.kube.realcluster import RealCluster, unavailable

    reason = unavailable()
    if reason is not None and os.environ.get("KARPUI_REAL_REQUIRED"):
        # CI builds the binaries in the background as it starts (.ci/run): wait for that build (build.sh takes its
        # lock, then finds everything built), or build here.
        import subprocess

        from tests.kube.realcluster import BUILD

        # A cold build (tens of minutes on a fresh machine) must not take CI past its budget: .ci/run gives the
        # moment it stops waiting, and a tier whose build is not done by then is left out, saying so loudly.
        deadline = os.environ.get("KARPUI_REAL_BUILD_DEADLINE")
        wait = max(0.0, float(deadline) - time.time()) if deadline else None
        try:
            done = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=wait)
        except subprocess.TimeoutExpired:
            pytest.skip(
                "real cluster tier: hack/kube/build.sh (a cold Go build) was not done by CI's deadline for it "
                "(KARPUI_REAL_BUILD_DEADLINE); it goes on in the background and var/kube-build.log shows how far it got"
            )
        reason = unavailable()
        if reason is not None:
            pytest.fail(f"real cluster tier required (KARPUI_REAL_REQUIRED) but {reason}:\n{done.stderr[-3000:]}")
    if reason is not None:
        pytest.skip(f"real cluster tier: {reason}")
    given = os.environ.get("KARPUI_REAL_KUBECONFIG")
    cluster = RealCluster.given(given) if given else RealCluster.start(tmp_path_factory.mktemp("real-cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture
def real(real_cluster):
    """The session's real cluster, emptied of what earlier tests made."""
    real_cluster.reset()
    return real_cluster

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
    from tests.karp import EXAMPLES, ok, rows

    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    ok("advance", "30s")
    [[name, *_]] = rows("get", "nodes")
    return name


@pytest.fixture(autouse=True)
def _own_cache_keys(settings):
    """Each test gets its own cache key prefix, so counters such as failed logins never leak between tests or
    between CI runs sharing one Redis (and nothing needs flushing a database Celery also uses)."""
    default = dict(settings.CACHES["default"])
    default["KEY_PREFIX"] = f"karpui-test-{uuid.uuid4().hex[:12]}"
    settings.CACHES = {**settings.CACHES, "default": default}


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

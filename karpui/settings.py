"""Settings for every mode, read from the environment; the defaults run the lab on SQLite with no services."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from provisioner.durations import DurationError, format_duration, parse_duration
from provisioner.options import (
    MIN_VALUES_POLICIES,
    PREFERENCE_POLICIES,
    RESPECT,
    STRICT,
    OptionsError,
    parse_feature_gates,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("KARPUI_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {value!r}")


def env_number(name: str, default: float, *, whole: bool = False, at_least: float = 0) -> float:
    """A number of at least `at_least` from the environment (a whole one with `whole`), or ImproperlyConfigured
    naming it."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = int(value) if whole else float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a {'whole ' if whole else ''}number, got {value!r}") from None
    if not at_least <= number < float("inf"):
        raise ImproperlyConfigured(f"{name} must be a finite number of at least {at_least:g}, got {value!r}")
    return number


def feature_gates(text: str) -> dict[str, bool]:
    """Parse Karpenter's FEATURE_GATES syntax (`SpotToSpotConsolidation=true,NodeRepair=false`) over its defaults."""
    try:
        return parse_feature_gates(text)
    except OptionsError as error:
        raise ImproperlyConfigured(f"KARPUI_FEATURE_GATES: {error}") from None


def one_of(name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = os.environ.get(name, default)
    if value not in allowed:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def env_duration(name: str, default: str, *, at_least: int = 0) -> int:
    """A duration from the environment (`10m`, `1h30m`, `90s`) in whole seconds, or ImproperlyConfigured naming it."""
    value = os.environ.get(name) or default
    try:
        seconds = parse_duration(value)
    except DurationError as error:
        raise ImproperlyConfigured(f"{name}: {error}") from None
    if seconds is None or seconds < at_least:
        raise ImproperlyConfigured(f"{name} must be at least {format_duration(at_least)}, got {value!r}")
    return seconds


DEBUG = env_bool("DEBUG", True)
# The lab default key is only for a local, loopback-bound lab; production settings refuse it.
SECRET_KEY = os.environ.get("SECRET_KEY", "karpui-lab-insecure-key-change-me-for-any-shared-use")
ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h.strip()
]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

KARPUI_MODE = os.environ.get("KARPUI_MODE", "lab")
if KARPUI_MODE not in ("lab", "kwok", "observe"):
    raise ImproperlyConfigured(f"KARPUI_MODE must be lab, kwok or observe, got {KARPUI_MODE!r}")
# With KARPUI_MODE kwok or observe, migrate makes the cluster this deployment drives or watches (KARPUI_CLUSTER,
# reached through KARPUI_KUBECONFIG: a kubeconfig path, or "in-cluster" for the pod's service account).
KARPUI_CLUSTER = os.environ.get("KARPUI_CLUSTER", "cluster")
KARPUI_KUBECONFIG = os.environ.get(
    "KARPUI_KUBECONFIG", "in-cluster" if os.environ.get("KUBERNETES_SERVICE_HOST") else os.environ.get("KUBECONFIG", "")
)
KARPUI_KUBE_CONTEXT = os.environ.get("KARPUI_KUBE_CONTEXT", "")
# Karpenter's KUBE_CLIENT_QPS and KUBE_CLIENT_BURST, with its defaults: the engine's requests to that cluster's API
# server, a second on average and at most at once (its informers' watches are long-lived, not counted per event).
KARPUI_KUBE_CLIENT_QPS = env_number("KARPUI_KUBE_CLIENT_QPS", 200, whole=True, at_least=1)
KARPUI_KUBE_CLIENT_BURST = env_number("KARPUI_KUBE_CLIENT_BURST", 300, whole=True, at_least=1)
KARPUI_FEATURE_GATES = feature_gates(os.environ.get("KARPUI_FEATURE_GATES", ""))
# DRA works by default; true restores Karpenter's IGNORE_DRA_REQUESTS behaviour (such pods are never provisioned).
KARPUI_IGNORE_DRA_REQUESTS = env_bool("KARPUI_IGNORE_DRA_REQUESTS", False)
# Karpenter's LEGACY_NODE_REPAIR (v1.15): true repairs as v1.14's node.health controller did.
KARPUI_LEGACY_NODE_REPAIR = env_bool("KARPUI_LEGACY_NODE_REPAIR", False)
# Karpenter's PREFERENCE_POLICY (Respect|Ignore) and MIN_VALUES_POLICY (Strict|BestEffort), for every cluster.
KARPUI_PREFERENCE_POLICY = one_of("KARPUI_PREFERENCE_POLICY", RESPECT, PREFERENCE_POLICIES)
KARPUI_MIN_VALUES_POLICY = one_of("KARPUI_MIN_VALUES_POLICY", STRICT, MIN_VALUES_POLICIES)
# Four eyes: whoever asked for a manual disruption may not also approve it.
KARPUI_FOUR_EYES = env_bool("KARPUI_FOUR_EYES", True)
# Approving a command that evicts more pods than this, or saves more $/h than this, asks for a confirmation with a
# note (the web form's box, `karp approve --confirm --reason`): one click must not drain a fleet.
KARPUI_CONFIRM_EVICTIONS = int(env_number("KARPUI_CONFIRM_EVICTIONS", 50, whole=True))
KARPUI_CONFIRM_SAVINGS = env_number("KARPUI_CONFIRM_SAVINGS", 5.0)
# Observe mode's gate over a real Karpenter (README, "The gate over a real Karpenter"). While karpui is down, `closed`
# keeps every NodePool it gates held; `open` lets each hold lapse KARPUI_GATE_LEASE after karpui last renewed it.
KARPUI_GATE_FAILURE = one_of("KARPUI_GATE_FAILURE", "closed", ("closed", "open"))
KARPUI_GATE_LEASE = env_duration("KARPUI_GATE_LEASE", "10m", at_least=120)
# How long Karpenter has to take an approved command once karpui released it (its poll, 15 s validation, slack).
KARPUI_GATE_RELEASE = env_duration("KARPUI_GATE_RELEASE", "3m", at_least=60)
# An approved command re-checked before it runs carries its approval over a new plan that saves less, unless it
# saves less by more than this share of what it said (README, "Re-checked at execution").
KARPUI_RECHECK_SAVINGS_TOLERANCE = env_number("KARPUI_RECHECK_SAVINGS_TOLERANCE", 0.10)


def cluster_paths(name: str) -> dict[str, str]:
    """`CLUSTER=PATH[,CLUSTER=PATH...]` from the environment, or ImproperlyConfigured naming the pair it cannot read."""
    paths = {}
    for pair in filter(None, (p.strip() for p in os.environ.get(name, "").split(","))):
        cluster, _, path = pair.partition("=")
        if not cluster.strip() or not path.strip():
            raise ImproperlyConfigured(f"{name}: {pair!r} is not CLUSTER=PATH")
        paths[cluster.strip()] = path.strip()
    return paths


# observe mode: Karpenter's log file per cluster, where karpui can read it (the Logs page shows its lines).
KARPUI_KARPENTER_LOGS = cluster_paths("KARPUI_KARPENTER_LOGS")

INSTALLED_APPS = [
    "karpui.apps.AdminConfig",  # django.contrib.admin with the login throttle (karpui.web.login)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "karpui",
]

# Flash messages wait for a page of the cluster they are about (karpui/web/flash.py).
MESSAGE_STORAGE = "karpui.web.flash.ClusterMessageStorage"

MIDDLEWARE = [
    "karpui.requests.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "karpui.web.badrequest.BadRequestMiddleware",
]

ROOT_URLCONF = "karpui.urls"
WSGI_APPLICATION = "karpui.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "karpui.web.context_processors.pause_banner",
                "karpui.web.context_processors.reconcile_errors",
            ],
            "builtins": ["template_partials.templatetags.partials"],
            # The dashboard's tags live with its views (karpui/web/), not in an app's templatetags/ folder.
            "libraries": {
                "karpui": "karpui.web.templatetags.karpui",
                "tables": "karpui.web.templatetags.tables",
            },
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'karpui.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes; the timeout rides out short write locks.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Tests get a file too, not SQLite's shared in-memory database: that one locks whole tables and answers
    # "database table is locked" at once instead of waiting, so a test server's write beside a watch fails.
    # One file per test process, so two runs at once never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"karpui-test-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Our own login page: the admin's refuses accounts without is_staff, and viewers, editors and approvers need not
# be staff.
LOGIN_URL = "login"
# /metrics is open unless this is set; then Prometheus must send it as a bearer token.
KARPUI_METRICS_TOKEN = os.environ.get("KARPUI_METRICS_TOKEN", "")
KARPUI_LOGIN_MAX_FAILURES = int(os.environ.get("KARPUI_LOGIN_MAX_FAILURES", "5"))
# Days an API token (karp kubeconfig) is valid for; 0: until revoked.
KARPUI_API_TOKEN_DAYS = int(os.environ.get("KARPUI_API_TOKEN_DAYS", "90"))
KARPUI_LOGIN_LOCKOUT_SECONDS = int(os.environ.get("KARPUI_LOGIN_LOCKOUT_SECONDS", "900"))
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)

# Celery: Redis when configured, otherwise a filesystem broker that needs no server at all.
REDIS_URL = os.environ.get("REDIS_URL", "")
# Shared by every web process when Redis is there (the login throttle must count across them); else per process.
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": "karpui"}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL or "filesystem://"
if CELERY_BROKER_URL == "filesystem://":
    _broker_dir = VAR_DIR / "broker"
    for _folder in ("queue", "processed", "control", "rejected"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    # karpui.broker's transport (celery.py maps filesystem:// to it): kombu's without its torn-message race.
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "rejected_folder": str(_broker_dir / "rejected"),
        # The worker looks for messages ten times a second (kombu's default is once): a write's tick (nudge)
        # must come within a fraction of one.
        "polling_interval": 0.1,
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = "UTC"
KARPUI_TICK_SECONDS = float(os.environ.get("KARPUI_TICK_SECONDS", "1"))
# A write to a lab cluster whose worker is running asks for a tick at once (karpui.clusters.lab.nudge), so the
# lab reacts in a fraction of a second, as a cluster's controllers do, not only at the next periodic tick.
KARPUI_TICK_ON_WRITE = os.environ.get("KARPUI_TICK_ON_WRITE", "true").lower() not in ("0", "false", "no")
# Every lab is a kind cluster with Karpenter installed (karpui.writes.lab_objects.lab_install_ensure: kind's
# control-plane node and the chart's Deployment, from migrate, `karp cluster create` and `karp reset`), as a guide's
# `kind create cluster` and `helm install karpenter` leave one. False leaves labs bare: the test suite's default
# (tests/parallel.py), where each test builds the cluster it needs.
KARPUI_LAB_INSTALL = os.environ.get("KARPUI_LAB_INSTALL", "true").lower() not in ("0", "false", "no")
# /readyz fails while a lab cluster's last successful tick is older than this (30 periods: 30 s by default).
KARPUI_TICK_STALE_SECONDS = float(os.environ.get("KARPUI_TICK_STALE_SECONDS", str(30 * KARPUI_TICK_SECONDS)))
# Touched by `manage.py engine` each time round its loop, and by Celery beat each time it sends a task, when set: the
# liveness probes of deploy/ check its age (python -m karpui.heartbeat FILE MAX_AGE).
KARPUI_HEARTBEAT_FILE = os.environ.get("KARPUI_HEARTBEAT_FILE", "")
# The largest catalog file the dashboard accepts (the built-in AWS sample is about 0.2 MB).
KARPUI_CATALOG_MAX_BYTES = int(os.environ.get("KARPUI_CATALOG_MAX_BYTES", str(20 * 1024 * 1024)))
# How long the savings chart's cost history is kept (cluster time).
KARPUI_COST_HISTORY_DAYS = int(os.environ.get("KARPUI_COST_HISTORY_DAYS", "31"))
CELERY_BEAT_SCHEDULE = {
    "cluster-tick": {
        "task": "karpui.tasks.clusters_tick",
        "schedule": KARPUI_TICK_SECONDS,
        # A tick that could not start within its period is stale; the next one supersedes it.
        "options": {"expires": max(KARPUI_TICK_SECONDS, 1.0)},
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "pythonjsonlogger.json.JsonFormatter", "fmt": "%(levelname)s %(name)s %(message)s"}},
    "filters": {"request_id": {"()": "karpui.requests.RequestIdFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json", "filters": ["request_id"]}},
    "loggers": {
        "karpui": {"handlers": ["console"], "level": os.environ.get("KARPUI_LOG_LEVEL", "INFO")},
        # The engine's parts outside Django: leader election, informers (a refused watch is a warning).
        "provisioner": {"handlers": ["console"], "level": os.environ.get("KARPUI_LOG_LEVEL", "INFO")},
    },
}

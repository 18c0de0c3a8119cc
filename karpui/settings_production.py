"""Production settings: the base settings with every `check --deploy` safeguard on; SECRET_KEY must be given."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from karpui.settings import *  # noqa: F403
from karpui.settings import env_bool

if "SECRET_KEY" not in os.environ or len(os.environ["SECRET_KEY"]) < 50:
    raise ImproperlyConfigured("SECRET_KEY must be set to a random string of at least 50 characters in production")
SECRET_KEY = os.environ["SECRET_KEY"]
DEBUG = env_bool("DEBUG", False)

SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips it from clients): trust it for is_secure().
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

"""Settings of the Tidemark control plane, all from the environment.

Unset variables fall back to an embedded, single-machine setup under `TIDEMARK_STATE_DIR` (default
`./state`): a SQLite database and Celery's filesystem broker. Production points `DATABASE_URL` at
PostgreSQL and `CELERY_BROKER_URL` at Redis.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import dj_database_url

from engine import env, split_locations

BASE_DIR = Path(__file__).resolve().parent.parent
STATE_DIR = Path(env.text("TIDEMARK_STATE_DIR", str(BASE_DIR / "state"))).resolve()
STATE_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """DJANGO_SECRET_KEY, or a random key kept in the state folder so sessions survive restarts."""
    if env.text("DJANGO_SECRET_KEY"):
        return env.text("DJANGO_SECRET_KEY")
    key_file = STATE_DIR / "secret_key"
    if not key_file.exists():
        from django.core.management.utils import get_random_secret_key

        key_file.write_text(get_random_secret_key())
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env.flag("DJANGO_DEBUG", False)
# The hosts this site answers as; a forged Host header gets 400 instead of steering redirects and links.
# Local by default (what `make run` serves); a deployment names its own host(s).
ALLOWED_HOSTS = [h.strip() for h in env.text("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")
                 if h.strip()]
CSRF_TRUSTED_ORIGINS = [o for o in env.text("DJANGO_CSRF_TRUSTED_ORIGINS").split(",") if o]
# Behind TLS: secure cookies and HSTS (off by default, as `make run` serves plain HTTP on localhost).
SESSION_COOKIE_SECURE = env.flag("DJANGO_SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env.flag("DJANGO_CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env.whole("DJANGO_SECURE_HSTS_SECONDS", 0, unit="seconds", minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.flag("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
if env.flag("DJANGO_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "webapp.tables",
    "webapp.api",
    "webapp.accounts",
    "webapp.alerts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # the dashboard's CSS, JS and Chart.js under gunicorn (make run, docker compose): Django serves static files
    # only in DEBUG or `runserver --insecure`
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "webapp.hygiene.RejectNulBytesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "webapp.accounts.middleware.RefusalAuditMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "webapp.accounts.middleware.RoleRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webapp.errors.ErrorResponses",
]
CSRF_FAILURE_VIEW = "webapp.errors.csrf_failure"   # the site's 403 page; audited by RefusalAuditMiddleware

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

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
                "webapp.accounts.roles.role_context",
            ],
        },
    },
]

# Database connections are bounded by the processes' threads, not by load: each gunicorn thread, each
# pool process (plus its lease heartbeat thread) and beat hold at most one connection, kept for
# CONN_MAX_AGE seconds (DJANGO_CONN_MAX_AGE, default 60; 0 closes after every request). With the default
# 2 web workers × 4 threads, 1 worker process and beat that is ≤ 8 + 2 + 1 + 1 (the sweep) connections,
# far below PostgreSQL's default max_connections of 100 (docs/ARCHITECTURE.md, "Database connections").
DATABASES = {
    "default": dj_database_url.parse(
        env.text("DATABASE_URL") or f"sqlite:///{STATE_DIR / 'tidemark.sqlite3'}",
        conn_max_age=env.whole("DJANGO_CONN_MAX_AGE", 60, unit="seconds", minimum=0), conn_health_checks=True)
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Web, worker and beat share the file: wait for a writer instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "tables:list"
LOGOUT_REDIRECT_URL = "accounts:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Only for an explicit `collectstatic`: pages are served straight from STATICFILES_DIRS (below), and WhiteNoise
# would warn "No directory at" a STATIC_ROOT nothing ever collected into.
STATIC_ROOT = STATE_DIR / "static" if (STATE_DIR / "static").is_dir() else None
# straight from STATICFILES_DIRS (no collectstatic step to forget); files are read once at start unless DEBUG
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- Tidemark ----------------------------------------------------------------------------------
# Local folders and object-store prefixes (s3://bucket/prefix), separated by ":" or ",".
TIDEMARK_TABLE_ROOTS = split_locations(env.text("TIDEMARK_TABLE_ROOTS", str(STATE_DIR / "tables")))
METRICS_TOKEN = env.text("METRICS_TOKEN")
# Alerts (webapp/alerts): links in alerts start with the dashboard's public URL; email goes through Django's
# SMTP backend; failed deliveries are retried with exponential backoff; each channel is told at most N
# times an hour about one table.
TIDEMARK_BASE_URL = env.text("TIDEMARK_BASE_URL", "http://localhost:8000").rstrip("/")
EMAIL_HOST = env.text("TIDEMARK_SMTP_HOST", "localhost")
EMAIL_PORT = env.whole("TIDEMARK_SMTP_PORT", 25)
EMAIL_HOST_USER = env.text("TIDEMARK_SMTP_USER")
EMAIL_HOST_PASSWORD = env.text("TIDEMARK_SMTP_PASSWORD")
EMAIL_USE_TLS = env.flag("TIDEMARK_SMTP_TLS", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env.text("TIDEMARK_ALERT_FROM", "tidemark@localhost")
TIDEMARK_ALERT_ATTEMPTS = env.whole("TIDEMARK_ALERT_ATTEMPTS", 4)
TIDEMARK_ALERT_BACKOFF_S = env.number("TIDEMARK_ALERT_BACKOFF_S", 30.0, unit="seconds")
TIDEMARK_ALERT_RATE_PER_HOUR = env.whole("TIDEMARK_ALERT_RATE_PER_HOUR", 6)
# Webhooks to loopback, private, link-local or reserved addresses are refused unless this is set (SSRF).
TIDEMARK_ALERT_ALLOW_PRIVATE = env.flag("TIDEMARK_ALERT_ALLOW_PRIVATE", False)
METRICS_OPEN = env.flag("TIDEMARK_METRICS_OPEN", False)   # /metrics without a token only when asked for

# --- Celery (owned by tasks/; read by tasks/__init__.py through namespace "CELERY") ----------------
# Redis (or any kombu URL) in production; kombu's filesystem broker under the state folder by default,
# so a fresh checkout runs without a broker service. The tasks record runs in the database themselves,
# so there is no result backend.
CELERY_BROKER_URL = env.text("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _BROKER_DIR = STATE_DIR / "broker"
    # One folder for in and out (producers and consumers share the queue); processed messages are dropped;
    # the control folder holds the exchange table that fanout (worker remote control) needs.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "queue"),
        "data_folder_out": str(_BROKER_DIR / "queue"),
        "data_folder_processed": str(_BROKER_DIR / "processed"),
        "control_folder": str(_BROKER_DIR / "control"),
        "store_processed": False,
    }
    for _folder in ("queue", "processed", "control"):
        (_BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
# A queue name of its own lets several deployments (or test sessions) share one Redis.
CELERY_TASK_DEFAULT_QUEUE = env.text("TIDEMARK_CELERY_QUEUE", "tidemark")
CELERY_TASK_ALWAYS_EAGER = env.flag("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# A pool process takes the next run only when it is free (runs are long and uneven).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Acked when the run ends: a worker holds at most the run it executes, never a prefetched one that would
# be stranded if it died. A message a dead worker held goes back to the queue after the visibility timeout,
# sized to the lease (a redelivered run that already started is a no-op: tasks.runner only starts queued
# runs). A run killed with its worker is not redelivered (reject_on_worker_lost off): the lease sweep
# fails it and a recover repairs the table, never a blind re-run.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = False
# How long a run's table lease lasts unless renewed (tasks.lease reads it here: one reading of the variable).
TIDEMARK_LEASE_TTL_S = env.number("TIDEMARK_LEASE_TTL", 30.0, unit="seconds")
TIDEMARK_VISIBILITY_TIMEOUT_S = max(60.0, 4 * TIDEMARK_LEASE_TTL_S)
if not CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": TIDEMARK_VISIBILITY_TIMEOUT_S}
# A run still queued after this long (no worker took it: all dead, or its message lost) is failed by the
# sweep and never executed later (Airflow's task_queued_timeout).
TIDEMARK_QUEUED_TIMEOUT_S = env.number("TIDEMARK_QUEUED_TIMEOUT", 600.0, unit="seconds")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.text("TIDEMARK_LOG_LEVEL", "INFO")},
}

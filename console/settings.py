"""Settings for the Ascend vLLM Ops Console.

One module, every knob an environment variable with a safe development default
(deploy/console.env.example lists them all). Two modes:

- ``CONSOLE_MODE=embedded`` (default): SQLite and a bundled ``redis-server``
  under ``var/``; a SECRET_KEY is generated once into ``var/secret_key``.
- ``CONSOLE_MODE=production``: SECRET_KEY, DATABASE_URL and REDIS_URL are
  required (REDIS_URL even with a RabbitMQ CELERY_BROKER_URL); nothing is started
  on the operator's behalf.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    """Return a boolean variable; anything but true/false/1/0/yes/no/on/off raises."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean; use true or false (1/0)."
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return an integer variable; a non-integer or out-of-range value raises naming it."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not an integer; set a whole number."
        ) from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}.")
    return value


def env_secret(name: str, default: str | None = None) -> str | None:
    """Return a secret from NAME_FILE (read from disk) or NAME; the file wins."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"{name}_FILE={path!r} cannot be read: {exc.strerror}."
            ) from None
    return os.environ.get(name, default)


CONSOLE_MODE = os.environ.get("CONSOLE_MODE", "embedded").strip().lower()
if CONSOLE_MODE not in {"embedded", "production"}:
    raise ImproperlyConfigured(
        f"CONSOLE_MODE={CONSOLE_MODE!r} is unknown; use embedded or production."
    )
PRODUCTION = CONSOLE_MODE == "production"

VAR_DIR = Path(os.environ.get("CONSOLE_VAR_DIR", BASE_DIR / "var")).resolve()
if not PRODUCTION:
    VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("CONSOLE_DEV", False)
# demo: plan the simulated nodes as container ranks (the sim agents run them via the
# simulator's docker CLI, engine/sim/docker_cli/)
SIM_CONTAINERS = env_bool("SIM_CONTAINERS", False)


def _secret_key() -> str:
    key = env_secret("SECRET_KEY")
    if key:
        return key
    if PRODUCTION:
        raise ImproperlyConfigured(
            "SECRET_KEY is required when CONSOLE_MODE=production; set SECRET_KEY or SECRET_KEY_FILE "
            "(generate one with: python -c 'import secrets; print(secrets.token_urlsafe(50))')."
        )
    path = VAR_DIR / "secret_key"
    if not path.exists():
        # Generated once for development; 0600 so other local users cannot forge sessions.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env.list(
    "ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"]
)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
CONSOLE_HOST = os.environ.get("CONSOLE_HOST", "127.0.0.1")
CONSOLE_PORT = env_int("CONSOLE_PORT", 8000, minimum=1)

# --- Database -----------------------------------------------------------------
if PRODUCTION and not os.environ.get("DATABASE_URL"):
    raise ImproperlyConfigured(
        "DATABASE_URL is required when CONSOLE_MODE=production (postgres://user:pass@host/db)."
    )
try:
    DATABASES = {
        "default": env.db_url(
            "DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'console.sqlite3'}"
        )
    }
except (ImproperlyConfigured, KeyError, ValueError) as exc:
    raise ImproperlyConfigured(
        f"DATABASE_URL is not a valid database URL ({exc}); e.g. postgres://user@host:5432/db."
    ) from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, control worker, beat) share the file: wait for the write lock.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL;",
        }
    )
    # Tests use a file (not :memory:) so real worker processes can share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 0, minimum=0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, Celery, Channels -----------------------------------------------------
# Redis carries the Celery results, the Channels layer (WebSockets), live telemetry and
# the gateway's rate limits, whatever the broker is: CELERY_BROKER_URL=amqp://... moves
# only the task queue to RabbitMQ. Without REDIS_URL the bundled redis-server is used
# (and `make run` starts it), with or without a RabbitMQ broker.
EMBEDDED_REDIS_PORT = env_int("CONSOLE_REDIS_PORT", 16379, minimum=1)
REDIS_URL = os.environ.get("REDIS_URL") or None
EMBEDDED_REDIS = REDIS_URL is None
if PRODUCTION and EMBEDDED_REDIS:
    raise ImproperlyConfigured(
        "REDIS_URL is required when CONSOLE_MODE=production (redis://host:6379/0): Celery "
        "results and the Channels layer behind the live pages' WebSockets need Redis, even "
        "when CELERY_BROKER_URL points at RabbitMQ; production mode starts no bundled Redis."
    )
if REDIS_URL is None:
    REDIS_URL = f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/0"

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or REDIS_URL
CELERY_ACCEPT_CONTENT = [
    "json"
]  # never pickle: node agents must not unpickle control-side data
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_DEFAULT_QUEUE = "control"
CELERY_TASK_ROUTES = ("console.celery.route_task",)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3600, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 3300, minimum=1)
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = os.environ.get("TIME_ZONE", "Asia/Shanghai")
# The beat schedule lives here (one place); later issues add collection and rule evaluation.
# --- Monitoring ----------------------------------------------------------------------
COLLECT_INTERVAL_S = env_int(
    "COLLECT_INTERVAL_S", 5, minimum=1
)  # beat polls every node this often
# How long a round waits for the agents' answers; a later answer is dropped (a missed sample).
COLLECT_DEADLINE_S = (
    env_int("COLLECT_DEADLINE_MS", max(800, COLLECT_INTERVAL_S * 800), minimum=100)
    / 1000
)
STALE_AFTER_S = env_int(
    "STALE_AFTER_S", max(15, 3 * COLLECT_INTERVAL_S), minimum=1
)  # no sample this long → stale
UNREACHABLE_AFTER_S = env_int(
    "UNREACHABLE_AFTER_S", max(60, 12 * COLLECT_INTERVAL_S), minimum=1
)  # → unreachable
RAW_RETENTION_H = env_int(
    "RAW_RETENTION_H", 24, minimum=1
)  # raw samples; 1-minute rollups outlive them
ROLLUP_RETENTION_D = env_int("ROLLUP_RETENTION_D", 30, minimum=1)
METRICS_TOKEN = env_secret(
    "METRICS_TOKEN"
)  # /metrics needs "Authorization: Bearer <token>" ...
METRICS_PUBLIC = env_bool(
    "METRICS_PUBLIC", False
)  # ... or this set to true; otherwise it answers 403
# --- Alerts (monitoring.alerts) --------------------------------------------------------
ALERT_NOTIFY_MAX_RETRIES = env_int(
    "ALERT_NOTIFY_MAX_RETRIES", 5, minimum=0
)  # then the delivery is marked failed
ALERT_NOTIFY_BACKOFF_S = (
    env_int("ALERT_NOTIFY_BACKOFF_MS", 2000, minimum=1) / 1000
)  # doubles per retry
ALERT_WEBHOOK_TIMEOUT_S = env_int("ALERT_WEBHOOK_TIMEOUT_MS", 5000, minimum=100) / 1000
# Alertmanager channels: open alerts are re-posted this often, with endsAt 4 periods ahead
ALERTMANAGER_RESEND_S = env_int("ALERTMANAGER_RESEND_S", 60, minimum=5)
CONSOLE_BASE_URL = os.getenv(
    "CONSOLE_BASE_URL", ""
)  # links in notifications, e.g. https://console.example
# Remediation (monitoring.remediation): guardrails and retries of automatic actions
REMEDIATION_MAX_ACTIONS_PER_HOUR = env_int(
    "REMEDIATION_MAX_ACTIONS_PER_HOUR", 6, minimum=1
)  # per cluster
REMEDIATION_RESTART_MAX_ATTEMPTS = env_int(
    "REMEDIATION_RESTART_MAX_ATTEMPTS", 3, minimum=1
)  # then escalate
REMEDIATION_RESTART_WINDOW_S = env_int("REMEDIATION_RESTART_WINDOW_S", 3600, minimum=60)
REMEDIATION_RESTART_BACKOFF_S = (
    env_int("REMEDIATION_RESTART_BACKOFF_MS", 30000, minimum=1) / 1000
)  # doubles per attempt
FAILOVER_VERIFY_S = (
    env_int("FAILOVER_VERIFY_MS", 10000, minimum=100) / 1000
)  # counter window after a failover
# --- end alerts -----------------------------------------------------------------------

CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "control-heartbeat": {"task": "control.heartbeat", "schedule": 30.0},
    "operations-reap": {"task": "operations.reap", "schedule": 15.0},
    # expires: a round that waited in the queue longer than one interval is stale; skip it.
    "monitoring-collect": {
        "task": "monitoring.collect_round",
        "schedule": float(COLLECT_INTERVAL_S),
        "options": {"expires": float(COLLECT_INTERVAL_S)},
    },
    "monitoring-alertmanager-resend": {
        "task": "monitoring.alertmanager_resend",
        "schedule": float(ALERTMANAGER_RESEND_S),
        "options": {"expires": float(ALERTMANAGER_RESEND_S)},
    },
    "monitoring-rollup-prune": {
        "task": "monitoring.rollup_and_prune",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# channels-redis waits for a consumer's next message with BZPOPMIN for up to
# `brpop_timeout` = 5 s (channels_redis/core.py), and redis-py >= 6 gives every client a
# default socket_timeout of 5 s (redis/_defaults.py DEFAULT_SOCKET_TIMEOUT). On an idle
# channel the read then races the blocking pop, raises TimeoutError in Channels'
# await_many_dispatch, and the WebSocket drops without a close frame. The layer's read
# timeout must outlast the blocking pop; keepalive still notices a dead Redis.
CHANNEL_LAYER_SOCKET_TIMEOUT_S = env_int(
    "CHANNEL_LAYER_SOCKET_TIMEOUT_S", 30, minimum=10
)
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [
                {
                    "address": REDIS_URL,
                    "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT_S,
                    "socket_connect_timeout": 5,
                    "socket_keepalive": True,
                    "health_check_interval": 15,
                }
            ],
            "capacity": 1500,
            "expiry": 30,
        },
    }
}

# --- Django ------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "console",
    "monitoring",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "console.timezones.UserTimezoneMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.middleware.LoginRequiredMiddleware",
    "console.middleware.RejectNulMiddleware",
]

ROOT_URLCONF = "console.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.console",
            ],
        },
    },
]
WSGI_APPLICATION = None
ASGI_APPLICATION = "console.asgi.application"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = os.environ.get("LANGUAGE_CODE", "zh-hans")
LANGUAGES = [("zh-hans", _("Simplified Chinese")), ("en", _("English"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = os.environ.get("TIME_ZONE", "Asia/Shanghai")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
if (
    not PRODUCTION
):  # embedded mode serves through the finders; an empty root keeps WhiteNoise quiet
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True  # serve static/ (and static/vendor/) without a collectstatic step in embedded mode

SESSION_COOKIE_HTTPONLY = True
# Production is served over HTTPS (deploy/nginx): cookies only over TLS unless told otherwise.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
# HTTPS only in production: HSTS for a year, plain-HTTP requests redirected. Behind the
# proxy (TRUST_X_FORWARDED_FOR) its X-Forwarded-Proto says whether the browser used TLS
# (deploy/nginx sets it, overwriting the client's). /healthz (load balancers) and /metrics
# (Prometheus on the console host) may still be asked over plain HTTP.
SECURE_HSTS_SECONDS = env_int(
    "SECURE_HSTS_SECONDS", 31_536_000 if PRODUCTION else 0, minimum=0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Preload is a request to browser vendors to hard-code the domain as HTTPS-only, which
# cannot be taken back quickly: an operator's decision (SECURE_HSTS_PRELOAD=true), so the
# "preload is off" deploy check is silenced rather than turned on for them.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# Behind nginx (deploy/nginx) set TRUST_X_FORWARDED_FOR=true so audit rows get the client IP.
TRUST_X_FORWARDED_FOR = env_bool("TRUST_X_FORWARDED_FOR", False)
if TRUST_X_FORWARDED_FOR:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Operations (runbook bounds; seconds) ------------------------------------------
AGENT_TIMEOUT_S = env_int("AGENT_TIMEOUT_S", 30, minimum=1)
# Verify weights (sha256 of every model file on every node): ~800 GB per node at the
# agents' WEIGHTS_HASH_MB_S (200 MB/s) takes ~70 min the first time; cached afterwards.
WEIGHTS_HASH_TIMEOUT_S = env_int("WEIGHTS_HASH_TIMEOUT_S", 3 * 3600, minimum=10)
# A benchmark sweep point (one vllm bench serve on the head) gives up after this long.
BENCH_POINT_TIMEOUT_S = env_int("BENCH_POINT_TIMEOUT_S", 2 * 3600, minimum=10)
# The console's address as the nodes reach it, for benchmarks sent through the gateway
# (the head's agent runs the load); the embedded default serves on this host.
BENCH_GATEWAY_URL = os.getenv("BENCH_GATEWAY_URL") or (
    "" if PRODUCTION else f"http://127.0.0.1:{CONSOLE_PORT}"
)
# Latency/queue alerts that begin up to this long after a benchmark ended are its load's.
BENCH_LOAD_GRACE_S = env_int("BENCH_LOAD_GRACE_S", 120, minimum=0)
PREFLIGHT_REACH_TIMEOUT_S = env_int("PREFLIGHT_REACH_TIMEOUT_S", 10, minimum=1)
PREFLIGHT_TIMEOUT_S = env_int("PREFLIGHT_TIMEOUT_S", 120, minimum=1)
# The engines' API key (console/engine_auth.py): one key for every cluster, or empty for a
# key per cluster derived from SECRET_KEY. ENGINE_API_KEY_FILE reads it from a file.
ENGINE_API_KEY = env_secret("ENGINE_API_KEY", "") or ""
if ENGINE_API_KEY and not (
    ENGINE_API_KEY.isascii()
    and ENGINE_API_KEY.isprintable()
    and ENGINE_API_KEY == ENGINE_API_KEY.strip()
):
    # it goes into an HTTP header (the gateway's Authorization) and the engine's env file
    raise ImproperlyConfigured(
        "ENGINE_API_KEY must be printable ASCII (no spaces at either end, no control "
        "characters); generate one with: openssl rand -hex 32"
    )
ENGINE_START_CALL_TIMEOUT_S = env_int("ENGINE_START_CALL_TIMEOUT_S", 60, minimum=1)
ENGINE_LISTEN_TIMEOUT_S = env_int("ENGINE_LISTEN_TIMEOUT_S", 120, minimum=1)
ENGINE_HEALTH_TIMEOUT_S = env_int(
    "ENGINE_HEALTH_TIMEOUT_S", 1800, minimum=1
)  # a 397B model loads for minutes
ENGINE_STOP_TIMEOUT_S = env_int("ENGINE_STOP_TIMEOUT_S", 90, minimum=1)
SMOKE_TIMEOUT_S = env_int("SMOKE_TIMEOUT_S", 120, minimum=1)
GATE_TIMEOUT_S = env_int(
    "GATE_TIMEOUT_S", 120, minimum=1
)  # one correctness-gate answer
WARMUP_REQUESTS = env_int(
    "WARMUP_REQUESTS", 100, minimum=0
)  # the original field guide's warm-up
WARMUP_CONCURRENCY = env_int("WARMUP_CONCURRENCY", 8, minimum=1)
WARMUP_MAX_ERROR_FRACTION = 0.05
DRAIN_TIMEOUT_S = env_int("DRAIN_TIMEOUT_S", 120, minimum=0)
OPERATION_HEARTBEAT_S = env_int("OPERATION_HEARTBEAT_S", 5, minimum=1)
OPERATION_STALE_S = env_int(
    "OPERATION_STALE_S", 60, minimum=2
)  # no heartbeat this long → interrupted
OPERATION_QUEUE_STALE_S = env_int("OPERATION_QUEUE_STALE_S", 300, minimum=2)
OPERATION_TIME_LIMIT_S = env_int("OPERATION_TIME_LIMIT_S", 7200, minimum=60)

# --- Evidence bundles (logs, plogs, npu-smi, links from every node; issue 19) ---------
EVIDENCE_MAX_BYTES = env_int("EVIDENCE_MAX_BYTES", 8 * 1024 * 1024, minimum=65536)
EVIDENCE_RETENTION_DAYS = env_int("EVIDENCE_RETENTION_DAYS", 30, minimum=1)
EVIDENCE_AGENT_TIMEOUT_S = env_int("EVIDENCE_AGENT_TIMEOUT_S", 30, minimum=1)
EVIDENCE_LOG_LINES = env_int("EVIDENCE_LOG_LINES", 2000, minimum=1)

# --- REST admin API (/api/) ------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",  # Authorization: Token <key>
        "rest_framework.authentication.SessionAuthentication",  # the browser (CSRF enforced)
    ],
    "DEFAULT_PERMISSION_CLASSES": ["console.api.permissions.IsViewer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "console.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [],
    "DEFAULT_PARSER_CLASSES": [
        "console.api.parsers.BoundedJSONParser",  # 5000-deep JSON: 400, not 500
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Ascend vLLM Ops Console API",
    "DESCRIPTION": "Admin API: clusters, nodes, profiles, operations, telemetry, alerts, incidents, API keys, audit.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",  # served from local static files, no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # one schema name per choice set that several serializers use
    "ENUM_NAME_OVERRIDES": {
        "IncidentStateEnum": "monitoring.models.incidents.IncidentState",
        "RemediationActionEnum": "monitoring.models.alerts.RemediationAction",
        "ServerModelEnum": "console.models.inventory.SERVER_MODEL_CHOICES",
        "GatePolicyEnum": "console.models.acceptance.GatePolicy",
        "RemediationPolicyEnum": "monitoring.models.alerts.RemediationPolicy",
    },
}

# --- Inference gateway (/v1/..., console/gateway/) -----------------------------------
# Seconds a client is told to wait (Retry-After) while a cluster drains/restarts; x6 when it is stopped.
GATEWAY_RETRY_AFTER_S = env_int("GATEWAY_RETRY_AFTER_S", 10, minimum=1)
# How long an engine may take to answer (streams: between two chunks) and to accept a connection.
GATEWAY_UPSTREAM_TIMEOUT_S = env_int("GATEWAY_UPSTREAM_TIMEOUT_S", 600, minimum=1)
GATEWAY_CONNECT_TIMEOUT_S = env_int("GATEWAY_CONNECT_TIMEOUT_S", 5, minimum=1)
# Usage counters per key x model are written at most once per this many seconds (0 = every request).
GATEWAY_USAGE_FLUSH_S = env_int("GATEWAY_USAGE_FLUSH_S", 5, minimum=0)
# Most completions one request may ask for (OpenAI's `n`); max_tokens is bounded by the model's max_model_len.
GATEWAY_MAX_N = env_int("GATEWAY_MAX_N", 8, minimum=1)

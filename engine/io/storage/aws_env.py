"""How S3 is reached: the standard AWS chain's endpoint and region, read from the environment each time (tests and
operators switch endpoints; a change makes new clients)."""
from __future__ import annotations

import os

from engine import env

# Env vars whose values decide how a store is reached: a change makes a new client (tests switch endpoints).
AWS_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
           "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH",
           "TIDEMARK_S3_CONDITIONAL_PUT")


def env_key() -> tuple[str | None, ...]:
    """The environment a client was made for (clients are kept per key)."""
    return tuple(os.environ.get(k) for k in AWS_ENV)


def endpoint_url() -> str | None:
    """The S3 endpoint the AWS chain names (AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL), None for AWS."""
    return env.text("AWS_ENDPOINT_URL_S3") or env.text("AWS_ENDPOINT_URL") or None


def region() -> str | None:
    return env.text("AWS_REGION") or env.text("AWS_DEFAULT_REGION") or None


def conditional_put() -> bool:
    """Whether S3 takes `If-None-Match: *` (TIDEMARK_S3_CONDITIONAL_PUT=false: this S3-compatible store lacks it)."""
    return env.flag("TIDEMARK_S3_CONDITIONAL_PUT", True)

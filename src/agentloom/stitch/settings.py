"""Stitch's settings, from ``STITCH_*`` environment variables (and the CLI)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agentloom.stitch.webhooks import MAX_RESPONSE_BYTES, WebhookPolicy

LOOPBACK = ("127.0.0.1", "::1", "localhost")
ANY_ADDRESS = ("0.0.0.0", "::", "")  # every interface: no one address to suggest
MIN_API_KEY_LENGTH = 16
MAX_BODY_BYTES = 1024 * 1024  # a request body above this is refused with 413 before it is read further


class StitchConfigError(RuntimeError):
    pass


class StitchSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STITCH_", extra="ignore", populate_by_name=True)

    base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("STITCH_BASE_URL", "NEXT_PUBLIC_BASE_URL", "base_url"),
        description="The URL workers reach this server at; callback URLs start with it.",
    )
    database_url: str | None = Field(
        None, description="sqlite:///path or postgresql://... (default: SQLite in the data dir)."
    )
    api_key: str | None = Field(
        None, description="Required on management endpoints when set; must be set off loopback."
    )
    secret: str | None = Field(None, description="Callback-signing key (default: one kept in the database).")
    worker_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds one webhook send may take: connecting, the worker's answer and its body.",
    )
    worker_max_response_bytes: int = Field(
        MAX_RESPONSE_BYTES,
        gt=0,
        description="Most bytes of a worker's answer to a webhook that are read (only an excerpt is kept); "
        "a longer answer's connection is closed.",
    )
    node_timeout: float | None = Field(
        None,
        gt=0,
        description="Default deadline in seconds for a Worker's callback (data.timeoutSeconds overrides it); "
        "off by default.",
    )
    poll_interval: float = Field(1.0, gt=0, description="Seconds between reconciler rounds.")
    lease_seconds: float = Field(30.0, gt=0, description="A dispatch not confirmed sent within this is sent again.")
    max_body_bytes: int = Field(
        MAX_BODY_BYTES,
        gt=0,
        description="Largest request body accepted (flows, run inputs, callbacks, completions); larger ones get 413.",
    )
    webhook_allow: str | None = Field(
        None,
        description="Comma-separated addresses, networks or host names webhooks may reach although refused otherwise.",
    )
    webhook_deny_private: bool = Field(
        False,
        description="Refuse webhooks to loopback and private addresses too (only public addresses remain).",
    )

    # Retention, in the spirit of n8n's defaults (EXECUTIONS_DATA_PRUNE, _MAX_AGE 336 h,
    # _PRUNE_MAX_COUNT 10,000, about hourly): docs/stitch-operations.md says why.
    retention_enabled: bool = Field(
        True, description="Prune finished runs (completed, failed, cancelled) in the background."
    )
    retention_max_age_hours: float = Field(
        336.0, ge=0, le=876_000, description="Finished runs older than this are pruned (hours; 0: no age limit)."
    )
    retention_max_age_seconds: float | None = Field(
        None,
        ge=0,
        le=3_153_600_000,  # a century, as the hours
        description="The same limit in seconds, for ages under an hour (0: no age limit); "
        "set this or STITCH_RETENTION_MAX_AGE_HOURS, not both.",
    )
    retention_max_runs_per_flow: int = Field(
        10_000, ge=0, description="At most this many finished runs kept per flow, the newest (0: no limit)."
    )
    retention_interval_seconds: float = Field(3600.0, gt=0, description="Seconds between background prunes.")
    retention_batch_size: int = Field(
        200, ge=1, le=10_000, description="Runs deleted per transaction (each batch holds the write lock briefly)."
    )

    callback_concurrency: int = Field(
        4,
        ge=1,
        le=1024,
        description="Callbacks one server process handles at once (body read, parsed, committed); "
        "the rest wait their turn, so reads are not queued behind them.",
    )
    callback_queue: int = Field(
        1000,
        ge=0,
        description="Callbacks that may wait for a turn in one server process; beyond it a callback is "
        "answered 503 with Retry-After (0: refuse whenever every turn is taken).",
    )
    callback_retry_after: int = Field(
        1, ge=1, le=3600, description="Seconds a callback refused with 503 is told to wait (Retry-After)."
    )

    def retention_max_age(self) -> timedelta | None:
        """The age limit of finished runs, from seconds or hours; None: no age limit."""
        if self.retention_max_age_seconds is not None:
            age = timedelta(seconds=self.retention_max_age_seconds)
        else:
            age = timedelta(hours=self.retention_max_age_hours)
        return age or None

    def checked(self, host: str, port: int, warn: Callable[[str], None] | None = None) -> StitchSettings:
        """Refuse to start without a usable base URL, or off loopback without an API key.

        On loopback a missing base URL defaults to the server's own address (workers on this
        machine reach it there), said in a warning; off loopback the server cannot know the
        address workers reach it at, so it must be given."""
        if not self.base_url:
            if host not in LOOPBACK:
                shown_host = "HOST" if host in ANY_ADDRESS else (f"[{host}]" if ":" in host else host)
                raise StitchConfigError(
                    "STITCH_BASE_URL is not set: set it (or NEXT_PUBLIC_BASE_URL) to the URL workers can reach this "
                    f"server at, for example STITCH_BASE_URL=http://{shown_host}:{port}"
                    + (" (HOST: this machine's name or address as workers see it)" if shown_host == "HOST" else "")
                )
            self.base_url = f"http://{'[::1]' if host == '::1' else '127.0.0.1'}:{port}"
            (warn or _stderr)(
                f"warning: STITCH_BASE_URL is not set; callbacks will use {self.base_url} "
                "(this server's own loopback address, reachable only by workers on this machine)"
            )
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise StitchConfigError(
                f"STITCH_BASE_URL={self.base_url!r} is not an http(s) URL such as http://127.0.0.1:8000"
            )
        if self.lease_seconds <= self.worker_timeout:
            raise StitchConfigError(
                f"STITCH_LEASE_SECONDS ({self.lease_seconds:g}) must exceed "
                f"STITCH_WORKER_TIMEOUT ({self.worker_timeout:g}), "
                "or dispatches still in flight would be sent twice"
            )
        if self.retention_max_age_seconds is not None and "retention_max_age_hours" in self.model_fields_set:
            raise StitchConfigError(
                "STITCH_RETENTION_MAX_AGE_SECONDS and STITCH_RETENTION_MAX_AGE_HOURS are both set; they are the "
                "same limit: unset one of them"
            )
        self.check_api_key()
        if host not in LOOPBACK and not self.api_key:
            raise StitchConfigError(
                f"listening on {host} needs an API key: set STITCH_API_KEY (clients send it as "
                "'Authorization: Bearer <key>'), or listen on 127.0.0.1"
            )
        return self

    def webhook_policy(self) -> WebhookPolicy:
        return WebhookPolicy(self.webhook_allow, self.webhook_deny_private)

    def check_api_key(self) -> None:
        """A key that is set must be usable: not blank, not short, sendable in an HTTP header."""
        key = self.api_key
        if key is None:
            return
        fix = (
            "; make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))' "
            "(or unset STITCH_API_KEY to run without one on loopback)"
        )
        if not key.strip():
            raise StitchConfigError("STITCH_API_KEY is set but blank" + fix)
        if key != key.strip() or any(not (" " < ch <= "~") for ch in key):
            raise StitchConfigError(
                "STITCH_API_KEY must be printable ASCII without spaces (it is sent in an HTTP header)" + fix
            )
        if len(key) < MIN_API_KEY_LENGTH:
            raise StitchConfigError(
                f"STITCH_API_KEY is too short ({len(key)} characters; at least {MIN_API_KEY_LENGTH})" + fix
            )


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)

"""Embedding model configuration kept in SQLite (seed 003, "Embedding模型配置读取").

One file, ``<data_dir>/models.db``, two tables: ``providers`` (where a model runs and how
to authenticate) and ``models`` (which model, its dimensions and per-model options).
Every write is one transaction; a partial unique index guarantees at most one default
per model type even when two processes write at once. API keys may be stored here, so
the file is created with mode 0600 and no record ever prints or serialises a key.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

from agentloom.embeddings.records import (
    BUILTIN_MODELS,
    DEFAULT_DIMENSIONS,
    DEFAULT_MODEL_KEY,
    DEFAULT_PROVIDER,
    ENV_NAME,
    PROVIDER_KINDS,
    PROVIDER_NAME,
    InvalidFieldError,
    ModelRecord,
    ProviderRecord,
    RecordNotFoundError,
    RefusedError,
    check_base_url,
    check_config,
    check_dimensions,
    check_model_key,
    check_model_type,
    now_iso,
)

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS providers (
    name        TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('local', 'openai', 'ollama')),
    base_url    TEXT,
    api_key     TEXT,
    api_key_env TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS models (
    id          INTEGER PRIMARY KEY,
    model_key   TEXT NOT NULL,
    model_type  TEXT NOT NULL DEFAULT 'embedding',
    provider    TEXT NOT NULL REFERENCES providers(name) ON UPDATE CASCADE ON DELETE RESTRICT,
    config      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(config)),
    dimensions  INTEGER NOT NULL CHECK (dimensions > 0),
    is_default  INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
    enabled     INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (provider, model_key)
);
-- At most one default per model type, enforced by SQLite itself.
CREATE UNIQUE INDEX IF NOT EXISTS models_one_default ON models(model_type) WHERE is_default = 1;
"""


class ModelRegistry:
    """Providers and models in SQLite. Reads open a short connection; writes are one transaction.

    ``on_change`` is called after every successful write (the service uses it to drop its
    cached configuration at once).
    """

    def __init__(self, path: Path | str, *, on_change: Callable[[], None] | None = None) -> None:
        self.path = Path(path)
        self._on_change = on_change
        self._init_lock = threading.Lock()
        self._ready = False

    @classmethod
    def from_settings(cls, settings: Any, *, on_change: Callable[[], None] | None = None) -> ModelRegistry:
        return cls(Path(settings.data_dir) / "models.db", on_change=on_change)

    # -- connections ---------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 10000")
        return conn

    def _ensure_schema(self) -> None:
        if self._ready:
            return
        with self._init_lock:
            if self._ready:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                # Create it private: it may hold API keys.
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            conn = self._open()
            try:
                _use_wal(conn)
                conn.executescript(_SCHEMA)
            finally:
                conn.close()
            self._ready = True

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        self._ensure_schema()
        conn = self._open()
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: takes the write lock up front so check-then-write is atomic."""
        self._ensure_schema()
        conn = self._open()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()
        if self._on_change is not None:
            self._on_change()

    # -- rows ----------------------------------------------------------------------------
    _MODEL_SELECT = (
        "SELECT m.*, p.kind AS kind, p.base_url AS base_url, p.api_key AS api_key, "
        "p.api_key_env AS api_key_env FROM models m JOIN providers p ON p.name = m.provider"
    )

    @staticmethod
    def _model(row: sqlite3.Row) -> ModelRecord:
        key_set = bool(row["api_key"]) or bool(row["api_key_env"] and os.environ.get(row["api_key_env"]))
        return ModelRecord(
            id=row["id"],
            key=row["model_key"],
            provider=row["provider"],
            kind=row["kind"],
            dimensions=row["dimensions"],
            config=MappingProxyType(json.loads(row["config"])),
            is_default=bool(row["is_default"]),
            enabled=bool(row["enabled"]),
            model_type=row["model_type"],
            base_url=row["base_url"],
            api_key_set=key_set,
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )

    @staticmethod
    def _provider(row: sqlite3.Row) -> ProviderRecord:
        return ProviderRecord(
            name=row["name"],
            kind=row["kind"],
            base_url=row["base_url"],
            api_key=row["api_key"],
            api_key_env=row["api_key_env"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )

    def _provider_names(self, conn: sqlite3.Connection) -> list[str]:
        return [r[0] for r in conn.execute("SELECT name FROM providers ORDER BY name")]

    @staticmethod
    def _no_model(model_id: int) -> RecordNotFoundError:
        return RecordNotFoundError(
            f"model id {model_id!r} not found: run `agentloom models list` to see the ids.",
            field="model_id",
            reason="not_found",
            value=model_id,
            model_id=model_id,
        )

    # -- providers -----------------------------------------------------------------------
    def upsert_provider(
        self,
        name: str,
        kind: str,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
    ) -> ProviderRecord:
        if not isinstance(name, str) or not PROVIDER_NAME.match(name):
            raise InvalidFieldError(
                f"provider name {name!r} is invalid: use 1-64 letters, digits, '.', '_' or '-', starting with a "
                "letter or digit, e.g. 'openai'.",
                field="provider",
                reason="invalid",
                value=name,
            )
        if kind not in PROVIDER_KINDS:
            raise InvalidFieldError(
                f"provider kind {kind!r} is invalid: use one of {', '.join(PROVIDER_KINDS)}.",
                field="kind",
                reason="invalid",
                value=kind,
                allowed=list(PROVIDER_KINDS),
            )
        base_url = check_base_url(base_url, kind)
        if api_key is not None and (not isinstance(api_key, str) or not api_key.strip()):
            raise InvalidFieldError(
                "api_key is empty: give the key, or leave it unset and name an environment variable in api_key_env.",
                field="api_key",
                reason="empty",
            )
        if api_key_env is not None and (not isinstance(api_key_env, str) or not ENV_NAME.match(api_key_env)):
            raise InvalidFieldError(
                f"api_key_env {api_key_env!r} is invalid: give the NAME of an environment variable, "
                "e.g. 'OPENAI_API_KEY' (not the key itself).",
                field="api_key_env",
                reason="invalid",
                value=api_key_env,
            )
        if kind == "local" and (api_key or api_key_env):
            which = "api_key" if api_key else "api_key_env"
            raise InvalidFieldError(
                f"{which} is set on a local provider: local models need no key, leave it empty.",
                field=which,
                reason="not_allowed",
                kind=kind,
            )
        now = now_iso()
        with self._write() as conn:
            old = conn.execute("SELECT kind FROM providers WHERE name = ?", (name,)).fetchone()
            if old is None:
                conn.execute(
                    "INSERT INTO providers (name, kind, base_url, api_key, api_key_env, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (name, kind, base_url, api_key, api_key_env, now, now),
                )
            else:
                if old["kind"] != kind:
                    used = conn.execute("SELECT COUNT(*) FROM models WHERE provider = ?", (name,)).fetchone()[0]
                    if used:
                        raise RefusedError(
                            f"provider {name!r} is a {old['kind']} provider with {used} model(s): its kind cannot "
                            f"change to {kind!r}. Create a new provider under another name instead.",
                            field="kind",
                            reason="kind_change",
                            value=kind,
                            provider=name,
                            old_kind=old["kind"],
                            models=used,
                        )
                conn.execute(
                    "UPDATE providers SET kind = ?, base_url = ?, api_key = ?, api_key_env = ?, updated_at = ? "
                    "WHERE name = ?",
                    (kind, base_url, api_key, api_key_env, now, name),
                )
            row = conn.execute("SELECT * FROM providers WHERE name = ?", (name,)).fetchone()
        record = self._provider(row)
        log.info("embedding provider saved: %r", record)
        return record

    def get_provider(self, name: str) -> ProviderRecord | None:
        with self._read() as conn:
            row = conn.execute("SELECT * FROM providers WHERE name = ?", (name,)).fetchone()
        return self._provider(row) if row else None

    def list_providers(self) -> list[ProviderRecord]:
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM providers ORDER BY name").fetchall()
        return [self._provider(r) for r in rows]

    # -- models: reads ---------------------------------------------------------------------
    def default(self, model_type: str = "embedding") -> ModelRecord | None:
        with self._read() as conn:
            row = conn.execute(
                f"{self._MODEL_SELECT} WHERE m.model_type = ? AND m.is_default = 1", (model_type,)
            ).fetchone()
        return self._model(row) if row else None

    def get(self, model_key: str, provider: str | None = None) -> ModelRecord | None:
        """The model with this key; when several providers have it and none is named, the default wins.

        A built-in key (``BUILTIN_MODELS``) that is not registered yet is registered now, under
        the local provider and not as the default: naming it is enough to use it.
        """
        found = self._get(model_key, provider)
        if found is None and model_key in BUILTIN_MODELS and provider in (None, DEFAULT_PROVIDER):
            self.ensure_builtin(model_key)
            found = self._get(model_key, provider)
        return found

    def ensure_builtin(self, model_key: str) -> ModelRecord:
        """Register a built-in model (``BUILTIN_MODELS``) under the local provider when it is missing."""
        if model_key not in BUILTIN_MODELS:
            raise InvalidFieldError(
                f"{model_key!r} is not a built-in model: built-in models are {', '.join(BUILTIN_MODELS)}.",
                field="model_key",
                reason="invalid",
                value=model_key,
                allowed=list(BUILTIN_MODELS),
            )
        config, dimensions = BUILTIN_MODELS[model_key]
        now = now_iso()
        with self._write() as conn:  # one transaction: two processes naming it at once add it once
            prow = conn.execute("SELECT kind FROM providers WHERE name = ?", (DEFAULT_PROVIDER,)).fetchone()
            if prow is not None and prow["kind"] != "local":
                raise RefusedError(
                    f"built-in model {model_key!r} runs on the provider {DEFAULT_PROVIDER!r}, which is a "
                    f"{prow['kind']} provider here, so it cannot be registered: built-in models need "
                    f"{DEFAULT_PROVIDER!r} to be the local provider.",
                    field="provider",
                    reason="builtin_provider",
                    value=DEFAULT_PROVIDER,
                    model_key=model_key,
                    kind=prow["kind"],
                )
            if (
                _add_local_model(
                    conn, model_key, "embedding", check_config(config, "local"), dimensions, is_default=False, now=now
                )
                is None
            ):
                log.info("registered built-in embedding model %s (provider %s)", model_key, DEFAULT_PROVIDER)
        record = self._get(model_key, DEFAULT_PROVIDER)
        assert record is not None  # written above, in one transaction
        return record

    def _get(self, model_key: str, provider: str | None) -> ModelRecord | None:
        with self._read() as conn:
            if provider is not None:
                rows = conn.execute(
                    f"{self._MODEL_SELECT} WHERE m.model_key = ? AND m.provider = ?", (model_key, provider)
                ).fetchall()
            else:
                rows = conn.execute(
                    f"{self._MODEL_SELECT} WHERE m.model_key = ? ORDER BY m.is_default DESC, m.id", (model_key,)
                ).fetchall()
        if not rows:
            return None
        if len(rows) > 1 and not rows[0]["is_default"]:
            names = [r["provider"] for r in rows]
            raise RefusedError(
                f"model {model_key!r} exists under several providers ({', '.join(names)}) and none of them is the "
                "default: name the provider, or make the one you want the default.",
                field="model_key",
                reason="ambiguous",
                value=model_key,
                providers=names,
                ids=[r["id"] for r in rows],
            )
        return self._model(rows[0])

    def get_by_id(self, model_id: int) -> ModelRecord | None:
        with self._read() as conn:
            row = conn.execute(f"{self._MODEL_SELECT} WHERE m.id = ?", (model_id,)).fetchone()
        return self._model(row) if row else None

    def list_models(self, model_type: str = "embedding") -> list[ModelRecord]:
        with self._read() as conn:
            rows = conn.execute(f"{self._MODEL_SELECT} WHERE m.model_type = ? ORDER BY m.id", (model_type,)).fetchall()
        return [self._model(r) for r in rows]

    # -- models: writes --------------------------------------------------------------------
    def ensure_default(self, model_type: str = "embedding") -> ModelRecord:
        """Make sure a default model exists: the local all-MiniLM-L6-v2 when none is configured."""
        check_model_type(model_type)
        existing = self.default(model_type)
        if existing is not None:
            return existing
        now = now_iso()
        with self._write() as conn:
            # Re-check inside the write lock: another process may have won the race.
            row = conn.execute(
                "SELECT id FROM models WHERE model_type = ? AND is_default = 1", (model_type,)
            ).fetchone()
            if row is None:
                found = _add_local_model(
                    conn, DEFAULT_MODEL_KEY, model_type, {}, DEFAULT_DIMENSIONS, is_default=True, now=now
                )
                if found is None:
                    log.info(
                        "created default %s model %s (provider %s)", model_type, DEFAULT_MODEL_KEY, DEFAULT_PROVIDER
                    )
                else:
                    conn.execute(
                        "UPDATE models SET is_default = 1, enabled = 1, updated_at = ? WHERE id = ?", (now, found)
                    )
        record = self.default(model_type)
        assert record is not None  # written above, in one transaction
        return record

    def add_model(
        self,
        model_key: str,
        provider: str,
        *,
        dimensions: int,
        config: Mapping[str, Any] | None = None,
        is_default: bool = False,
        enabled: bool = True,
        model_type: str = "embedding",
    ) -> ModelRecord:
        check_model_key(model_key)
        check_dimensions(dimensions)
        check_model_type(model_type)
        if is_default and not enabled:
            raise InvalidFieldError(
                f"model {model_key!r} cannot be added as the default and disabled: the default model must be "
                "enabled, so add it enabled or not as the default.",
                field="enabled",
                reason="default_disabled",
                value=enabled,
                model_key=model_key,
            )
        now = now_iso()
        with self._write() as conn:
            prow = conn.execute("SELECT kind FROM providers WHERE name = ?", (provider,)).fetchone()
            if prow is None:
                known = self._provider_names(conn)
                raise RecordNotFoundError(
                    f"provider {provider!r} not found (known: {', '.join(known) or 'none'}): "
                    "create it first with the registry's upsert_provider method.",
                    field="provider",
                    reason="not_found",
                    value=provider,
                    known=known,
                )
            clean = check_config(config, prow["kind"])
            dup = conn.execute(
                "SELECT id FROM models WHERE provider = ? AND model_key = ?", (provider, model_key)
            ).fetchone()
            if dup is not None:
                raise RefusedError(
                    f"model {model_key!r} already exists for provider {provider!r} (id {dup['id']}): "
                    "change that record (the registry's update_model method) instead of adding it again.",
                    field="model_key",
                    reason="exists",
                    value=model_key,
                    provider=provider,
                    model_id=dup["id"],
                )
            if is_default:
                conn.execute(
                    "UPDATE models SET is_default = 0, updated_at = ? WHERE model_type = ? AND is_default = 1",
                    (now, model_type),
                )
            cur = conn.execute(
                "INSERT INTO models (model_key, model_type, provider, config, dimensions, is_default, enabled, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    model_key,
                    model_type,
                    provider,
                    json.dumps(clean),
                    dimensions,
                    int(is_default),
                    int(enabled),
                    now,
                    now,
                ),
            )
            model_id = cur.lastrowid
        assert model_id is not None  # sqlite3 sets it after every INSERT
        record = self.get_by_id(model_id)
        assert record is not None
        log.info("embedding model added: %r", record)
        return record

    def update_model(
        self,
        model_id: int,
        *,
        is_default: bool | None = None,
        enabled: bool | None = None,
        config: Mapping[str, Any] | None = None,
        dimensions: int | None = None,
    ) -> ModelRecord:
        if dimensions is not None:
            check_dimensions(dimensions)
        now = now_iso()
        with self._write() as conn:
            row = conn.execute(
                "SELECT m.*, p.kind AS kind FROM models m JOIN providers p ON p.name = m.provider WHERE m.id = ?",
                (model_id,),
            ).fetchone()
            if row is None:
                raise self._no_model(model_id)
            will_default = bool(row["is_default"]) if is_default is None else bool(is_default)
            will_enable = bool(row["enabled"]) if enabled is None else bool(enabled)
            facts = {"model_id": model_id, "model_key": row["model_key"], "model_type": row["model_type"]}
            if row["is_default"] and is_default is False:
                raise RefusedError(
                    f"model {row['model_key']!r} (id {model_id}) is the default {row['model_type']} model: make "
                    "another model the default instead of clearing the flag (there must always be one).",
                    field="is_default",
                    reason="is_default",
                    value=is_default,
                    **facts,
                )
            if will_default and not will_enable:
                if row["is_default"]:  # disabling the default
                    raise RefusedError(
                        f"model {row['model_key']!r} (id {model_id}) cannot be both the default and disabled: "
                        "make another model the default first, then disable this one.",
                        field="enabled",
                        reason="is_default",
                        value=enabled,
                        **facts,
                    )
                raise RefusedError(  # making a disabled model the default
                    f"model {row['model_key']!r} (id {model_id}) cannot be both the default and disabled: "
                    "enable it too, in the same change or before.",
                    field="is_default",
                    reason="disabled",
                    value=is_default,
                    **facts,
                )
            sets: dict[str, Any] = {"updated_at": now}
            if config is not None:
                sets["config"] = json.dumps(check_config(config, row["kind"]))
            if dimensions is not None:
                sets["dimensions"] = dimensions
            if enabled is not None:
                sets["enabled"] = int(enabled)
            if is_default and not row["is_default"]:
                # Clear the old default first: the partial unique index allows only one.
                conn.execute(
                    "UPDATE models SET is_default = 0, updated_at = ? WHERE model_type = ? AND is_default = 1",
                    (now, row["model_type"]),
                )
                sets["is_default"] = 1
            assignments = ", ".join(f"{name} = ?" for name in sets)
            conn.execute(f"UPDATE models SET {assignments} WHERE id = ?", (*sets.values(), model_id))
        record = self.get_by_id(model_id)
        assert record is not None
        log.info("embedding model updated: %r", record)
        return record

    def remove_model(self, model_id: int) -> None:
        with self._write() as conn:
            row = conn.execute("SELECT model_key, is_default FROM models WHERE id = ?", (model_id,)).fetchone()
            if row is None:
                raise self._no_model(model_id)
            if row["is_default"]:
                raise RefusedError(
                    f"model {row['model_key']!r} (id {model_id}) is the default: make another model the "
                    "default before removing it.",
                    field="model_id",
                    reason="is_default",
                    value=model_id,
                    model_id=model_id,
                    model_key=row["model_key"],
                )
            conn.execute("DELETE FROM models WHERE id = ?", (model_id,))
        log.info("embedding model removed: id %s", model_id)


def _use_wal(conn: sqlite3.Connection, patience: float = 10.0) -> None:
    """Put the file in WAL mode (once per file). Changing the journal mode needs the database to
    itself, and SQLite answers "database is locked" at once, without the busy timeout, while another
    process sets up the same new file: retried here for as long as any other lock is waited for."""
    deadline = time.monotonic() + patience
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _add_local_model(
    conn: sqlite3.Connection,
    model_key: str,
    model_type: str,
    config: Mapping[str, Any],
    dimensions: int,
    *,
    is_default: bool,
    now: str,
) -> int | None:
    """Add a model of the local provider (creating the provider if needed) unless it exists:
    None when added, else the existing model's id. Callers hold a write transaction."""
    if conn.execute("SELECT 1 FROM providers WHERE name = ?", (DEFAULT_PROVIDER,)).fetchone() is None:
        conn.execute(
            "INSERT INTO providers (name, kind, created_at, updated_at) VALUES (?, 'local', ?, ?)",
            (DEFAULT_PROVIDER, now, now),
        )
    found = conn.execute(
        "SELECT id FROM models WHERE provider = ? AND model_key = ?", (DEFAULT_PROVIDER, model_key)
    ).fetchone()
    if found is not None:
        return int(found["id"])
    conn.execute(
        "INSERT INTO models (model_key, model_type, provider, config, dimensions, is_default, enabled, "
        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)",
        (model_key, model_type, DEFAULT_PROVIDER, json.dumps(dict(config)), dimensions, int(is_default), now, now),
    )
    return None

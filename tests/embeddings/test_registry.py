"""The model registry in SQLite: defaults, switching, validation, secrets."""

from __future__ import annotations

import json
import logging
import stat
import threading
from pathlib import Path

import pytest

from agentloom.core.errors import ConfigError, NotFoundError
from agentloom.embeddings import ModelRegistry

SECRET = "sk-live-very-secret-0123456789"


@pytest.fixture
def registry(tmp_path: Path) -> ModelRegistry:
    return ModelRegistry(tmp_path / "data" / "models.db")


def test_ensure_default_creates_one_local_default_and_is_idempotent(registry: ModelRegistry) -> None:
    first = registry.ensure_default()
    assert (first.key, first.provider, first.kind, first.dimensions) == ("all-MiniLM-L6-v2", "local", "local", 384)
    assert first.is_default and first.enabled
    again = registry.ensure_default()
    assert again.id == first.id
    assert [m.id for m in registry.list_models()] == [first.id]
    providers = registry.list_providers()
    assert [(p.name, p.kind) for p in providers] == [("local", "local")]
    assert registry.default() == first


def test_ensure_default_is_safe_under_concurrency(tmp_path: Path) -> None:
    path = tmp_path / "models.db"
    results = []
    barrier = threading.Barrier(6)

    def work() -> None:
        reg = ModelRegistry(path)  # one registry each, like separate processes
        barrier.wait()
        results.append(reg.ensure_default().id)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6  # every thread got an answer ("database is locked" once lost one)
    assert len(set(results)) == 1
    assert len(ModelRegistry(path).list_models()) == 1


def test_database_file_is_private_and_in_wal_mode(registry: ModelRegistry) -> None:
    registry.ensure_default()
    assert stat.S_IMODE(registry.path.stat().st_mode) == 0o600
    import sqlite3

    with sqlite3.connect(registry.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_switch_default_keeps_the_old_record(registry: ModelRegistry) -> None:
    a = registry.ensure_default()
    registry.upsert_provider("openai", "openai", base_url="https://api.example.com/v1/", api_key_env="OPENAI_API_KEY")
    b = registry.add_model(
        "text-embedding-3-small", "openai", dimensions=512, config={"apiEndpoint": "/embeddings", "timeout": 10}
    )
    assert not b.is_default and b.config == {"api_endpoint": "/embeddings", "timeout": 10}
    assert b.base_url == "https://api.example.com/v1"  # trailing slash trimmed
    b2 = registry.update_model(b.id, is_default=True)
    assert b2.is_default
    old = registry.get_by_id(a.id)
    assert old is not None and not old.is_default and old.enabled
    assert registry.default() == b2
    assert sum(m.is_default for m in registry.list_models()) == 1
    # ensure_default leaves an existing default alone.
    assert registry.ensure_default().id == b.id


def test_add_model_as_default_clears_the_previous_default(registry: ModelRegistry) -> None:
    a = registry.ensure_default()
    b = registry.add_model("other-local", "local", dimensions=384, config={"model_path": "/models/x"}, is_default=True)
    assert registry.default().id == b.id  # type: ignore[union-attr]  # registered just above
    assert not registry.get_by_id(a.id).is_default  # type: ignore[union-attr]  # registered just above


def test_remove_refuses_the_default_and_removes_others(registry: ModelRegistry) -> None:
    a = registry.ensure_default()
    b = registry.add_model("second", "local", dimensions=384)
    with pytest.raises(ConfigError, match="is the default.*make another model the default"):
        registry.remove_model(a.id)
    registry.remove_model(b.id)
    assert registry.get_by_id(b.id) is None
    with pytest.raises(NotFoundError, match="model id 9999 not found"):
        registry.remove_model(9999)


def test_default_can_be_neither_cleared_nor_disabled(registry: ModelRegistry) -> None:
    a = registry.ensure_default()
    with pytest.raises(ConfigError, match="make another model the default"):
        registry.update_model(a.id, is_default=False)
    with pytest.raises(ConfigError, match="both the default and disabled"):
        registry.update_model(a.id, enabled=False)
    b = registry.add_model("b", "local", dimensions=384, enabled=False)
    with pytest.raises(ConfigError, match="both the default and disabled"):
        registry.update_model(b.id, is_default=True)
    assert registry.update_model(b.id, is_default=True, enabled=True).is_default


def test_get_by_key_and_provider(registry: ModelRegistry) -> None:
    registry.ensure_default()
    registry.upsert_provider("ollama", "ollama")
    assert registry.get_provider("ollama").base_url == "http://127.0.0.1:11434"  # type: ignore[union-attr]  # registered just above
    m = registry.add_model("all-MiniLM-L6-v2", "ollama", dimensions=384)
    assert registry.get("all-MiniLM-L6-v2", provider="ollama").id == m.id  # type: ignore[union-attr]  # registered just above
    # Two providers share the key: the default wins when no provider is named.
    assert registry.get("all-MiniLM-L6-v2").provider == "local"  # type: ignore[union-attr]  # registered just above
    assert registry.get("nope") is None
    n = registry.add_model("nomic", "ollama", dimensions=768)
    registry.upsert_provider("ollama2", "ollama", base_url="http://10.0.0.2:11434")
    registry.add_model("nomic", "ollama2", dimensions=768)
    with pytest.raises(ConfigError, match="several providers.*name the provider"):
        registry.get("nomic")
    assert registry.get("nomic", provider="ollama").id == n.id  # type: ignore[union-attr]  # registered just above


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"dimensions": 0}, r"dimensions 0 is invalid.*between 1 and 16384"),
        ({"dimensions": True}, r"dimensions True is invalid"),
        (
            {"dimensions": 384, "config": {"timeout": 10000}},
            r"config\.timeout 10000 is invalid.*seconds.*did you mean 10\?",
        ),
        (
            {"dimensions": 384, "config": {"quantized": True}},
            r"config\.quantized is not an option.*allowed options are api_endpoint, send_dimensions, timeout",
        ),
        (
            {"dimensions": 384, "config": {"api_endpoint": "embeddings"}},
            r"config\.api_endpoint 'embeddings' is invalid.*starting with '/'",
        ),
        ({"dimensions": 384, "config": {"send_dimensions": "yes"}}, r"config\.send_dimensions must be true or false"),
    ],
)
def test_add_model_validation_names_field_and_fix(registry: ModelRegistry, kwargs: dict, pattern: str) -> None:
    registry.upsert_provider("api", "openai", base_url="https://api.example.com/v1")
    with pytest.raises(ConfigError, match=pattern):
        registry.add_model("m", "api", **kwargs)
    assert registry.list_models() == []  # nothing half-written


def test_add_model_errors(registry: ModelRegistry) -> None:
    registry.ensure_default()
    with pytest.raises(NotFoundError, match=r"provider 'missing' not found \(known: local\).*upsert_provider"):
        registry.add_model("m", "missing", dimensions=3)
    with pytest.raises(ConfigError, match="already exists for provider 'local'.*update_model"):
        registry.add_model("all-MiniLM-L6-v2", "local", dimensions=384)
    with pytest.raises(ConfigError, match="model_key is empty"):
        registry.add_model(" ", "local", dimensions=384)
    with pytest.raises(ConfigError, match=r"config\.max_tokens 9999 is invalid.*8 to 512"):
        registry.add_model("x", "local", dimensions=384, config={"max_tokens": 9999})
    with pytest.raises(ConfigError, match=r"config\.api_endpoint is not an option of a local model"):
        registry.add_model("x", "local", dimensions=384, config={"api_endpoint": "/e"})
    with pytest.raises(NotFoundError, match="model id 42 not found"):
        registry.update_model(42, enabled=True)


def test_provider_validation(registry: ModelRegistry) -> None:
    with pytest.raises(ConfigError, match="provider kind 'azure' is invalid: use one of local, openai, ollama"):
        registry.upsert_provider("x", "azure")
    with pytest.raises(ConfigError, match="base_url is missing for an openai provider"):
        registry.upsert_provider("x", "openai")
    with pytest.raises(ConfigError, match="base_url 'ftp://x' is invalid"):
        registry.upsert_provider("x", "openai", base_url="ftp://x")
    with pytest.raises(ConfigError, match="api_key_env 'sk-123' is invalid: give the NAME"):
        registry.upsert_provider("x", "openai", base_url="https://a.b", api_key_env="sk-123")
    with pytest.raises(ConfigError, match="base_url is set on a local provider"):
        registry.upsert_provider("x", "local", base_url="http://a")
    with pytest.raises(ConfigError, match="provider name 'bad name' is invalid"):
        registry.upsert_provider("bad name", "ollama")
    registry.ensure_default()
    with pytest.raises(ConfigError, match="its kind cannot change"):
        registry.upsert_provider("local", "ollama")
    assert registry.list_providers()[0].kind == "local"


def test_upsert_provider_updates_in_place(registry: ModelRegistry) -> None:
    p1 = registry.upsert_provider("api", "openai", base_url="https://a.example/v1", api_key=SECRET)
    p2 = registry.upsert_provider("api", "openai", base_url="https://b.example/v1", api_key_env="MY_KEY")
    assert p2.created_at == p1.created_at and p2.updated_at > p1.updated_at
    assert p2.base_url == "https://b.example/v1" and p2.api_key is None and p2.api_key_env == "MY_KEY"


def test_api_key_never_shown(
    registry: ModelRegistry, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = registry.upsert_provider("api", "openai", base_url="https://api.example.com/v1", api_key=SECRET)
    model = registry.add_model("text-embedding-3-small", "api", dimensions=512, is_default=True)
    registry.update_model(model.id, config={"timeout": 5})
    listed = registry.list_models()
    for text in (
        repr(provider),
        str(provider),
        repr(model),
        json.dumps(provider.as_dict()),
        json.dumps(model.as_dict()),
        json.dumps([m.as_dict() for m in listed]),
        repr(registry.list_providers()),
        caplog.text,
    ):
        assert SECRET not in text
    assert provider.as_dict()["api_key_set"] is True and "api_key" not in provider.as_dict()
    assert model.as_dict()["api_key_set"] is True and "api_key" not in model.as_dict()
    assert "'***'" in repr(provider)
    assert provider.resolve_api_key() == SECRET
    # A key taken from the environment is reported as set only when the variable is.
    env_provider = registry.upsert_provider("env", "openai", base_url="https://x.example", api_key_env="AGL_TEST_KEY")
    monkeypatch.delenv("AGL_TEST_KEY", raising=False)
    assert env_provider.api_key_set is False
    monkeypatch.setenv("AGL_TEST_KEY", SECRET)
    assert env_provider.api_key_set is True and SECRET not in repr(env_provider)


def test_on_change_called_after_each_write_only(tmp_path: Path) -> None:
    calls: list[int] = []
    reg = ModelRegistry(tmp_path / "m.db", on_change=lambda: calls.append(1))
    reg.ensure_default()
    n = len(calls)
    assert n >= 1
    reg.list_models()
    reg.default()
    assert len(calls) == n  # reads do not notify
    with pytest.raises(ConfigError):
        reg.add_model("x", "local", dimensions=-1)
    with pytest.raises(NotFoundError):
        reg.add_model("x", "nope", dimensions=3)
    assert len(calls) == n  # failed writes neither
    reg.add_model("x", "local", dimensions=3)
    assert len(calls) == n + 1

"""Settings given as environment variables arrive as text; lists and objects are parsed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.packs.vectors.conftest import vectors_host


def settings_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str):
    for key, value in env.items():
        monkeypatch.setenv(f"AGENTLOOM_VECTORS__{key}", value)
    host = vectors_host(tmp_path, file_roots=None)
    report = {r.name: r for r in host.reports}["vectors"]
    assert report.status != "failed", report.reason
    return host.packs["vectors"].state.store.settings


def test_headers_and_file_roots_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from_env(
        tmp_path,
        monkeypatch,
        HEADERS='{"Authorization": "Bearer t"}',
        FILE_ROOTS=os.pathsep.join(["/srv/docs", "~/notes"]),
    )
    assert settings.headers == {"Authorization": "Bearer t"}
    assert settings.file_roots == [Path("/srv/docs"), Path("~/notes").expanduser()]
    assert settings_from_env(tmp_path, monkeypatch, FILE_ROOTS='["/a", "/b c"]').file_roots == [
        Path("/a"),
        Path("/b c"),
    ]
    assert settings_from_env(tmp_path, monkeypatch, FILE_ROOTS="[]").file_roots == []

"""Fixtures: a project folder with a .knowledge/config.yaml, and a host with only the docs pack."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs


def write_config(root: Path, text: str) -> Path:
    path = root / ".knowledge" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def docs_host(project_dir: Path, data_dir: Path) -> Host:
    settings = Settings(data_dir=data_dir, packs=["docs"], pack_settings={"docs": {"project_dir": str(project_dir)}})
    return Host(settings, [ep for ep in discover_packs() if ep.name == "docs"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root

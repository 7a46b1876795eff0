"""Fixtures: skill folders on disk, a real LanceDB index and the real embedding models."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from agentloom.core.breakers import BreakerRegistry
from agentloom.core.settings import Settings
from agentloom.embeddings import EmbeddingService
from agentloom.packs.skills.settings import SkillSettings
from agentloom.packs.skills.store import SkillIndex
from tests.conftest import SHARED

BENCH_SKILLS = SHARED / "benchmarks" / "skills" / "skills"
SKILLS_EP = EntryPoint(name="skills", value="agentloom.packs.skills:pack", group="agentloom.packs")

# The seed's skills (seed 003: 检索相关Skills, 中文查询检索, 生成Skills向量).
SEED_SKILLS = {
    "git-commit": ("生成Git提交信息", ["git", "commit", "versioning"]),
    "file-read": ("读取文件", ["filesystem"]),
    "calculate": ("数学计算", []),
    "excel-analysis": ("读取Excel分析数据", []),
}


def write_skill(
    root: Path,
    name: str,
    description: str,
    tags: list[str] | None = None,
    body: str = "Do it.\n",
    folder: str | None = None,
) -> Path:
    path = root / (folder or name)
    path.mkdir(parents=True, exist_ok=True)
    meta = f'metadata:\n  tags: "{",".join(tags)}"\n' if tags else ""
    (path / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n{meta}---\n\n{body}", encoding="utf-8"
    )
    return path


def names(result: dict) -> list[str]:
    """The skill names of a search reply, in its order."""
    return [hit["name"] for hit in result["results"]]


def make_index(tmp_path: Path, roots: list[Path], **settings: object) -> SkillIndex:
    config = Settings(data_dir=tmp_path / "data")
    service = EmbeddingService(config, BreakerRegistry())
    return SkillIndex(tmp_path / "data" / "skills" / "skills.lance", roots, service, SkillSettings(**settings))


@pytest.fixture
def seed_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    for name, (description, tags) in SEED_SKILLS.items():
        write_skill(root, name, description, tags)
    return root


@pytest.fixture
def seed_index(tmp_path: Path, seed_root: Path) -> SkillIndex:
    index = make_index(tmp_path, [seed_root])
    index.scan()
    return index


@pytest.fixture
def bench_root(tmp_path: Path) -> Path:
    """A private copy of the 51 public skills (the scan writes .vectorized files)."""
    if not BENCH_SKILLS.is_dir():
        message = f"benchmark skills not found at {BENCH_SKILLS}: set AGENTLOOM_SHARED_DATA to the shared folder"
        if os.environ.get("CI") == "true":
            pytest.fail(message)  # CI runs every test
        pytest.skip(message)
    return Path(shutil.copytree(BENCH_SKILLS, tmp_path / "bench"))


@pytest.fixture
def caplog_debug(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG, logger="agentloom.packs.skills")
    yield caplog

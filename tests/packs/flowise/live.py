"""The real Flowise 3.1.2 for the flowise pack's tests and benchmarks.

``live_flowise`` runs the real Flowise 3.1.2 (``scripts/flowise-test-server.sh``) in its own process
group and bootstraps an API key the way a user without the UI would (``bootstrap_api_key``);
``flowise_home`` is where the script installs it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import REPO, free_port
from tests.packs.flowise.fake_flowise import VERSION

SCRIPT = REPO / "scripts" / "flowise-test-server.sh"

# What an API key needs for everything the pack does. /nodes, /nodes/<name> and /validation/<id> check
# no permission in 3.1.2 (any valid key passes); templates:marketplace guards /marketplaces/templates.
API_KEY_PERMISSIONS = [
    "chatflows:create",
    "chatflows:view",
    "chatflows:update",
    "chatflows:delete",
    "templates:marketplace",
    "credentials:view",
]
EMAIL = "agentloom-tests@example.com"
PASSWORD = "Agentloom-Test-1"


class FlowiseUnavailable(RuntimeError):
    """The real Flowise could not be started or bootstrapped."""


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def bootstrap_api_key(
    url: str,
    *,
    email: str = EMAIL,
    password: str = PASSWORD,
    key_name: str = "agentloom-tests",
    permissions: list[str] | None = None,
    timeout: float = 30,
) -> str:
    """An API key on a fresh Flowise 3.x without the UI: register, log in (cookies), create a key.

    The key answer is the workspace's list of keys; the bearer value is the new one's ``apiKey``.
    """
    with httpx.Client(base_url=f"{url}/api/v1", timeout=timeout) as client:
        reply = client.post(
            "/account/register", json={"user": {"name": "agentloom tests", "email": email, "credential": password}}
        )
        if reply.status_code >= 400 and "only have one organization" not in reply.text:
            raise FlowiseUnavailable(f"register: HTTP {reply.status_code} {reply.text[:300]}")
        reply = client.post("/auth/login", json={"email": email, "password": password})
        if reply.status_code != 200:
            raise FlowiseUnavailable(f"login: HTTP {reply.status_code} {reply.text[:300]}")
        reply = client.post(
            "/apikey",
            json={"keyName": key_name, "permissions": permissions or API_KEY_PERMISSIONS},
            headers={"x-request-from": "internal"},
        )
        if reply.status_code != 200:
            raise FlowiseUnavailable(f"apikey: HTTP {reply.status_code} {reply.text[:300]}")
        answer = reply.json()
        keys = answer if isinstance(answer, list) else answer.get("data", [answer])
        for key in keys:
            if key.get("keyName") == key_name and key.get("apiKey"):
                return str(key["apiKey"])
        raise FlowiseUnavailable(f"apikey: no key named {key_name} in {str(answer)[:300]}")


@contextmanager
def credential(url: str, name: str, kind: str, secrets: dict[str, str], timeout: float = 30) -> Iterator[str]:
    """A credential created as a user does in the UI (logged in, ``x-request-from: internal``), deleted on exit;
    yields its id. An API key cannot create credentials, and the pack never does: secrets stay with the user.
    """
    with httpx.Client(base_url=f"{url}/api/v1", timeout=timeout, headers={"x-request-from": "internal"}) as client:
        reply = client.post("/auth/login", json={"email": EMAIL, "password": PASSWORD})
        if reply.status_code != 200:
            raise FlowiseUnavailable(f"login: HTTP {reply.status_code} {reply.text[:300]}")
        reply = client.post("/credentials", json={"name": name, "credentialName": kind, "plainDataObj": secrets})
        if reply.status_code != 200:
            raise FlowiseUnavailable(f"credentials: HTTP {reply.status_code} {reply.text[:300]}")
        credential_id = str(reply.json()["id"])
        try:
            yield credential_id
        finally:
            client.delete(f"/credentials/{credential_id}").raise_for_status()


def flowise_home() -> Path:
    """Where scripts/flowise-test-server.sh installs Flowise (its FLOWISE_HOME)."""
    home = os.environ.get("FLOWISE_HOME")
    return Path(home) if home else Path.home() / ".cache" / "agentloom" / f"flowise-{VERSION}"


@contextmanager
def live_flowise(workdir: Path, timeout: float = 240, *, install: bool = False) -> Iterator[tuple[str, str]]:
    """A real Flowise 3.1.2 on a free port with its data under ``workdir``: yields (url, api_key).

    Runs ``scripts/flowise-test-server.sh start`` in its own process group (log: ``workdir/flowise.log``)
    and kills the group on exit. Raises ``FlowiseUnavailable`` with the log's tail when it does not come up,
    and at once when Flowise is not installed (``install=True`` lets the script install it first, which
    takes about 10 minutes: give a ``timeout`` to match).
    """
    if not install and not (flowise_home() / ".installed").is_file():
        raise FlowiseUnavailable(
            f"Flowise {VERSION} is not installed in {flowise_home()}: "
            "run scripts/flowise-test-server.sh install (about 10 min, 3 GB)"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = workdir / "flowise.log"
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                ["bash", str(SCRIPT), "start", str(workdir / "server"), str(port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=REPO,
            )
        except OSError as exc:
            raise FlowiseUnavailable(f"cannot run {SCRIPT}: {exc}") from exc
    try:
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while True:
            if proc.poll() is not None:
                raise FlowiseUnavailable(
                    f"Flowise exited with code {proc.returncode} before answering; "
                    f"last lines of {log_path}:\n{_tail(log_path)}"
                )
            try:
                if httpx.get(f"{url}/api/v1/ping", timeout=2).text == "pong":
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise FlowiseUnavailable(
                    f"Flowise did not answer /api/v1/ping within {timeout:.0f} s; "
                    f"last lines of {log_path}:\n{_tail(log_path)}"
                )
            time.sleep(0.5)
        with open(log_path, "a", encoding="utf-8") as log_text:
            log_text.write(f"\n[live_flowise] ready after {time.monotonic() - started:.1f} s\n")
        try:
            api_key = bootstrap_api_key(url)
        except (httpx.HTTPError, FlowiseUnavailable) as exc:
            raise FlowiseUnavailable(
                f"API key bootstrap failed: {exc}; last lines of {log_path}:\n{_tail(log_path)}"
            ) from exc
        yield url, api_key
    finally:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
    # children of node (none expected) that outlived it
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


__all__ = [
    "API_KEY_PERMISSIONS",
    "FlowiseUnavailable",
    "credential",
    "bootstrap_api_key",
    "flowise_home",
    "live_flowise",
]

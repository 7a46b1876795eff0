"""Fetching one git source with the system ``git``: the user's credential helpers and SSH keys
apply. Every failure becomes a :class:`SourceError` whose message says what to do.

git runs in a session of its own (no terminal to prompt on) with only the transports a
config may name (``GIT_ALLOW_PROTOCOL``); past ``AGENTIC_KNOWLEDGE_GIT_TIMEOUT`` seconds its
whole process group is killed, helpers such as ``git-remote-https`` and ``ssh`` included."""

from __future__ import annotations

import logging
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentloom.packs.docs.config import GitRepoSource
from agentloom.packs.docs.content.selection import (
    LinkedPath,
    MissingPath,
    Selection,
    explicit_select,
    smart_select,
)
from agentloom.packs.docs.urls import ACCEPTED, SCHEMES, url_problem

log = logging.getLogger("agentloom.packs.docs.content")
DEFAULT_GIT_TIMEOUT = 300.0
_PERCENT = re.compile(r"(Counting|Compressing|Receiving|Resolving) (?:objects|deltas):\s+(\d+)%")
_WEIGHT = {"Counting": (0.0, 0.05), "Compressing": (0.05, 0.1), "Receiving": (0.1, 0.85), "Resolving": (0.85, 0.95)}
# The transports a config URL may use (see urls.py); git refuses every other one, submodules included.
ALLOWED_PROTOCOLS = tuple(sorted(scheme.removesuffix("://") for scheme in SCHEMES))
# Variables that would point git at another repository than the one it is cloning or reading.
_REPOSITORY_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_COMMON_DIR",
)
_TLS_VERIFY = (
    "server certificate verification failed",
    "ssl certificate problem",
    "certificate verify failed",
    "unable to get local issuer certificate",
    "self signed certificate",
    "self-signed certificate",
    "certificate has expired",
    "no alternative certificate subject name",
    "certificate subject name",
    "the certificate is not trusted",
    "issuer is not trusted",
)
_TLS_OTHER = (
    "gnutls_handshake",
    "ssl_connect",
    "ssl routines",
    "tls connection",
    "wrong version number",
    "gnutls recv error",
    "ssl_error",
    "tls handshake",
    "openssl ssl_read",
)
GIT_MISSING = (
    "git is not installed (no `git` on PATH); web sources are fetched with the system git. Install it "
    "(Debian/Ubuntu: `sudo apt-get install git`, Fedora: `sudo dnf install git`, macOS: `xcode-select --install`), "
    "check that `git --version` works in this shell, then retry"
)

Report = Callable[[str, float | None], None]  # (phase, fraction)


class SourceError(Exception):
    """A source could not be loaded; the message is for the user."""


@dataclass(frozen=True)
class Fetched:
    folder: Path
    commit: str
    commit_time: float
    files: list[str]
    warning: str | None


def git_timeout() -> float:
    """``AGENTIC_KNOWLEDGE_GIT_TIMEOUT`` seconds (default 300), read when a loader is made."""
    raw = os.environ.get("AGENTIC_KNOWLEDGE_GIT_TIMEOUT", "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_GIT_TIMEOUT
    except ValueError:
        log.warning("AGENTIC_KNOWLEDGE_GIT_TIMEOUT=%r is not a number of seconds; using %g", raw, DEFAULT_GIT_TIMEOUT)
        return DEFAULT_GIT_TIMEOUT
    return value if value > 0 else DEFAULT_GIT_TIMEOUT


def _env() -> dict[str, str]:
    # No prompts (a missing credential fails instead of hanging); English messages to classify;
    # only the transports a config may name (a user's own narrower GIT_ALLOW_PROTOCOL is kept).
    env = {k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARIABLES}
    allowed = list(ALLOWED_PROTOCOLS)
    if env.get("GIT_ALLOW_PROTOCOL"):
        allowed = [p for p in allowed if p in env["GIT_ALLOW_PROTOCOL"].split(":")]
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANGUAGE="C", GIT_ALLOW_PROTOCOL=":".join(allowed) or "none")
    return env


def _git(*args: str) -> list[str]:
    return ["git", "-c", "protocol.ext.allow=never", *args]


class GitRepoLoader:
    """Clone one source into a folder and pick its documentation files."""

    def __init__(self, source: GitRepoSource, timeout: float | None = None) -> None:
        self.source = source
        self.timeout = timeout if timeout is not None else git_timeout()

    def fetch(self, folder: Path, report: Report | None = None) -> Fetched:
        self.clone(folder, report)
        commit, commit_time = self._head(folder)
        if report:
            report("selecting files", 0.96)
        selection = self.select(folder)
        warnings = []
        if not selection.files:
            warnings.append(
                f"no documentation files found in {self.source.url}; configure `paths:` for this source "
                "in .knowledge/config.yaml to say which files to take"
            )
        if selection.warning():
            warnings.append(f"{self.source.url}: {selection.warning()}")
        return Fetched(folder, commit, commit_time, selection.files, "\n".join(warnings) or None)

    def select(self, folder: Path) -> Selection:
        if self.source.paths:
            try:
                return explicit_select(folder, self.source.paths)
            except (MissingPath, LinkedPath) as exc:
                raise SourceError(f"{self.source.url}: {exc}") from None
        return smart_select(folder)

    def clone(self, folder: Path, report: Report | None = None) -> None:
        url = self.source.url
        problem = url_problem(url)
        if problem:
            raise SourceError(f"invalid repository URL: {problem}")
        args = ["clone", "--depth", "1", "--single-branch", "--no-tags", "--progress"]
        if self.source.branch:
            args += ["--branch", self.source.branch]
        command = _git(*args, "--", url, str(folder))
        log.debug("running %s", command)
        if report:
            report("connecting", 0.0)
        code, _, stderr = self._run(command, report)
        if code != 0:
            log.warning("git failed for %s (exit %d):\n%s", url, code, stderr)
            raise SourceError(self._explain(stderr))
        lower = stderr.lower()
        # git exits 0 for these, leaving nothing checked out
        if "cloned an empty repository" in lower or "remote head refers to nonexistent ref" in lower:
            raise SourceError(self._nothing_to_check_out())

    def _run(self, command: list[str], report: Report | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
        """Run git in a session of its own; (exit code, stdout, stderr without progress lines).

        Past the timeout the whole process group is killed: git and its helpers
        (``git-remote-https``, ``ssh``), which would otherwise live on and keep the pipes open."""
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_env(),
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise SourceError(GIT_MISSING) from None
        except OSError as exc:
            raise SourceError(
                f"git cannot be run ({exc.strerror or exc}); check that `git --version` works, then retry"
            ) from None
        deadline = time.monotonic() + self.timeout
        out, seen, buffer = bytearray(), list[str](), b""
        try:
            with selectors.DefaultSelector() as selector:
                assert proc.stdout is not None and proc.stderr is not None
                selector.register(proc.stdout, selectors.EVENT_READ)
                selector.register(proc.stderr, selectors.EVENT_READ)
                while selector.get_map():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise self._timed_out(proc)
                    for key, _ in selector.select(min(remaining, 0.5)):
                        chunk = os.read(key.fd, 65536)
                        if not chunk:
                            selector.unregister(key.fileobj)
                        elif key.fileobj is proc.stdout:
                            out += chunk
                        else:
                            buffer += chunk
                            *lines, buffer = re.split(rb"[\r\n]", buffer)
                            for raw in lines:
                                self._progress(raw.decode(errors="replace").strip(), seen, report)
            try:
                proc.wait(max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                raise self._timed_out(proc) from None
        finally:
            if proc.returncode is None:  # an interrupt or an error above: never leave git behind
                _kill_group(proc)
            for pipe in (proc.stdout, proc.stderr):  # both opened as pipes above
                if pipe is not None:
                    pipe.close()
        if buffer.strip():
            seen.append(buffer.decode(errors="replace").strip())
        return proc.returncode, out.decode(errors="replace"), "\n".join(seen)

    @staticmethod
    def _progress(line: str, seen: list[str], report: Report | None) -> None:
        if not line:
            return
        match = _PERCENT.search(line)
        if match is None:
            seen.append(line)
        elif report:
            start, end = _WEIGHT[match.group(1)]
            report(f"{match.group(1).lower()} objects", start + (end - start) * int(match.group(2)) / 100)

    def _timed_out(self, proc: subprocess.Popen[bytes]) -> SourceError:
        _kill_group(proc)
        return SourceError(
            f"{self.source.url}: git took longer than {self.timeout:g} s and was stopped; check your internet "
            "connection and retry, or raise AGENTIC_KNOWLEDGE_GIT_TIMEOUT (seconds)"
        )

    def branches(self) -> list[str] | None:
        """The remote's branches; None when they cannot be listed."""
        try:
            code, stdout, _ = self._run(_git("ls-remote", "--heads", "--", self.source.url))
        except SourceError:
            return None
        if code != 0:
            return None
        return sorted(line.split("refs/heads/", 1)[1] for line in stdout.splitlines() if "refs/heads/" in line)

    def _nothing_to_check_out(self) -> str:
        url, existing = self.source.url, self.branches()
        if existing == []:
            return (
                f"{url}: the repository is empty (it has no commits on any branch), so there is nothing to "
                "fetch; push a commit to it, or check the URL in .knowledge/config.yaml"
            )
        listed = ", ".join(existing) if existing else "(could not list them: run `git ls-remote --heads` on this URL)"
        return (
            f"{url}: the repository's default branch (its HEAD) does not exist, so there is nothing to check "
            f"out. Branches: {listed}; set `branch:` for this source in .knowledge/config.yaml"
        )

    def _explain(self, stderr: str) -> str:
        url, lower = self.source.url, stderr.lower()
        if any(s in lower for s in _TLS_VERIFY):
            detail = _line_with(stderr, _TLS_VERIFY)
            return (
                f"{url}: TLS certificate verification failed ({detail}). The server's certificate is not "
                "trusted on this machine: if the host is yours or your company's (a self-hosted server, a "
                "proxy that inspects TLS), install its CA certificate into the system store or point git to it "
                "with `git config --global http.sslCAInfo /path/to/ca.pem`; otherwise check the URL. "
                "Certificate checks are never switched off"
            )
        if any(s in lower for s in _TLS_OTHER):
            return (
                f"{url}: the TLS connection failed ({_line_with(stderr, _TLS_OTHER)}); check that the URL's "
                "host and port serve HTTPS and your proxy settings, then retry"
            )
        if self.source.branch and (
            "remote branch" in lower and "not found" in lower or "could not find remote branch" in lower
        ):
            existing = self.branches()
            if existing == []:
                return self._nothing_to_check_out()
            listed = ", ".join(existing) if existing else "(could not list them)"
            return (
                f"{url}: branch {self.source.branch!r} does not exist. Branches: "
                f"{listed}; fix `branch:` in .knowledge/config.yaml"
            )
        if "host key verification failed" in lower:
            return (
                f"{url}: the SSH host key of this server is not known yet. Connect once yourself "
                "(`ssh -T` to the host) to check and accept it, then retry"
            )
        if any(
            s in lower
            for s in (
                "authentication failed",
                "could not read username",
                "could not read password",
                "terminal prompts disabled",
                "permission denied (publickey",
                "access denied",
                "returned error: 401",
                "returned error: 403",
            )
        ):
            return (
                f"{url}: authentication failed. Check your git credentials (credential helper, SSH key or "
                "access token) by running `git ls-remote` on this URL yourself, then retry"
            )
        if any(
            s in lower
            for s in (
                "could not resolve host",
                "connection refused",
                "failed to connect",
                "timed out",
                "network is unreachable",
                "no route to host",
                "connection reset",
            )
        ):
            return f"{url}: the host cannot be reached. Check your internet connection (and proxy), then retry"
        if "transport" in lower and "not allowed" in lower:
            return (
                f"{url}: git refused this transport (allowed: GIT_ALLOW_PROTOCOL={_env()['GIT_ALLOW_PROTOCOL']}); "
                f"use {ACCEPTED}, or widen GIT_ALLOW_PROTOCOL in your environment"
            )
        if any(
            s in lower
            for s in (
                "does not appear to be a git repository",
                "repository not found",
                "not found",
                "returned error: 404",
                "does not exist",
            )
        ):
            return f"{url}: no repository at this URL. Check the URL in .knowledge/config.yaml ({ACCEPTED})"
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        return f"{url}: git clone failed: {last}"

    def _head(self, folder: Path) -> tuple[str, float]:
        code, stdout, stderr = self._run(_git("-C", str(folder), "log", "-1", "--format=%H %ct"))
        commit, _, stamp = stdout.strip().partition(" ")
        if code != 0 or not commit:
            # git's "fatal:" line says what is wrong; a line after it only explains (at a mount point: "Stopping at
            # filesystem boundary ...").
            lines = stderr.strip().splitlines() or ["no commit"]
            said = next((line for line in lines if line.startswith("fatal: ")), lines[-1])
            raise SourceError(
                f"{self.source.url}: the clone has no commit to read ({said}); check the repository and `branch:`"
            )
        return commit, float(stamp or time.time())


def _line_with(text: str, needles: tuple[str, ...]) -> str:
    for line in text.splitlines():
        if any(n in line.lower() for n in needles):
            return line.strip().removeprefix("fatal: ")
    return text.strip().splitlines()[-1]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill git and every helper it started (they share its process group), then reap git.
    Called before git is reaped, so the group id cannot have been reused."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()

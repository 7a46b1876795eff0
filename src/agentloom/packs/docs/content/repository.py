"""Fetching one git source with the system ``git``: the user's credential helpers and SSH keys
apply. Every failure becomes a :class:`SourceError` whose message says what to do."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentloom.packs.docs.config import GitRepoSource
from agentloom.packs.docs.content.selection import MissingPath, explicit_select, smart_select
from agentloom.packs.docs.urls import ACCEPTED, url_problem

log = logging.getLogger("agentloom.packs.docs.content")
GIT_TIMEOUT = float(os.environ.get("AGENTIC_KNOWLEDGE_GIT_TIMEOUT", "300"))
_PERCENT = re.compile(r"(Counting|Compressing|Receiving|Resolving) (?:objects|deltas):\s+(\d+)%")
_WEIGHT = {"Counting": (0.0, 0.05), "Compressing": (0.05, 0.1), "Receiving": (0.1, 0.85), "Resolving": (0.85, 0.95)}

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


def _env() -> dict[str, str]:
    # No prompts (a missing credential fails instead of hanging); English messages to classify.
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C"}


def _git(*args: str) -> list[str]:
    return ["git", "-c", "protocol.ext.allow=never", *args]


class GitRepoLoader:
    """Clone one source into a folder and pick its documentation files."""

    def __init__(self, source: GitRepoSource, timeout: float = GIT_TIMEOUT) -> None:
        self.source = source
        self.timeout = timeout

    def fetch(self, folder: Path, report: Report | None = None) -> Fetched:
        self.clone(folder, report)
        commit, commit_time = self._head(folder)
        if report:
            report("selecting files", 0.96)
        files = self.select(folder)
        warning = None
        if not files:
            warning = (
                f"no documentation files found in {self.source.url}; configure `paths:` for this source "
                "in .knowledge/config.yaml to say which files to take"
            )
        return Fetched(folder, commit, commit_time, files, warning)

    def select(self, folder: Path) -> list[str]:
        if self.source.paths:
            try:
                return explicit_select(folder, self.source.paths)
            except MissingPath as exc:
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
        stderr = self._run_with_progress(command, report)
        if stderr is not None:
            raise SourceError(self._explain(stderr))

    def _run_with_progress(self, command: list[str], report: Report | None) -> str | None:
        """Run git, turning its progress lines into fractions; the stderr text on failure."""
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
        assert proc.stderr is not None
        deadline = time.monotonic() + self.timeout
        seen: list[str] = []
        buffer = b""
        os.set_blocking(proc.stderr.fileno(), False)
        while True:
            chunk = proc.stderr.read(4096)
            if chunk:
                buffer += chunk
                *lines, buffer = re.split(rb"[\r\n]", buffer)
                for raw in lines:
                    line = raw.decode(errors="replace").strip()
                    if line:
                        seen.append(line)
                        match = _PERCENT.search(line)
                        if match and report:
                            start, end = _WEIGHT[match.group(1)]
                            report(f"{match.group(1).lower()} objects", start + (end - start) * int(match.group(2)) / 100)
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.02)
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise SourceError(
                    f"{self.source.url}: git took longer than {self.timeout:g} s; check your internet connection "
                    "and retry, or raise AGENTIC_KNOWLEDGE_GIT_TIMEOUT"
                )
        if buffer.strip():
            seen.append(buffer.decode(errors="replace").strip())
        if proc.returncode == 0:
            return None
        text = "\n".join(line for line in seen if not _PERCENT.search(line))
        log.warning("git failed for %s (exit %d):\n%s", self.source.url, proc.returncode, text)
        return text

    def branches(self) -> list[str]:
        try:
            done = subprocess.run(_git("ls-remote", "--heads", "--", self.source.url), capture_output=True, text=True,
                                  env=_env(), timeout=self.timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return []
        return sorted(line.split("refs/heads/", 1)[1] for line in done.stdout.splitlines() if "refs/heads/" in line)

    def _explain(self, stderr: str) -> str:
        url, lower = self.source.url, stderr.lower()
        if self.source.branch and ("remote branch" in lower and "not found" in lower or "could not find remote branch" in lower):
            existing = self.branches()
            return (f"{url}: branch {self.source.branch!r} does not exist. Branches: "
                    f"{', '.join(existing) or '(none)'}; fix `branch:` in .knowledge/config.yaml")
        if any(s in lower for s in ("authentication failed", "could not read username", "could not read password",
                                    "terminal prompts disabled", "permission denied (publickey", "access denied",
                                    "returned error: 401", "returned error: 403")):
            return (f"{url}: authentication failed. Check your git credentials (credential helper, SSH key or "
                    "access token) by running `git ls-remote` on this URL yourself, then retry")
        if any(s in lower for s in ("could not resolve host", "connection refused", "failed to connect", "timed out",
                                    "network is unreachable", "no route to host", "connection reset")):
            return f"{url}: the host cannot be reached. Check your internet connection (and proxy), then retry"
        if any(s in lower for s in ("does not appear to be a git repository", "repository not found", "not found",
                                    "returned error: 404", "does not exist")):
            return f"{url}: no repository at this URL. Check the URL in .knowledge/config.yaml ({ACCEPTED})"
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        return f"{url}: git clone failed: {last}"

    def _head(self, folder: Path) -> tuple[str, float]:
        done = subprocess.run(_git("-C", str(folder), "log", "-1", "--format=%H %ct"), capture_output=True, text=True, env=_env())
        commit, _, stamp = done.stdout.strip().partition(" ")
        return commit, float(stamp or time.time())

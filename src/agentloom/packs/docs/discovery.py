"""Finding ``.knowledge/config.yaml`` and keeping the loaded copy current.

The file is found from a start folder upward (no global fallback). Every call stats it
(about a microsecond) and reloads when it changed, so an edit is visible to the next call
without a restart or a watcher thread. Filesystem timestamps are coarse (a few ms), so a
file modified within the last two seconds is compared by content too ("racy" check, as git
does for its index).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from agentloom.core.errors import ConfigError
from agentloom.packs.docs.config import (
    CONFIG_NAME,
    KNOWLEDGE_DIR,
    Project,
    load_project,
    read_config_text,
)

RACY_SECONDS = 2.0


def find_config(start: Path) -> Path | None:
    """The nearest ``.knowledge/config.yaml`` at or above ``start``."""
    folder = start.absolute()
    for candidate in (folder, *folder.parents):
        path = candidate / KNOWLEDGE_DIR / CONFIG_NAME
        if path.is_file():
            return path
    return None


def not_found(start: Path) -> ConfigError:
    return ConfigError(
        f"no {KNOWLEDGE_DIR}/{CONFIG_NAME} found in {start.absolute()} or any folder above it. "
        f"Create {KNOWLEDGE_DIR}/{CONFIG_NAME} in your project root with a `docsets:` section "
        "(`agentic-knowledge new` writes a commented one to start from), or start the server from inside the project"
    )


class ConfigWatcher:
    """The current project configuration; reloads on change and remembers the last error."""

    def __init__(self, start: Path | None = None, *, config_path: Path | None = None) -> None:
        self.start = (start or Path.cwd()).absolute()
        self._fixed = config_path.absolute() if config_path else None
        self._path: Path | None = self._fixed
        self._stamp: tuple[int, int, int] | None = None
        self._text: str | None = None
        self._result: Project | ConfigError | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def searching(self) -> bool:
        """Whether the file is looked for from a start folder (not named explicitly)."""
        return self._fixed is None

    def current(self) -> Project:
        """The loaded project; raises ConfigError (not found, unreadable, invalid) with the fix."""
        result = self._check()
        if isinstance(result, ConfigError):
            raise result
        return result

    def _check(self) -> Project | ConfigError:
        path = self._path
        if path is not None:
            try:
                st = os.stat(path)
            except OSError:
                st = None
            if st is not None:
                stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
                racy = time.time() - st.st_mtime < RACY_SECONDS
                if stamp == self._stamp and not racy and self._result is not None:
                    return self._result
                return self._reload(path, stamp)
        with self._lock:
            found = self._fixed or find_config(self.start)
            if found is None or not found.exists():
                self._path, self._stamp, self._text = found, None, None
                self._result = (
                    not_found(self.start)
                    if self._fixed is None
                    else ConfigError(f"{self._fixed}: configuration file not found; create it or fix the path")
                )
                return self._result
            self._path = found
        return self._reload(found, None)

    def _reload(self, path: Path, stamp: tuple[int, int, int] | None) -> Project | ConfigError:
        with self._lock:
            try:
                text = read_config_text(path)
            except ConfigError as exc:
                self._result, self._stamp, self._text = exc, stamp, None
                return exc
            if text == self._text and self._result is not None:
                self._stamp = stamp
                return self._result
            try:
                result: Project | ConfigError = load_project(path, text)
            except ConfigError as exc:
                result = exc
            self._result, self._stamp, self._text = result, stamp, text
            return result

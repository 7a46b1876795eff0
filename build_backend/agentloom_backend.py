"""agentloom's build backend: setuptools' own, with the Stitch web console built first.

pyproject.toml names it (``[build-system] build-backend``, found through ``backend-path``). Before
a wheel or an editable install it makes sure ``src/agentloom/stitch/console_dist`` holds the built
console (console_build.py: ``npm ci``, ``tsc``, ``vite build``), so a wheel from a clone where
scripts/setup.sh never ran still carries it; where there is no Node.js to build it the build stops
and says what to install (``AGENTLOOM_SKIP_CONSOLE=1`` builds without it, and says so). An sdist
needs no Node: it carries the console's sources, and the built console when there is one.
"""

from __future__ import annotations

from typing import Any

import console_build
from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403  # every other hook, as setuptools has it

__all__ = build_meta.__all__


def _console() -> None:
    try:
        console_build.ensure_built()
    except console_build.ConsoleBuildError as error:
        # SystemExit prints just the message: the build's output ends with what to do, no traceback.
        message = f"\nagentloom: the Stitch web console cannot be built, so neither can this package.\n{error}\n"
        raise SystemExit(message) from None


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: str | None = None) -> str:
    _console()
    return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: str | None = None) -> str:
    _console()
    return build_meta.build_editable(wheel_directory, config_settings, metadata_directory)

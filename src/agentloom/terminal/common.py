"""Options shared by the subcommands (agentloom's and the packs'), and how they report errors.

Every error a command prints is for the person at the terminal: it names what they
wrote (an option such as ``--port``, an environment variable such as
``AGENTLOOM_PORT``, a key of the TOML file), the problem, and the fix, and never a
Python function, keyword argument or library. Exit codes: 1 when an operation is
refused or fails, 2 when the arguments or the configuration are wrong.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, Protocol, TypeVar

import typer

from agentloom.core.errors import AgentloomError, ConfigError
from agentloom.core.settings import CONFIG_FILE_ENV, Settings
from agentloom.core.timestamps import iso, parse
from agentloom.terminal.settings_errors import (
    config_file_name,
    describe,
    describe_unparsable,
)

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help="Data directory (default: AGENTLOOM_DATA_DIR, else ./.agentloom when it exists, else the user data "
        "directory; `agentloom doctor` shows which).",
    ),
]
PacksOpt = Annotated[
    str | None,
    typer.Option("--packs", metavar="NAMES", help="Comma-separated packs to enable (default: every installed pack)."),
]
DisableOpt = Annotated[
    str | None, typer.Option("--disable", metavar="NAMES", help="Comma-separated packs to leave out.")
]
ToolsOpt = Annotated[
    str | None,
    typer.Option(
        "--tools",
        metavar="NAMES",
        help="Comma-separated tools to list, names or globs such as 'vector_*' (default: all).",
    ),
]


def fail(message: str, fix: str | None = None, *, code: int = 1) -> NoReturn:
    """Print ``error: message`` (and ``  fix: ...``) to stderr and exit with ``code``."""
    echo_error(message, fix)
    raise typer.Exit(code)


def echo_error(message: str, fix: str | None = None) -> None:
    typer.echo(f"error: {message}", err=True)
    if fix:
        typer.echo(f"  fix: {fix}", err=True)


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment and config file, with CLI flags on top.

    A bad value is reported as one or two lines per problem, naming the setting as the
    user wrote it, and the command exits with code 2.
    """
    import tomllib

    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = [describe(error, given) for error in exc.errors(include_url=False)]
    except SettingsError as exc:
        problems = [describe_unparsable(exc)]
    except tomllib.TOMLDecodeError as exc:
        name = config_file_name()
        problems = [
            (
                f"the configuration file {name} is not valid TOML: {exc}.",
                f"correct {name} at that place, or "
                + (
                    f"point {CONFIG_FILE_ENV} at another file."
                    if os.environ.get(CONFIG_FILE_ENV)
                    else f"move it away (or set {CONFIG_FILE_ENV} to another file)."
                ),
            )
        ]
    except FileNotFoundError as exc:  # AGENTLOOM_CONFIG_FILE names a missing file
        problems = [(str(exc), None)]
    except OSError as exc:
        name = config_file_name()
        problems = [
            (
                f"cannot read the configuration file {name}: {exc.strerror or exc}.",
                f"make {name} readable, or "
                + (f"unset {CONFIG_FILE_ENV}." if os.environ.get(CONFIG_FILE_ENV) else "move it away."),
            )
        ]
    for message, fix in problems:
        echo_error(message, fix)
    raise typer.Exit(2)


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``--json`` output: every moment in the one timestamp format (``2026-11-23T11:32:00.123Z``),
    datetimes and ``*_at`` fields that stores wrote in other ISO 8601 forms alike."""
    return json.dumps(_moments(value), indent=indent, default=_default)


def _moments(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _moment(v) if isinstance(k, str) and k.endswith("_at") else _moments(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_moments(v) for v in value]
    return value


def _moment(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, str) and value:
        try:
            return iso(parse(value))
        except ValueError:
            return value
    return _moments(value)


def _default(value: Any) -> Any:
    return iso(value) if isinstance(value, datetime) else str(value)


# -- pack commands -------------------------------------------------------------------------
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]


class Opens(Protocol[T_co]):
    """A pack, as a command sees it (``agentloom.server.packs.Pack``): it opens its state from settings."""

    def open(self, settings: Settings) -> T_co: ...


def open_pack(pack: Opens[T], data_dir: Path | None) -> T:
    """A pack's state for a command, made by the pack's setup as a server makes it (``Pack.open``), from the
    settings with ``--data-dir`` on top; a bad value in the pack's settings exits 2 naming the variable."""
    settings = load_settings(data_dir=data_dir)
    try:
        return pack.open(settings)
    except ConfigError as exc:
        fail(str(exc), code=2)


def checked(call: Callable[[], T]) -> T:
    """A step's result; an AgentloomError exits with 1."""
    try:
        return call()
    except AgentloomError as exc:
        fail(str(exc))


def answer(call: Callable[[], T], as_json: bool) -> T | None:
    """A command's result, or None once it is printed as JSON; an AgentloomError exits with 1."""
    result = checked(call)
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return None
    return result

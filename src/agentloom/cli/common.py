"""Options shared by the subcommands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from agentloom.core.settings import Settings

DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Data directory (default ./.agentloom, or AGENTLOOM_DATA_DIR).")
]
PacksOpt = Annotated[
    str | None, typer.Option("--packs", help="Comma-separated packs to enable (default: every installed pack).")
]
DisableOpt = Annotated[str | None, typer.Option("--disable", help="Comma-separated packs to leave out.")]


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment and config file, with CLI flags on top."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except Exception as exc:  # pydantic's message names the field; keep it, drop the traceback
        typer.echo(f"error: invalid configuration: {exc}", err=True)
        raise typer.Exit(2) from None

"""The ``agentloom`` command: one CLI over the same core the MCP server uses."""

from __future__ import annotations

import typer

from agentloom.cli.doctor import doctor, packs
from agentloom.cli.models import models_app
from agentloom.cli.serve import serve
from agentloom.cli.stitch import stitch_app
from agentloom.packs.docs.cli import app as docs_app

app = typer.Typer(
    name="agentloom",
    help="Real tools for AI agents over MCP, and the engine that runs their workflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(serve)
app.command()(doctor)
app.command()(packs)
app.add_typer(models_app, name="models")
app.add_typer(stitch_app, name="stitch")
app.add_typer(docs_app, name="docs", help="Documentation sets: init, refresh, status (same as agentic-knowledge).")


def main() -> None:
    app()

"""The ``agentloom`` command: one CLI over the same core the MCP server uses.

The core commands live here; each installed pack that declares ``cli="module:app"`` adds
its typer app as ``agentloom <pack> ...``, found through the same entry points the
server uses, so this module imports no pack's CLI by name (and none at all for a core
command such as ``serve``).
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points
from typing import Annotated

import typer

from agentloom.cli.doctor import doctor, packs
from agentloom.cli.models import models_app
from agentloom.cli.serve import serve
from agentloom.terminal.help import SuggestingGroup

log = logging.getLogger(__name__)

app = typer.Typer(
    name="agentloom",
    cls=SuggestingGroup,
    help="Real tools for AI agents over MCP, and the engine that runs their workflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from agentloom import __version__

        typer.echo(f"agentloom {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    pass


app.command()(serve)
app.command()(doctor)
app.command()(packs)
app.add_typer(models_app, name="models")
CORE_COMMANDS = {"serve", "doctor", "packs", "models"}


def add_pack_commands(root: typer.Typer, only: str | None = None) -> list[str]:
    """Add each pack's commands (``only``: just the pack whose entry point has that name); the names added."""
    from agentloom.server.host import ENTRY_POINT_GROUP
    from agentloom.server.packs import Pack

    added: list[str] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if only is not None and ep.name != only:
            continue
        try:
            pack = ep.load()
            if not isinstance(pack, Pack) or pack.cli is None or (only is not None and pack.name != only):
                continue
            if pack.name in CORE_COMMANDS:
                raise ValueError(f"the name {pack.name!r} is taken by a core command")
            module, _, attribute = pack.cli.partition(":")
            sub = getattr(importlib.import_module(module), attribute)
        except Exception as exc:  # a broken pack must not take the whole command line down
            log.debug("pack %s: its commands are left out (%s: %s)", ep.name, type(exc).__name__, exc)
            continue
        root.add_typer(sub, name=pack.name, help=sub.info.help or pack.description)
        added.append(pack.name)
    return added


def main() -> None:
    import sys

    # `agentloom serve` is what MCP clients launch, and start-up time counts there: the
    # packs' command lines are imported only when the command could be one of them.
    if sys.argv[1:2] and (sys.argv[1] in CORE_COMMANDS or sys.argv[1] == "--version"):
        app()
        return
    # `agentloom skills search ...` needs the skills pack alone: the others' imports cost ~0.2 s a call.
    # Anything else (help, a mistyped name, a pack named unlike its entry point) gets every pack.
    wanted = sys.argv[1] if sys.argv[1:2] and not sys.argv[1].startswith("-") else None
    if wanted is None or not add_pack_commands(app, only=wanted):
        add_pack_commands(app)
    app()

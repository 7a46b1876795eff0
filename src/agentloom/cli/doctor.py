"""``agentloom doctor`` and ``agentloom packs``: what works, what does not, and why."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from agentloom.terminal.common import DataDir, DisableOpt, PacksOpt, load_settings
from agentloom.terminal.progress import Quiet, with_progress

if TYPE_CHECKING:
    from rich.console import Console

    from agentloom.server.host import Host


def _host(packs: str | None, disable: str | None, data_dir: object) -> Host:
    from agentloom.core.logs import configure_logging, stdout_to_stderr
    from agentloom.server.host import Host

    settings = load_settings(packs=packs, disabled_packs=disable, data_dir=data_dir)
    configure_logging("WARNING" if settings.log_level == "INFO" else settings.log_level)
    with stdout_to_stderr():  # a pack printing while it loads must not spoil --json output
        return Host(settings)


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    packs: PacksOpt = None,
    disable: DisableOpt = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
) -> None:
    """Check dependencies, the data directory, the embedding model, packs and stores.

    Exits 1 when something required is broken.
    """
    from rich.console import Console
    from rich.table import Table

    from agentloom.core.work import current

    host = _host(packs, disable, data_dir)
    console = Console(stderr=False)
    # The first run builds the embedding model: its steps show on the progress bar.
    report = with_progress("checking", lambda: host.health(progress=current().note), quiet=quiet)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        from rich.markup import escape  # details hold text like `pip install 'agentloom[vectors]'`

        table = Table("check", "", "detail", title=f"agentloom doctor: {report['status']}")
        checks = report["checks"]
        assert isinstance(checks, list)  # Host.health lists them as dicts
        for check in checks:
            mark = "[green]ok[/]" if check["ok"] else ("[red]FAIL[/]" if check["required"] else "[yellow]warn[/]")
            table.add_row(escape(check["name"]), mark, escape(check["detail"]))
        console.print(table)
        _print_packs(console, report["packs"])  # type: ignore[arg-type]  # Host.health lists the packs as PackReport dicts
    if report["status"] == "error":
        raise typer.Exit(1)


def packs(
    packs: PacksOpt = None,
    disable: DisableOpt = None,
    data_dir: DataDir = None,
) -> None:
    """List installed packs, whether each loaded, and its tools."""
    from rich.console import Console

    host = _host(packs, disable, data_dir)
    _print_packs(Console(), [r.as_dict() for r in host.reports])


def _print_packs(console: Console, reports: list[dict[str, object]]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table("pack", "status", "tools / reason", title="packs")
    for r in reports:
        detail = ", ".join(r["tools"]) if r["status"] == "loaded" else str(r["reason"])  # type: ignore[arg-type]  # a PackReport dict: tools is a list of names
        table.add_row(escape(str(r["name"])), str(r["status"]), escape(detail))
    console.print(table)

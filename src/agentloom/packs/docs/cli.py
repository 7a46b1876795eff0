"""``agentic-knowledge`` (also ``agentloom docs``): download and refresh docsets' web sources.

The CLI only chooses docsets and shows results; what is fetched, filtered and copied is
decided by the content loader alone (REQ-19). Exit codes: 0 everything succeeded,
1 a source failed, 2 the configuration or the arguments are wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentloom.core.errors import AgentloomError

if TYPE_CHECKING:
    from agentloom.packs.docs.config import Docset, Project
    from agentloom.packs.docs.content import DocsetResult

app = typer.Typer(
    name="agentic-knowledge",
    help="Manage the documentation sets of .knowledge/config.yaml: download web sources, refresh, status.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DocsetArg = Annotated[str, typer.Argument(help="Docset name or alias from .knowledge/config.yaml.")]
ProjectOpt = Annotated[
    Path | None,
    typer.Option("--project-dir", "-C", help="Search for .knowledge/config.yaml from here upward (default: .)."),
]


def _project(project_dir: Path | None) -> Project:
    from agentloom.packs.docs.discovery import ConfigWatcher

    try:
        return ConfigWatcher(project_dir).current()
    except AgentloomError as exc:
        raise _usage_error(str(exc)) from None


def _usage_error(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _docset(project: Project, name: str) -> Docset:
    from agentloom.packs.docs.names import name_problem

    problem = name_problem(name)
    if problem:
        raise _usage_error(f"docset: {problem}")
    docset = project.get(name)
    if docset is None:
        raise _usage_error(
            f"no docset is called {name!r} in {project.config_path}. Available docsets: {project.available()}"
        )
    return docset


def _console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=False, highlight=False)


def _fetch(project: Project, docsets: list[Docset]) -> list[DocsetResult]:
    """Load every docset's web sources with a progress bar per source; never stops at a failure."""
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    from agentloom.packs.docs.content import load_docset

    results = []
    with Progress(
        TextColumn("{task.fields[label]}"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=_console(),
        transient=False,
    ) as bars:
        for docset in docsets:
            tasks: dict[str, TaskID] = {}

            def progress(source: str, phase: str, fraction: float | None, _name: str = docset.name,
                         tasks: dict[str, TaskID] = tasks) -> None:
                task = tasks.get(source)
                if task is None:
                    task = tasks[source] = bars.add_task(phase, total=1.0, label=f"{_name}: {source}")
                bars.update(task, description=phase, completed=fraction if fraction is not None else None)

            result = load_docset(project, docset, progress=progress)
            for task in tasks.values():
                bars.update(task, completed=1.0)
            results.append(result)
    return results


def _report(results: list[DocsetResult]) -> bool:
    from rich.markup import escape  # messages quote repository and metadata text: never read it as markup

    console = _console()
    ok = True
    for result in results:
        name = escape(result.docset)
        for source in result.sources:
            url = escape(source.url)
            if source.ok:
                change = "updated" if source.changed else "unchanged"
                console.print(f"[green]✓[/] {name}: {url}: {len(source.files)} files ({change}) in {escape(str(result.path))}")
                for line in (source.warning or "").splitlines():
                    console.print(f"  [yellow]warning:[/] {escape(line)}")
            else:
                ok = False
                console.print(f"[red]✗[/] {name}: {url}: {escape(source.error or '')}")
        for line in result.warnings:  # refused metadata entries, files kept instead of deleted
            console.print(f"[yellow]warning:[/] {name}: {escape(line)}")
    return ok


@app.command()
def init(docset: DocsetArg, project_dir: ProjectOpt = None) -> None:
    """Download a docset's web sources into its folder (a local docset gets its folder created)."""
    project = _project(project_dir)
    chosen = _docset(project, docset)
    if not chosen.web_sources:
        chosen.path.mkdir(parents=True, exist_ok=True)
        _console().print(f"{chosen.name} has no web_sources; put its files in {chosen.local_path}")
        return
    if not _report(_fetch(project, [chosen])):
        raise typer.Exit(1)


@app.command()
def refresh(
    docset: Annotated[str | None, typer.Argument(help="Refresh only this docset (default: every docset with web_sources).")] = None,
    project_dir: ProjectOpt = None,
) -> None:
    """Fetch web sources again; files are rewritten only when their content changed."""
    project = _project(project_dir)
    if docset is not None:
        chosen = [_docset(project, docset)]
        if not chosen[0].web_sources:
            raise _usage_error(f"{chosen[0].name} has no web_sources to refresh; its files live in {chosen[0].local_path}")
    else:
        chosen = [d for d in project.docsets if d.web_sources]
        if not chosen:
            _console().print(f"no docset in {project.config_path} has web_sources; nothing to refresh")
            return
    if not _report(_fetch(project, chosen)):
        raise typer.Exit(1)


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    project_dir: ProjectOpt = None,
) -> None:
    """Show each docset's folder and, per web source, when it was last fetched."""
    from agentloom.packs.docs.content import docset_status

    project = _project(project_dir)
    rows = []
    for docset in project.docsets:
        sources = docset_status(docset) if docset.web_sources else []
        rows.append(
            {
                "docset": docset.name,
                "version": docset.version,
                "local_path": docset.local_path,
                "exists": docset.path.is_dir(),
                "sources": [
                    {
                        "url": s.url,
                        "last_fetched": s.last_fetched,
                        "files": s.file_count,
                        "commit": s.commit,
                        "content_hash": s.content_hash,
                        "error": s.error,
                    }
                    for s in sources
                ],
            }
        )
    if as_json:
        typer.echo(json.dumps({"config": project.config_path.as_posix(), "docsets": rows}, indent=2))
        return
    from rich.table import Table

    table = Table("docset", "version", "source", "last fetched", "files", "state", title=str(project.config_path))
    for row in rows:
        version = row["version"] or ""
        if not row["sources"]:
            table.add_row(row["docset"], version, f"local: {row['local_path']}", "", "", "present" if row["exists"] else "missing")
        for s in row["sources"]:
            state = f"[red]failed: {s['error']}[/]" if s["error"] else ("ok" if s["last_fetched"] else "not fetched: run init")
            table.add_row(row["docset"], version, s["url"], s["last_fetched"] or "never", str(s["files"]), state)
    _console().print(table)


def main() -> None:
    from agentloom.core.logs import configure_logging

    configure_logging("WARNING")
    app()

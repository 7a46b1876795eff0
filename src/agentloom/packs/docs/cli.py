"""``agentic-knowledge`` (also ``agentloom docs``): start a configuration, download and refresh
docsets' web sources, show their state.

The CLI only chooses docsets and shows results; what is fetched, filtered and copied is
decided by the content loader alone. Exit codes: 0 everything succeeded,
1 a source failed or ``new`` refused to replace a file, 2 the configuration or the arguments
are wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypedDict

import typer

from agentloom.core.errors import AgentloomError
from agentloom.terminal.help import SuggestingGroup

if TYPE_CHECKING:
    from rich.console import Console

    from agentloom.packs.docs.config import Docset, Project
    from agentloom.packs.docs.content import DocsetResult
    from agentloom.packs.docs.discovery import ConfigWatcher

app = typer.Typer(
    name="agentic-knowledge",
    cls=SuggestingGroup,
    help="Manage the documentation sets of .knowledge/config.yaml: start one (new), download web sources "
    "(init), refresh them, show their status.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ProjectOpt = Annotated[
    Path | None,
    typer.Option(
        "--project-dir",
        "-C",
        metavar="DIR",
        help="Search for .knowledge/config.yaml from here upward (default: AGENTLOOM_DOCS__PROJECT_DIR, else .).",
    ),
]


def _watcher(project_dir: Path | None) -> ConfigWatcher:
    """The configuration from --project-dir upward, else the one the MCP server watches: the docs pack's own
    state, made from its settings (AGENTLOOM_DOCS__PROJECT_DIR and AGENTLOOM_DOCS__CONFIG_FILE, or
    [pack_settings.docs] in agentloom.toml), else from the working directory upward."""
    from agentloom.packs.docs.discovery import ConfigWatcher

    if project_dir is not None:
        return ConfigWatcher(project_dir)
    from agentloom.packs.docs.tools import pack
    from agentloom.terminal.common import open_pack

    return open_pack(pack, None).watcher


def _project(project_dir: Path | None) -> Project:
    try:
        return _watcher(project_dir).current()
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


def _console() -> Console:
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

            def progress(
                source: str,
                phase: str,
                fraction: float | None,
                _name: str = docset.name,
                tasks: dict[str, TaskID] = tasks,
            ) -> None:
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
    from rich.markup import (
        escape,  # messages quote repository and metadata text: never read it as markup
    )

    console = _console()
    ok = True
    for result in results:
        name = escape(result.docset)
        for source in result.sources:
            url = escape(source.url)
            if source.ok:
                change = "updated" if source.changed else "unchanged"
                console.print(
                    f"[green]✓[/] {name}: {url}: {len(source.files)} files ({change}) in {escape(str(result.path))}"
                )
                for line in (source.warning or "").splitlines():
                    console.print(f"  [yellow]warning:[/] {escape(line)}")
            else:
                ok = False
                console.print(f"[red]✗[/] {name}: {url}: {escape(source.error or '')}")
        for line in result.warnings:  # refused metadata entries, files kept instead of deleted
            console.print(f"[yellow]warning:[/] {name}: {escape(line)}")
    return ok


def _command(ctx: typer.Context) -> str:
    """How the user called this program: ``agentic-knowledge`` or ``agentloom docs``."""
    parent = ctx.parent
    return parent.command_path if parent is not None and parent.command_path else "agentic-knowledge"


def _write_starter(ctx: typer.Context, project_dir: Path | None) -> None:
    from agentloom.packs.docs.discovery import find_config
    from agentloom.packs.docs.starter import config_path, write_starter

    root = _watcher(project_dir).start
    command = _command(ctx)
    if not root.is_dir():
        given = "--project-dir" if project_dir is not None else "AGENTLOOM_DOCS__PROJECT_DIR"
        raise _usage_error(f"{given}: {root} is not a folder; create it first or name another one")
    target = config_path(root)
    if target.exists() or target.is_symlink():
        typer.echo(
            f"error: {target} already exists; `new` never replaces it. Edit it (docsets go under `docsets:`), "
            f"or move it away and run `{command} new` again",
            err=True,
        )
        raise typer.Exit(1)
    above = find_config(root.parent) if root.parent != root else None
    try:
        starter = write_starter(root)
    except FileExistsError:
        typer.echo(f"error: {target} appeared while it was being written; `new` never replaces it", err=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(
            f"error: cannot write {target}: {exc.strerror or exc}; check that this user may write there", err=True
        )
        raise typer.Exit(1) from None
    here = "" if root == Path.cwd().absolute() else f" -C {_shell_word(str(root))}"
    local = "the project folder" if starter.local_path == "./" else starter.local_path
    lines = [
        f"wrote {starter.path}",
        f"  with the docset {starter.docset!r} ({local}) and commented examples of every setting.",
    ]
    if above is not None:
        lines.append(f"  In {root} and below it takes the place of {above}.")
    steps = [
        (f"{command} status{here}", "see the docsets and their folders"),
        (f"edit {_shell_word(str(starter.path))}", "add docsets: uncomment an example and change it"),
        (f"{command} init NAME{here}", "download a docset's web_sources, once it has some"),
        ("agentic-knowledge-mcp", "what an MCP client starts in this project (or `agentloom serve`, every pack)"),
    ]
    width = max(len(step) for step, _ in steps)
    lines += ["next:", *(f"  {step.ljust(width)}  {why}" for step, why in steps)]
    typer.echo("\n".join(lines))


def _shell_word(text: str) -> str:
    import shlex

    return shlex.quote(text)


@app.command()
def new(
    ctx: typer.Context,
    project_dir: Annotated[
        Path | None,
        typer.Option(
            "--project-dir",
            "-C",
            metavar="DIR",
            help="The project folder to write .knowledge/config.yaml in "
            "(default: AGENTLOOM_DOCS__PROJECT_DIR, else .).",
        ),
    ] = None,
) -> None:
    """Write a commented starter .knowledge/config.yaml: one docset for this project's own docs (its docs/ folder, else the project folder) and commented examples of the other kinds. Never replaces an existing file."""  # noqa: E501 - one paragraph in --help
    _write_starter(ctx, project_dir)


@app.command()
def init(
    ctx: typer.Context,
    docset: Annotated[
        str | None,
        typer.Argument(
            help="Docset name or alias from .knowledge/config.yaml. Leave it out in a project without "
            "a configuration to write the starter one (as `new` does)."
        ),
    ] = None,
    project_dir: ProjectOpt = None,
) -> None:
    """Download a docset's web sources into its folder (a local docset gets its folder created). Without DOCSET, in a project with no .knowledge/config.yaml yet (here or above), write the commented starter one, as `new` does.

    Without DOCSET in a project that has a configuration, list the docsets to choose from."""  # noqa: E501 - paragraphs in --help
    if docset is None:
        from agentloom.packs.docs.discovery import find_config

        watcher = _watcher(project_dir)
        found = find_config(watcher.start) if watcher.searching else watcher.path
        if found is None:
            _write_starter(ctx, project_dir)
            return
        project = _project(project_dir)
        raise _usage_error(
            f"name the docset to download, for example `{_command(ctx)} init NAME`. Docsets in "
            f"{project.config_path}: {project.available()}. `{_command(ctx)} refresh` downloads every docset "
            "with web_sources"
        )
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
    docset: Annotated[
        str | None, typer.Argument(help="Refresh only this docset (default: every docset with web_sources).")
    ] = None,
    project_dir: ProjectOpt = None,
) -> None:
    """Fetch web sources again; files are rewritten only when their content changed."""
    project = _project(project_dir)
    if docset is not None:
        chosen = [_docset(project, docset)]
        if not chosen[0].web_sources:
            raise _usage_error(
                f"{chosen[0].name} has no web_sources to refresh; its files live in {chosen[0].local_path}"
            )
    else:
        chosen = [d for d in project.docsets if d.web_sources]
        if not chosen:
            _console().print(f"no docset in {project.config_path} has web_sources; nothing to refresh")
            return
    if not _report(_fetch(project, chosen)):
        raise typer.Exit(1)


class SourceRow(TypedDict):
    url: str
    last_fetched: str | None
    files: int
    commit: str | None
    content_hash: str | None
    error: str | None


class DocsetRow(TypedDict):
    """One docset in ``status --json`` (and the table): its folder and each web source's last fetch."""

    docset: str
    version: str | None
    local_path: str | None
    exists: bool
    sources: list[SourceRow]


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    project_dir: ProjectOpt = None,
) -> None:
    """Show each docset's folder and, per web source, when it was last fetched."""
    from agentloom.packs.docs.content import docset_status

    project = _project(project_dir)
    rows: list[DocsetRow] = []
    fetched = False  # any time to show: its column is then never cut short
    for docset in project.docsets:
        sources = docset_status(docset) if docset.web_sources else []
        fetched = fetched or any(s.last_fetched for s in sources)
        rows.append(
            DocsetRow(
                docset=docset.name,
                version=docset.version,
                local_path=docset.local_path,
                exists=docset.path.is_dir(),
                sources=[
                    SourceRow(
                        url=s.url,
                        last_fetched=s.last_fetched,
                        files=s.file_count,
                        commit=s.commit,
                        content_hash=s.content_hash,
                        error=s.error,
                    )
                    for s in sources
                ],
            )
        )
    if as_json:
        typer.echo(json.dumps({"config": project.config_path.as_posix(), "docsets": rows}, indent=2))
        return
    from rich.table import Column, Table

    stamp = Column("last fetched", no_wrap=True, min_width=len("2026-11-23T11:32:00.123Z") if fetched else None)
    table = Table("docset", "version", "source", stamp, "files", "state", title=str(project.config_path))
    for row in rows:
        version = row["version"] or ""
        if not row["sources"]:
            table.add_row(
                row["docset"], version, f"local: {row['local_path']}", "", "", "present" if row["exists"] else "missing"
            )
        for s in row["sources"]:
            state = (
                f"[red]failed: {s['error']}[/]"
                if s["error"]
                else ("ok" if s["last_fetched"] else "not fetched: run init")
            )
            table.add_row(row["docset"], version, s["url"], s["last_fetched"] or "never", str(s["files"]), state)
    _console().print(table)


def main() -> None:
    from agentloom.core.logs import configure_logging

    configure_logging("WARNING")
    app()

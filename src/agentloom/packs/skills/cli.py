"""`agentloom skills index|search|list|status`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentloom.cli.common import DataDir, fail, load_settings
from agentloom.core.errors import AgentloomError, ConfigError
from agentloom.server.packs import pack_config

if TYPE_CHECKING:
    from agentloom.packs.skills.store import SkillIndex

app = typer.Typer(help="Agent Skills search: index skill folders into LanceDB and find the right one.", no_args_is_help=True)

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _index(data_dir: Path | None) -> SkillIndex:
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.embeddings import EmbeddingService
    from agentloom.packs.skills.settings import SkillSettings, default_roots
    from agentloom.packs.skills.store import SkillIndex

    settings = load_settings(data_dir=data_dir)
    try:
        skill_settings = pack_config(settings, "skills", SkillSettings)
    except ConfigError as exc:
        fail(str(exc), code=2)
    folder = settings.data_dir / "skills"
    folder.mkdir(parents=True, exist_ok=True)
    roots = skill_settings.roots if skill_settings.roots is not None else default_roots(folder)
    return SkillIndex(folder / "skills.lance", [Path(r).expanduser() for r in roots], EmbeddingService(settings, BreakerRegistry()), skill_settings)


def _answer(call: Callable[[], dict[str, Any]], as_json: bool) -> dict[str, Any] | None:
    """The command's result, or None once it is printed as JSON; an AgentloomError exits with 1."""
    try:
        result = call()
    except AgentloomError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return None
    return result


@app.command("index")
def index_cmd(
    path: Annotated[Path | None, typer.Argument(help="One skill folder or folder of skills (default: every root).")] = None,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """Index the skill roots (or one folder), with a progress bar."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    index = _index(data_dir)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True, disable=as_json) as bar:
        task = bar.add_task("indexing skills", total=None)

        def progress(done: int, total: int, message: str) -> None:
            bar.update(task, completed=done, total=total, description=f"indexing skills ({message})")

        result = _answer(lambda: index.scan(path, progress), as_json)
    if result is None:
        return
    typer.echo(
        f"{result['added']} added, {result['updated']} updated, {result['unchanged']} unchanged, "
        f"{result['removed']} removed, {len(result['skipped'])} skipped; {result['total']} skills "
        f"(model {result['model']}, {result['seconds']:.2f} s)"
    )
    for item in result["skipped"]:
        typer.echo(f"  skipped {item['path']}: {item['reason']}")


@app.command("search")
def search_cmd(
    query: Annotated[str, typer.Argument(help="What you want to do, in any language.")],
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many skills.")] = 5,
    threshold: Annotated[float | None, typer.Option("--threshold", help="Cosine cut-off (default: the model's).")] = None,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """Search the indexed skills."""
    result = _answer(lambda: _index(data_dir).search(query, limit, threshold), as_json)
    if result is None:
        return
    for hit in result["results"]:
        typer.echo(f"{hit['score']:.3f}  {hit['name']}  {hit['description']}")
    if result["message"]:
        typer.echo(result["message"], err=True)


@app.command("list")
def list_cmd(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Every indexed skill."""
    result = _answer(lambda: _index(data_dir).list(), as_json)
    if result is None:
        return
    for skill in result["skills"]:
        typer.echo(f"{skill['name']}: {skill['description']}")


@app.command("status")
def status_cmd(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """The store, its model, the roots and the number of skills."""
    result = _answer(lambda: _index(data_dir).status(), as_json)
    if result is None:
        return
    typer.echo(f"store: {result['path']}")
    typer.echo(f"skills: {result['skills']}")
    typer.echo(f"model: {result['model']} (in use: {result['model_in_use']}, default threshold {result['default_threshold']:g})")
    typer.echo(f"rank model: {result['rank_model'] or '-'} ({result['rank_model_state']})")
    typer.echo("roots: " + ", ".join(result["roots"]))

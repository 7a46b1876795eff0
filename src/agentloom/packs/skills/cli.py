"""`agentloom skills index|search|list|status`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentloom.terminal.common import AsJson, DataDir, answer, open_pack
from agentloom.terminal.help import SuggestingGroup
from agentloom.terminal.progress import Quiet, with_progress

if TYPE_CHECKING:
    from agentloom.packs.skills.store import SkillIndex

app = typer.Typer(
    cls=SuggestingGroup,
    help="Agent Skills search: index skill folders into LanceDB and find the right one.",
    no_args_is_help=True,
)


def _index(data_dir: Path | None) -> SkillIndex:
    from agentloom.packs.skills import pack

    return open_pack(pack, data_dir)


@app.command("index")
def index_cmd(
    path: Annotated[
        Path | None, typer.Argument(help="One skill folder or folder of skills (default: every root).")
    ] = None,
    data_dir: DataDir = None,
    as_json: AsJson = False,
    quiet: Quiet = False,
) -> None:
    """Index the skill roots (or one folder), with a progress bar; Ctrl-C stops it, keeping what was indexed."""
    from agentloom.core.work import current_step

    index = _index(data_dir)
    result = answer(
        lambda: with_progress("indexing skills", lambda: index.scan(path, current_step), quiet=quiet or as_json),
        as_json,
    )
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
    threshold: Annotated[float | None, typer.Option("--threshold", help="Score cut-off, 0 to 1 (default 0.5).")] = None,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """Search the indexed skills."""
    result = answer(lambda: _index(data_dir).search(query, limit, threshold), as_json)
    if result is None:
        return
    for hit in result["results"]:
        typer.echo(f"{hit['score']:.3f}  {hit['name']}  {hit['description']}")
    if result["message"]:
        typer.echo(result["message"], err=True)


@app.command("list")
def list_cmd(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Every indexed skill."""
    result = answer(lambda: _index(data_dir).list(), as_json)
    if result is None:
        return
    for skill in result["skills"]:
        typer.echo(f"{skill['name']}: {skill['description']}")


@app.command("status")
def status_cmd(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """The store, its model, the roots and the number of skills."""
    result = answer(lambda: _index(data_dir).status(), as_json)
    if result is None:
        return
    typer.echo(f"store: {result['path']}")
    typer.echo(f"skills: {result['skills']}")
    typer.echo(
        f"model: {result['model']} (in use: {result['model_in_use']}, "
        f"default threshold {result['default_threshold']:g})"
    )
    typer.echo(f"rank model: {result['rank_model'] or '-'} ({result['rank_model_state']})")
    typer.echo(f"English model: {result['english_model'] or '-'} ({result['english_model_state']})")
    typer.echo("roots: " + ", ".join(result["roots"]))

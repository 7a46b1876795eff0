"""`agentloom flowise data ...`: the pack's ChromaDB for the person who owns it.

Deleting what the pack has learnt is never automatic and never an agent's call: these
commands are the only way to it. Each one that deletes first prints what it will delete (the
count and up to ten records), then asks; ``--yes`` skips the question, ``--dry-run`` only shows,
and "no" (or no answer at all, e.g. stdin closed) deletes nothing. Exit codes follow
``agentloom.terminal.common``: 2 for a wrong option, 1 when the operation fails or is declined.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from agentloom.core.errors import AgentloomError
from agentloom.packs.flowise.tools import pack
from agentloom.terminal.common import AsJson, DataDir, answer, checked, fail, open_pack
from agentloom.terminal.help import SuggestingGroup

if TYPE_CHECKING:
    from agentloom.packs.flowise.data import Item
    from agentloom.packs.flowise.tools import Flowise

T = TypeVar("T")
SHOWN = 10

app = typer.Typer(
    cls=SuggestingGroup,
    help="Inspect and clean what the Flowise pack keeps in its ChromaDB (catalog, designs, sessions); "
    "every delete shows its selection and asks first.",
    no_args_is_help=True,
)

Yes = Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Only show what would be deleted; delete nothing.")]
AGE_HELP = "An age: 12h, 30d, 2w, 6m (months of 30 days) or 1y."


def _state(data_dir: Path | None) -> Flowise:
    return open_pack(pack, data_dir)


def _option(call: Callable[[], T]) -> T:
    """Check an option's value: a wrong one exits 2 with the message naming it."""
    try:
        return call()
    except AgentloomError as exc:
        fail(str(exc), code=2)


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} B"
    return f"{n / 1000:.1f} kB" if n < 1_000_000 else f"{n / 1_000_000:.1f} MB"


def _confirm(items: list[Item], what: str, yes: bool, dry_run: bool) -> bool:
    """Show the selection; True when it is to be deleted. A refusal exits 1 having deleted nothing."""
    if not items:
        typer.echo(f"nothing to delete: no {what}.")
        return False
    per: dict[str, int] = {}
    for item in items:
        per[item.collection] = per.get(item.collection, 0) + 1
    typer.echo(f"{len(items)} record(s) {what} ({', '.join(f'{n} in {c}' for c, n in per.items())}):")
    for item in items[:SHOWN]:
        typer.echo(f"  {item.preview}")
    if len(items) > SHOWN:
        typer.echo(f"  ... and {len(items) - SHOWN} more")
    if dry_run:
        typer.echo("dry run: nothing deleted.")
        return False
    if yes:
        return True
    try:
        agreed = typer.confirm(f"Delete these {len(items)} record(s)?", default=False)
    except typer.Abort:
        fail(
            "no answer at the prompt; nothing deleted.",
            "pass --yes to delete without asking, or --dry-run to only look.",
        )
    if not agreed:
        typer.echo("nothing deleted.")
        raise typer.Exit(1)
    return True


def _delete(state: Flowise, items: list[Item], what: str, yes: bool, dry_run: bool) -> None:
    from agentloom.packs.flowise import data

    if _confirm(items, what, yes, dry_run):
        deleted = checked(lambda: data.delete_items(state, items))
        typer.echo(f"deleted {deleted} record(s).")


@app.command("stats")
def stats_cmd(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Per collection: count, size on disk, oldest and newest entry (catalog collections have no dates)."""
    from agentloom.packs.flowise import data

    state = _state(data_dir)
    result = answer(lambda: {"collections": data.stats(state)}, as_json)
    if result is None:
        return
    typer.echo(f"{'collection':<18}{'count':>7}{'size':>11}  {'oldest':<26}newest")
    for row in result["collections"]:
        typer.echo(
            f"{row['collection']:<18}{row['count']:>7}{_size(row['bytes']):>11}  "
            f"{row['oldest'] or '-':<26}{row['newest'] or '-'}"
        )


@app.command("prune")
def prune_cmd(
    older_than: Annotated[
        str, typer.Option("--older-than", metavar="AGE", help=f"Delete records older than this. {AGE_HELP}")
    ],
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection",
            metavar="NAME",
            help="Only this one: sdd_artifacts, failed_artifacts or sessions (default: all three).",
        ),
    ] = None,
    yes: Yes = False,
    dry_run: DryRun = False,
    data_dir: DataDir = None,
) -> None:
    """Delete stored designs, failures and sessions older than an age."""
    from agentloom.packs.flowise import data
    from agentloom.packs.flowise.learning import COLLECTIONS

    seconds = _option(lambda: data.parse_age(older_than))
    names = COLLECTIONS if collection is None else (_option(lambda: data.check_collection(collection)),)
    state = _state(data_dir)
    items = checked(lambda: data.older_than(state, seconds, names))
    _delete(state, items, f"older than {older_than}", yes, dry_run)


@app.command("prune-failed")
def prune_failed_cmd(
    pattern: Annotated[
        str | None,
        typer.Option(
            "--pattern",
            metavar="REGEX",
            help="Only failures whose reason or request matches this regular expression, case-insensitive, "
            "anywhere in the text (a plain word matches as a substring). Default: every failure.",
        ),
    ] = None,
    yes: Yes = False,
    dry_run: DryRun = False,
    data_dir: DataDir = None,
) -> None:
    """Delete failed designs (failed_artifacts), all or those matching --pattern."""
    from agentloom.packs.flowise import data

    if pattern is not None:
        _option(lambda: data.pattern_regex(pattern))
    state = _state(data_dir)
    items = checked(lambda: data.failed_matching(state, pattern))
    _delete(state, items, "of failed designs" + (f" matching {pattern!r}" if pattern else ""), yes, dry_run)


@app.command("sessions-clear")
def sessions_clear_cmd(
    older_than: Annotated[
        str | None, typer.Option("--older-than", metavar="AGE", help=f"Sessions older than this. {AGE_HELP}")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", metavar="OUTCOME", help="Sessions with this outcome: created, reused, rejected or failed."
        ),
    ] = None,
    yes: Yes = False,
    dry_run: DryRun = False,
    data_dir: DataDir = None,
) -> None:
    """Delete build sessions older than an age or with an outcome (both given: sessions matching both)."""
    from agentloom.packs.flowise import data
    from agentloom.packs.flowise.learning import OUTCOMES

    if older_than is None and status is None:
        fail("give --older-than or --status.", f"e.g. --older-than 30d, or --status {'|'.join(OUTCOMES)}.", code=2)
    if status is not None and status not in OUTCOMES:
        fail(f"--status {status!r} is not a session outcome.", f"use one of {', '.join(OUTCOMES)}.", code=2)
    seconds = None if older_than is None else _option(lambda: data.parse_age(older_than))
    state = _state(data_dir)
    items = checked(lambda: data.sessions_matching(state, seconds, status))
    what = " and ".join(
        p for p in (older_than and f"older than {older_than}", status and f"with outcome {status}") if p
    )
    _delete(state, items, f"of sessions {what}", yes, dry_run)


@app.command("seed")
def seed_cmd(
    nodes: Annotated[int, typer.Option("--nodes", min=0, help="Sample nodes to add to the catalog.")] = 0,
    templates: Annotated[int, typer.Option("--templates", min=0, help="Sample templates to add to the catalog.")] = 0,
    artifacts: Annotated[
        int,
        typer.Option(
            "--artifacts", min=0, help="Sample designs to store (one in five failed), each with its sessions."
        ),
    ] = 0,
    data_dir: DataDir = None,
) -> None:
    """Fill the collections with realistic samples for testing: nodes and templates in the catalog (a refresh
    from Flowise drops them), designs and sessions in the learning store (dated over the last year)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentloom.packs.flowise import data

    if not (nodes or templates or artifacts):
        fail("nothing to seed.", "give --nodes N, --templates M and/or --artifacts K (counts above 0).", code=2)
    state = _state(data_dir)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    ) as bar:
        task = bar.add_task("seeding samples", total=nodes + templates + artifacts)

        def progress(done: int, total: int, message: str) -> None:
            bar.update(task, completed=done, total=total, description=message)

        checked(lambda: data.seed(state, nodes, templates, artifacts, progress))
    typer.echo(f"added {nodes} node(s), {templates} template(s), {artifacts} design(s) with their sessions.")


@app.command("reset")
def reset_cmd(
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection",
            metavar="NAME",
            help="Only this one: nodes, templates, sdd_artifacts, failed_artifacts or sessions (default: all five).",
        ),
    ] = None,
    yes: Yes = False,
    dry_run: DryRun = False,
    data_dir: DataDir = None,
) -> None:
    """Empty collections (all five by default); emptying nodes or templates makes the next search refresh
    the catalog from Flowise."""
    from agentloom.packs.flowise import data

    if collection is not None:
        _option(lambda: data.check_collection(collection, data.ALL))
    state = _state(data_dir)
    items = checked(lambda: data.everything(state, collection))
    if _confirm(items, f"in {collection or 'all five collections'}", yes, dry_run):
        counts = checked(lambda: data.reset(state, collection, items))
        typer.echo(
            f"deleted {sum(counts.values())} record(s): "
            + ", ".join(f"{n} from {c}" for c, n in counts.items() if n)
            + "."
        )

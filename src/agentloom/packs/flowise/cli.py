"""`agentloom flowise refresh|status|search`: the catalog from a terminal."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentloom.packs.flowise.cli_checks import check_cmd, checklist_app
from agentloom.packs.flowise.cli_data import app as data_app
from agentloom.packs.flowise.tools import pack
from agentloom.terminal.common import AsJson, DataDir, answer, open_pack
from agentloom.terminal.help import SuggestingGroup
from agentloom.terminal.progress import Quiet, with_progress

if TYPE_CHECKING:
    from agentloom.packs.flowise.tools import Flowise

app = typer.Typer(
    cls=SuggestingGroup, help="Flowise chatflow builder: its node catalog and templates.", no_args_is_help=True
)


def _state(data_dir: Path | None) -> Flowise:
    return open_pack(pack, data_dir)


@app.command("refresh")
def refresh_cmd(
    force: Annotated[bool, typer.Option("--force", help="Refresh even when the catalog is younger than 24 h.")] = False,
    data_dir: DataDir = None,
    as_json: AsJson = False,
    quiet: Quiet = False,
) -> None:
    """Fetch the node catalog and templates from Flowise and index what changed, with a progress bar (Ctrl-C
    stops it; catalog.json stays as it was, so the next refresh does the work again)."""
    from agentloom.core.work import current_step

    state = _state(data_dir)
    result = answer(
        lambda: with_progress(
            "refreshing the Flowise catalog", lambda: state.catalog.refresh(force, current_step), quiet=quiet or as_json
        ),
        as_json,
    )
    if result is None:
        return
    if result["skipped_fresh"]:
        typer.echo(f"catalog is fresh (refreshed {result['refreshed_at']}); --force refreshes anyway")
    typer.echo(
        f"{result['new']} new, {result['updated']} updated, {result['removed']} removed, "
        f"{result['newly_deprecated']} newly deprecated; {result['nodes']} nodes ({result['deprecated']} deprecated), "
        f"{result['templates']} templates; Flowise {result['server_version']}"
    )
    if result["message"]:
        typer.echo(result["message"], err=True)


@app.command("status")
def status_cmd(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """The server, and the cached catalog's size and age."""
    state = _state(data_dir)

    def status() -> dict[str, Any]:
        catalog = state.catalog.state()
        age = state.catalog.age_seconds()
        return {
            "url": state.settings.url,
            "api_key_set": state.settings.api_key is not None,
            "nodes": len(catalog.nodes),
            "templates": len(catalog.templates),
            "catalog_age_hours": None if age is None else round(age / 3600, 2),
            "server_version": catalog.server_version,
            "model": catalog.model,
        }

    result = answer(status, as_json)
    if result is None:
        return
    typer.echo(f"Flowise: {result['url']} (API key {'set' if result['api_key_set'] else 'not set'})")
    age = "never refreshed" if result["catalog_age_hours"] is None else f"{result['catalog_age_hours']} h old"
    typer.echo(f"catalog: {result['nodes']} nodes, {result['templates']} templates, {age}, model {result['model']}")


@app.command("search")
def search_cmd(
    query: Annotated[str, typer.Argument(help="What the node or template should do.")],
    category: Annotated[str | None, typer.Option("--category", help="Only nodes of this category.")] = None,
    templates: Annotated[bool, typer.Option("--templates", help="Search templates instead of nodes.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many results.")] = 5,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """Search the cached catalog (refresh first if it is empty)."""
    state = _state(data_dir)

    def search() -> list[dict[str, Any]]:
        if state.catalog.state().refreshed_at is None:
            state.catalog.refresh()
        if templates:
            return [
                {"template_id": t.template_id, "name": t.name, "score": round(s, 3), "nodes": t.nodes}
                for t, s in state.catalog.search_templates(query, limit)
            ]
        return state.catalog.search_nodes(query, category, limit)

    result = answer(search, as_json)
    if result is None:
        return
    if not result:  # never silence: say that nothing matched (exit 0; with --json the list is empty)
        what = "templates" if templates else "nodes"
        typer.echo(f"no {what} match {query!r}; rephrase, or list them with a broader request", err=True)
        return
    for hit in result:
        if templates:
            typer.echo(f"{hit['score']:.3f}  {hit['template_id']}  {', '.join(hit['nodes'])}")
        else:
            flag = "  (deprecated)" if hit.get("deprecated") else ""
            typer.echo(f"{hit['score']:.3f}  {hit['name']}  {hit['label']} [{hit['category']}]{flag}")


@app.command("credentials")
def credentials_cmd(
    kind: Annotated[str | None, typer.Option("--kind", help="Only this kind, such as openAIApi.")] = None,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """The credentials in Flowise that chatflows can use: name, kind and id, never a secret (the API key
    needs the credentials view permission)."""
    from agentloom.packs.flowise.run_tools import credential_lines

    state = _state(data_dir)
    result = answer(lambda: credential_lines(state, kind), as_json)
    if result is None:
        return
    if not result:
        typer.echo(f"no {kind + ' ' if kind else ''}credential in Flowise yet: add one there (Credentials)", err=True)
        return
    for line in result:
        typer.echo(f"{line['kind']}  {line['name']}  {line['id']}")


app.add_typer(data_app, name="data")
app.add_typer(checklist_app, name="checklist")
app.command("check")(check_cmd)

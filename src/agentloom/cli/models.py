"""``agentloom models``: the embedding model registry (SQLite) and model preparation."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import typer

from agentloom.cli.common import DataDir, load_settings

models_app = typer.Typer(help="Embedding models: list, add, switch the default, prepare.", no_args_is_help=True)


def _service(data_dir: object):  # type: ignore[no-untyped-def]
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.logs import configure_logging
    from agentloom.embeddings import EmbeddingService

    settings = load_settings(data_dir=data_dir)
    configure_logging("WARNING")
    return EmbeddingService(settings, BreakerRegistry())


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(1)


@models_app.command("list")
def list_models(
    as_json: Annotated[bool, typer.Option("--json")] = False, data_dir: DataDir = None
) -> None:
    """Show every configured embedding model; the default is marked with *."""
    from rich.console import Console
    from rich.table import Table

    service = _service(data_dir)
    service.registry.ensure_default()
    rows = [m.as_dict() for m in service.registry.list_models()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    table = Table("", "id", "model", "provider", "dims", "enabled")
    for m in rows:
        table.add_row("*" if m["is_default"] else "", str(m["id"]), str(m["model_key"]), str(m["provider"]),
                      str(m["dimensions"]), "yes" if m["enabled"] else "no")
    Console().print(table)


@models_app.command("add")
def add_model(
    model_key: Annotated[str, typer.Argument(help="Model name as the provider knows it, e.g. text-embedding-3-small.")],
    provider: Annotated[str, typer.Option(help="Provider name (created when --kind is given).")],
    dimensions: Annotated[int, typer.Option(help="Vector size the model returns.")],
    kind: Annotated[Literal["local", "openai", "ollama"] | None, typer.Option(help="Provider kind.")] = None,
    base_url: Annotated[str | None, typer.Option(help="Provider base URL, e.g. https://api.openai.com/v1.")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the API key (kept out of the database).")
    ] = None,
    model_path: Annotated[str | None, typer.Option(help="Local model folder (sentence-transformers layout).")] = None,
    timeout: Annotated[float | None, typer.Option(help="Request timeout in seconds (API providers).")] = None,
    default: Annotated[bool, typer.Option("--default", help="Make it the default model.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Register a model (and its provider with --kind)."""
    service = _service(data_dir)
    config: dict[str, object] = {}
    if model_path:
        config["model_path"] = model_path
    if timeout:
        config["timeout"] = timeout
    try:
        if kind:
            service.registry.upsert_provider(provider, kind, base_url=base_url, api_key_env=api_key_env)
        record = service.registry.add_model(model_key, provider, dimensions=dimensions, config=config,
                                            is_default=default)
    except Exception as exc:
        raise _fail(exc) from None
    typer.echo(f"added model {record.key} (id {record.id}){' as default' if record.is_default else ''}")


def _set(model_id: int, data_dir: object, **change: bool) -> None:
    service = _service(data_dir)
    try:
        record = service.registry.update_model(model_id, **change)
    except Exception as exc:
        raise _fail(exc) from None
    typer.echo(json.dumps(record.as_dict(), default=str))


@models_app.command("set-default")
def set_default(model_id: Annotated[int, typer.Argument(help="Model id from `models list`.")],
                data_dir: DataDir = None) -> None:
    """Make a model the default; running servers pick it up within 5 minutes, the old one stays."""
    _set(model_id, data_dir, is_default=True)


@models_app.command("enable")
def enable(model_id: int, data_dir: DataDir = None) -> None:
    """Enable a model."""
    _set(model_id, data_dir, enabled=True)


@models_app.command("disable")
def disable(model_id: int, data_dir: DataDir = None) -> None:
    """Disable a model (the default cannot be disabled)."""
    _set(model_id, data_dir, enabled=False)


@models_app.command("remove")
def remove(model_id: int, data_dir: DataDir = None) -> None:
    """Delete a model record (not the default)."""
    service = _service(data_dir)
    try:
        service.registry.remove_model(model_id)
    except Exception as exc:
        raise _fail(exc) from None
    typer.echo(f"removed model {model_id}")


@models_app.command("prepare")
def prepare(
    model_key: Annotated[str | None, typer.Argument(help="Model to prepare (default: the default model).")] = None,
    data_dir: DataDir = None,
) -> None:
    """Make the model ready to use (exports the local model to ONNX once) and embed a test word."""
    from rich.console import Console

    service = _service(data_dir)
    console = Console(stderr=True)
    with console.status("Preparing the embedding model...") as status:
        try:
            record = service.prepare(model_key, progress=lambda message: status.update(message))
            service.embed_query("ready")
        except Exception as exc:
            raise _fail(exc) from None
    console.print(f"[green]ready[/]: {record.key} ({record.dimensions} dimensions)")

"""``agentloom models``: the embedding model registry (SQLite) and model preparation.

The registry raises typed errors that name its own arguments (``dimensions``,
``base_url``, ``model_id``...); this module turns each into a message in command-line
terms (``--dimensions``, ``--base-url``, ``ID``) with the command that fixes it. Exit
codes: 2 when an argument is wrong, 1 when the registry refuses the change or a thing
does not exist.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from agentloom.cli.model_terms import KINDS, LIST, PROVIDER_KINDS
from agentloom.terminal.common import DataDir, fail, json_text, load_settings
from agentloom.terminal.help import SuggestingGroup

if TYPE_CHECKING:
    from agentloom.embeddings import EmbeddingService

# The registry is imported inside the commands: `agentloom serve` starts without it.
models_app = typer.Typer(
    cls=SuggestingGroup, help="Embedding models: list, add, switch the default, prepare.", no_args_is_help=True
)


def _service(data_dir: object) -> EmbeddingService:
    from agentloom.core.logs import configure_logging
    from agentloom.server.services import Services

    settings = load_settings(data_dir=data_dir)
    configure_logging("WARNING")
    return Services(settings).embeddings  # as a server or a pack's command builds it


# -- arguments --------------------------------------------------------------------------------
def _model_id(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a model id: give the number in the id column of {LIST}.") from None
    if number < 1:
        raise typer.BadParameter(f"{value} is not a model id: ids are the numbers (1 and up) shown by {LIST}.")
    return number


def _dimensions(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not a whole number: give the length of the vectors the model returns, e.g. 384."
        ) from None


def _timeout(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a number of seconds, e.g. 30.") from None


def _kind(value: str) -> str:
    if value not in PROVIDER_KINDS:
        raise typer.BadParameter(f"{value!r} is not a provider kind: use one of {', '.join(PROVIDER_KINDS)}.")
    return value


ModelId = Annotated[int, typer.Argument(metavar="ID", parser=_model_id, help=f"Model id from {LIST}.")]


# -- registry errors in command-line terms ------------------------------------------------------
def _refuse(exc: Exception, **ctx: Any) -> NoReturn:
    """Print a failed registry call in command-line terms and exit (2: bad argument, 1: refused)."""
    from agentloom.embeddings.records import RegistryError

    if isinstance(exc, RegistryError):
        from agentloom.cli.model_errors import explain

        message, fix, code = explain(exc, ctx)
        fail(message, fix, code=code)
    if isinstance(exc, sqlite3.Error | OSError):
        fail(
            f"cannot use the model registry in the data directory: {exc}.",
            "check that --data-dir (or AGENTLOOM_DATA_DIR) is a folder you can write to, and that no other "
            "program holds models.db locked.",
            code=1,
        )
    fail(str(exc) or type(exc).__name__, code=1)


# -- commands ---------------------------------------------------------------------------------
@models_app.command("list")
def list_models(
    as_json: Annotated[bool, typer.Option("--json", help="Print the models as JSON.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Show every configured embedding model; the default is marked with *."""
    from rich.console import Console
    from rich.table import Table

    service = _service(data_dir)
    try:
        service.registry.ensure_default()
        rows = [m.as_dict() for m in service.registry.list_models()]
    except Exception as exc:
        _refuse(exc)
    if as_json:
        typer.echo(json_text(rows, indent=2))
        return
    table = Table("", "id", "model", "provider", "dims", "enabled")
    for m in rows:
        table.add_row(
            "*" if m["is_default"] else "",
            str(m["id"]),
            str(m["model_key"]),
            str(m["provider"]),
            str(m["dimensions"]),
            "yes" if m["enabled"] else "no",
        )
    Console().print(table)


@models_app.command("add")
def add_model(
    model_key: Annotated[
        str, typer.Argument(metavar="KEY", help="Model name as the provider knows it, e.g. text-embedding-3-small.")
    ],
    provider: Annotated[str, typer.Option(metavar="NAME", help="Provider name (created when --kind is given).")],
    dimensions: Annotated[
        int, typer.Option(parser=_dimensions, metavar="N", help="Vector size the model returns, e.g. 384.")
    ],
    kind: Annotated[
        str | None,
        typer.Option(parser=_kind, metavar=KINDS, help="Provider kind: creates the provider, or updates it."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(metavar="URL", help="Provider base URL, e.g. https://api.openai.com/v1.")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(metavar="VAR", help="Environment variable holding the API key (kept out of the database)."),
    ] = None,
    model_path: Annotated[str | None, typer.Option(help="Local model folder (sentence-transformers layout).")] = None,
    timeout: Annotated[
        float | None,
        typer.Option(parser=_timeout, metavar="SECONDS", help="Request timeout in seconds (API providers)."),
    ] = None,
    default: Annotated[bool, typer.Option("--default", help="Make it the default model.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Register a model (and its provider with --kind)."""
    from agentloom.embeddings.records import (
        InvalidFieldError,
        RecordNotFoundError,
        RefusedError,
        check_config,
        check_dimensions,
        check_model_key,
    )

    ctx = {"provider": provider, "model_key": model_key}
    config: dict[str, object] = {}
    if model_path is not None:
        config["model_path"] = model_path
    if timeout is not None:
        config["timeout"] = timeout
    try:  # the arguments first: nothing is written when one is wrong
        check_model_key(model_key)
        check_dimensions(dimensions)
    except InvalidFieldError as exc:
        _refuse(exc, **ctx)
    service = _service(data_dir)
    registry = service.registry
    try:
        registry.ensure_default()
        existing = registry.get_provider(provider)
        if kind is None:
            if existing is None:
                known = [p.name for p in registry.list_providers()]
                raise RecordNotFoundError(
                    f"provider {provider!r} not found",
                    field="provider",
                    reason="not_found",
                    value=provider,
                    known=known,
                )
            extra = [name for name, given in (("--base-url", base_url), ("--api-key-env", api_key_env)) if given]
            if extra:  # they would be silently ignored: only --kind writes the provider
                assert existing is not None
                named = " and ".join(extra)
                fail(
                    f"{named} {'are' if len(extra) > 1 else 'is'} only used together with --kind, which creates or "
                    f"updates the provider; provider {provider!r} exists and would stay as it is.",
                    f"add --kind {existing.kind} to update provider {provider!r} too, or leave {named} out.",
                    code=2,
                )
        check_config(config, kind or (existing.kind if existing else "local"))
        duplicate = registry.get(model_key, provider=provider) if existing is not None else None
        if duplicate is not None:  # refused before the provider is touched
            raise RefusedError(
                f"model {model_key!r} already exists",
                field="model_key",
                reason="exists",
                value=model_key,
                provider=provider,
                model_id=duplicate.id,
            )
        if kind:
            registry.upsert_provider(provider, kind, base_url=base_url, api_key_env=api_key_env)
        record = registry.add_model(model_key, provider, dimensions=dimensions, config=config, is_default=default)
    except typer.Exit:
        raise
    except Exception as exc:
        _refuse(exc, **ctx)
    typer.echo(f"added model {record.key} (id {record.id}){' as default' if record.is_default else ''}")


def _resolve(service: EmbeddingService, ref: str) -> int:
    """A model named by its id or its key (as `prepare` takes it) -> its id."""
    if ref.isdigit():
        return _model_id(ref)
    try:
        found = service.registry.get(ref)
    except Exception as exc:
        _refuse(exc, model_key=ref)
    if found is None:
        fail(f"there is no model {ref!r} in the registry.", f"run {LIST} to see the models (by key or id).", code=1)
    return found.id


def _done(record: Any, line: str, as_json: bool) -> None:
    typer.echo(json_text(record.as_dict()) if as_json else line)


def _set(ref: str, data_dir: object, as_json: bool, what: str, **change: Any) -> None:
    service = _service(data_dir)
    model_id = _resolve(service, ref)
    try:
        record = service.registry.update_model(model_id, **change)
    except Exception as exc:
        _refuse(exc, model_id=model_id)
    _done(record, f"{what} {record.key} (id {record.id}, provider {record.provider})", as_json)


ModelRef = Annotated[str, typer.Argument(metavar="MODEL", help=f"Model key or id, as {LIST} shows them.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the model record as JSON.")]


@models_app.command("set-default")
def set_default(model: ModelRef, as_json: JsonOpt = False, data_dir: DataDir = None) -> None:
    """Make a model the default; running servers pick it up within 5 minutes, the old one stays."""
    _set(model, data_dir, as_json, "the default model is now", is_default=True)


@models_app.command("enable")
def enable(model: ModelRef, as_json: JsonOpt = False, data_dir: DataDir = None) -> None:
    """Enable a model."""
    _set(model, data_dir, as_json, "enabled", enabled=True)


@models_app.command("disable")
def disable(model: ModelRef, as_json: JsonOpt = False, data_dir: DataDir = None) -> None:
    """Disable a model (the default cannot be disabled)."""
    _set(model, data_dir, as_json, "disabled", enabled=False)


@models_app.command("update")
def update(
    model: ModelRef,
    dimensions: Annotated[
        int | None, typer.Option(parser=_dimensions, metavar="N", help="Vector size the model returns.")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(parser=_timeout, metavar="SECONDS", help="Request timeout in seconds (API providers)."),
    ] = None,
    model_path: Annotated[str | None, typer.Option(help="Local model folder (sentence-transformers layout).")] = None,
    as_json: JsonOpt = False,
    data_dir: DataDir = None,
) -> None:
    """Change a model's dimensions or options (the others stay as they are)."""
    if dimensions is None and timeout is None and model_path is None:
        fail("nothing to change.", "give --dimensions, --timeout or --model-path.", code=2)
    service = _service(data_dir)
    model_id = _resolve(service, model)
    current = service.registry.get_by_id(model_id)
    assert current is not None
    config = dict(current.config)
    if timeout is not None:
        config["timeout"] = timeout
    if model_path is not None:
        config["model_path"] = model_path
    try:
        record = service.registry.update_model(
            model_id, dimensions=dimensions, config=config if (timeout is not None or model_path is not None) else None
        )
    except Exception as exc:
        _refuse(exc, model_id=model_id)
    _done(
        record,
        f"updated {record.key} (id {record.id}): {record.dimensions} dimensions, options {record.config}",
        as_json,
    )


@models_app.command("remove")
def remove(model: ModelRef, data_dir: DataDir = None) -> None:
    """Delete a model record (not the default)."""
    service = _service(data_dir)
    model_id = _resolve(service, model)
    record = service.registry.get_by_id(model_id)
    try:
        service.registry.remove_model(model_id)
    except Exception as exc:
        _refuse(exc, model_id=model_id)
    typer.echo(f"removed model {record.key if record else model} (id {model_id})")


@models_app.command("prepare")
def prepare(
    model_key: Annotated[
        str | None, typer.Argument(metavar="KEY", help="Model to prepare (default: the default model).")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Make the model ready to use (builds a local model's ONNX graph once from its weights) and embed a test word."""
    from rich.console import Console

    service = _service(data_dir)
    if model_key is not None:
        try:
            found = service.registry.get(model_key)
        except Exception as exc:
            _refuse(exc, model_key=model_key)
        if found is None:
            fail(
                f"there is no model {model_key!r} in the registry.",
                f"run {LIST} to see the models, or register it with `agentloom models add {model_key} "
                "--provider P --dimensions N`.",
            )
        if not found.enabled:
            fail(
                f"model {model_key!r} (id {found.id}) is disabled.",
                f"enable it with `agentloom models enable {found.id}`, then run `agentloom models prepare "
                f"{model_key}` again.",
            )
    console = Console(stderr=True)

    def progress(message: str) -> None:
        console.print(message, style="dim", highlight=False, soft_wrap=True)  # a line per step, kept in logs
        status.update(message)

    with console.status("Preparing the embedding model...") as status:
        try:
            record = service.prepare(model_key, progress=progress)
            service.embed_query("ready", record.key)  # the model named, not the default
        except Exception as exc:
            _refuse(exc, model_key=model_key)
    console.print(f"[green]ready[/]: {record.key} ({record.dimensions} dimensions)")

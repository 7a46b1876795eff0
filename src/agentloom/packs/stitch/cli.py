"""The stitch pack's command line, `agentloom stitch ...`: serve the Stitch HTTP API and its dispatcher."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentloom.terminal.common import DataDir, load_settings
from agentloom.terminal.help import SuggestingGroup

KEEP_ALIVE_SECONDS = 75  # nginx's default keepalive_timeout

app = typer.Typer(
    cls=SuggestingGroup, help="Stitch: run React Flow graphs with external workers.", no_args_is_help=True
)


@app.command("serve")
def serve(
    host: Annotated[
        str, typer.Option(metavar="HOST", help="Interface to listen on; anything but loopback needs STITCH_API_KEY.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port to listen on.")] = 8000,
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            metavar="URL",
            help="sqlite:///file.db or postgresql://user@host/db (default: SQLite in the data dir).",
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="Server processes sharing the port (all state is in the database).")
    ] = 1,
    data_dir: DataDir = None,
) -> None:
    """Serve /api/stitch (OpenAPI docs at /docs; with STITCH_API_KEY set, they need the key too).
    STITCH_BASE_URL says where workers reach this server (on loopback it defaults to
    http://127.0.0.1:PORT, with a warning; elsewhere it is required). STITCH_API_KEY, when set, must be
    at least 16 characters; STITCH_MAX_BODY_BYTES, STITCH_WEBHOOK_ALLOW and
    STITCH_WEBHOOK_DENY_PRIVATE tune what is accepted and where webhooks may go. Prometheus metrics
    are at /metrics (docs/stitch-metrics.md)."""
    import logging
    import os
    import shutil
    import tempfile

    # prometheus_client reads this once, when imported: one process keeps its metrics in memory,
    # and several get a fresh folder of their own below (an inherited one may hold old counts).
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)

    import uvicorn

    from agentloom.core.logs import configure_logging
    from agentloom.stitch.api import create_app
    from agentloom.stitch.db import default_url
    from agentloom.stitch.settings import StitchConfigError, StitchSettings

    settings = load_settings(data_dir=data_dir)
    configure_logging(settings.log_level)
    try:
        stitch = StitchSettings().checked(host, port)
    except StitchConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    url = database or stitch.database_url or default_url(settings.data_dir)
    logging.getLogger(__name__).info("stitch on http://%s:%d/api/stitch, callbacks via %s", host, port, stitch.base_url)

    # Live-update streams stay open until the browser leaves: on shutdown, uvicorn would wait for
    # them forever. Requests are short (a webhook owed is in the outbox), so 3 s is enough for them.
    # An idle connection is kept longer than clients keep theirs (httpx: 5 s, uvicorn's default
    # too; aiohttp: 15 s): at equal timeouts the server may close a connection just as a client
    # sends a request on it, and that request fails with no answer.
    def run(app: Any, **more: Any) -> None:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_config=None,
            log_level=settings.log_level.lower(),
            timeout_graceful_shutdown=3,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            **more,
        )

    if workers == 1:
        run(create_app(stitch, url))
        return
    # Each process builds its own app from the environment; the migrations run once, up front.
    from agentloom.stitch.db import Database

    Database(url).dispose()
    os.environ["STITCH_DATABASE_URL"] = url
    os.environ["STITCH_BASE_URL"] = stitch.base_url or ""
    metrics_dir = tempfile.mkdtemp(prefix="stitch-metrics-")  # the worker processes add their counts up here
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:
        run("agentloom.stitch.api:app_from_environment", factory=True, workers=workers)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


@app.command("prune")
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Prune finished runs that finished longer ago than this: 14d, 12h or 30m.",
        ),
    ],
    flow: Annotated[
        str | None, typer.Option("--flow", metavar="ID", help="Only this flow's runs (its id, a UUID).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")] = False,
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            metavar="URL",
            help="sqlite:///file.db or postgresql://user@host/db (default: STITCH_DATABASE_URL, else SQLite in "
            "the data dir).",
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size", min=1, max=10_000, help="Runs per transaction (default: STITCH_RETENTION_BATCH_SIZE)."
        ),
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Prune finished runs (completed, failed, cancelled) and everything they own, now, and print
    the rows deleted per table. Running runs and runs waiting for a person are never pruned. Safe
    while servers run on the same database: it works in short batches, as their own pruning does."""
    from agentloom.stitch.db import Database, default_url
    from agentloom.stitch.ids import is_uuid
    from agentloom.stitch.retention import TABLES, BadAge, Policy, parse_age
    from agentloom.stitch.retention import prune as prune_runs
    from agentloom.stitch.settings import StitchSettings

    try:
        age = parse_age(older_than)
    except BadAge as exc:
        typer.echo(f"error: --older-than: {exc}", err=True)
        raise typer.Exit(2) from None
    if flow is not None and not is_uuid(flow):
        typer.echo(
            f"error: --flow: {flow!r} is not a flow id; flow ids are UUIDs, as GET /api/stitch/flows lists them",
            err=True,
        )
        raise typer.Exit(2)
    stitch = StitchSettings()
    url = database or stitch.database_url or default_url(load_settings(data_dir=data_dir).data_dir)
    db = Database(url)
    try:
        if flow is not None and not _flow_exists(db, flow.lower()):
            typer.echo(
                f"error: --flow: no flow {flow} in {db.describe()}; GET /api/stitch/flows lists the flows", err=True
            )
            raise typer.Exit(2)
        policy = Policy(max_age=age, batch_size=batch_size or stitch.retention_batch_size)
        report = prune_runs(db, policy, flow_id=flow and flow.lower(), dry_run=dry_run)
    finally:
        db.dispose()
    typer.echo(f"{'would delete' if dry_run else 'deleted'} (runs finished more than {older_than} ago):")
    width = max(len(table) for table in TABLES)
    for table in TABLES:
        typer.echo(f"  {table:<{width}}  {report.rows[table]}")


def _flow_exists(db: Any, flow_id: str) -> bool:
    from sqlalchemy import select

    from agentloom.stitch.db.schema import flows

    with db.reading() as conn:
        return conn.execute(select(flows.c.id).where(flows.c.id == flow_id)).first() is not None

"""The stitch pack's command line, `agentloom stitch ...`: serve the Stitch HTTP API and its dispatcher."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentloom.cli.common import DataDir, load_settings
from agentloom.cli.help import SuggestingGroup

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
    def run(app: Any, **more: Any) -> None:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_config=None,
            log_level=settings.log_level.lower(),
            timeout_graceful_shutdown=3,
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

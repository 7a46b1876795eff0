"""``agentloom serve``: the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import errno
import socket
from typing import Annotated

import typer

from agentloom.terminal.common import DataDir, DisableOpt, PacksOpt, ToolsOpt, load_settings


def serve(
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio.")] = False,
    host: Annotated[str | None, typer.Option(metavar="HOST", help="HTTP host (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(metavar="PORT", help="HTTP port (default 8765).")] = None,
    packs: PacksOpt = None,
    disable: DisableOpt = None,
    tools: ToolsOpt = None,
    data_dir: DataDir = None,
) -> None:
    """Run the MCP server with every enabled pack. Logs go to stderr; stdout carries only protocol."""
    from agentloom.core.logs import configure_logging, stdout_to_stderr

    settings = load_settings(host=host, port=port, packs=packs, disabled_packs=disable, tools=tools, data_dir=data_dir)
    configure_logging(settings.log_level)
    # Claim the port before anything else, so a busy port is the first and only thing said.
    listener = _listen(settings.host, settings.port) if http else None
    with stdout_to_stderr():
        from agentloom.server.host import Host

        loom = Host(settings)
    loom.embeddings.prepare_in_background()
    server = loom.server
    if http:
        import logging

        import uvicorn

        from agentloom.server.http import http_app

        app = http_app(server, settings.host)
        logging.getLogger(__name__).info("serving streamable HTTP on http://%s:%d/mcp", settings.host, settings.port)
        # log_config=None: uvicorn's own config would log requests to stdout.
        config = uvicorn.Config(app, log_config=None, log_level=settings.log_level.lower())
        assert listener is not None  # claimed above whenever http is set
        uvicorn.Server(config).run(sockets=[listener])
    else:
        import anyio

        from agentloom.server.stdio import run_stdio

        anyio.run(run_stdio, server)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = "it is in use by another program" if exc.errno == errno.EADDRINUSE else exc.strerror
        typer.echo(
            f"error: cannot listen on {host}:{port}: {reason}. Stop the other server or choose "
            "another port with --port N (or AGENTLOOM_PORT).",
            err=True,
        )
        raise typer.Exit(1) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock

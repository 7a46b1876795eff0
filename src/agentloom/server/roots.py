"""The client's file roots (``roots/list``), for packs that read or find files for the client."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from mcp.server.mcpserver import Context

log = logging.getLogger(__name__)


async def client_roots(ctx: Context) -> list[Path]:
    """The client's file roots; none when it declared no roots capability or cannot be asked."""
    try:
        capabilities = ctx.client_capabilities
    except ValueError:  # no request (a direct call)
        return []
    if capabilities is None or capabilities.roots is None:
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in the 2026-07-28 revision; older clients use it
            answer = await ctx.session.list_roots()
    except Exception as exc:
        log.info("the client did not list its roots (%s)", exc)
        return []
    return [Path(url2pathname(urlparse(str(r.uri)).path)) for r in answer.roots if str(r.uri).startswith("file:")]

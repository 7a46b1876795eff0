"""The web console's files: the page at ``/`` and at every address the console shows
(``/flows/{id}``, ``/runs/{id}``, ...), its assets under ``/assets``.

The console is a single page built from ``console/`` (React, Vite) into ``console_dist`` beside
this module by ``scripts/setup.sh``; the built files are not in git. Without them the API works
as ever and ``/`` says how to build the console. The page holds no data, so it is served without
the API key: it asks for the key itself and sends it on every API call.
"""

from __future__ import annotations

import html
from pathlib import Path

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

CONSOLE_DIR = Path(__file__).with_name("console_dist")
ASSETS = "/assets"
# The console's own addresses: each answers the page, which routes in the browser.
PAGES = ("/", "/flows", "/flows/{rest:path}", "/runs", "/runs/{rest:path}")
HEADERS = {
    "Cache-Control": "no-cache",  # the page names its hashed assets: always the current build
    # Only this server's scripts and API; inline styles are React Flow's node positions.
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
}
# An installed copy (pip, pipx, a wheel) holds its own console_dist: building in a checkout changes
# only the checkout, so the fix has to say to install again, not just to build and restart.
NOT_BUILT = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Stitch</title></head>
<body style="font-family: sans-serif; max-width: 44em; margin: 3em auto; line-height: 1.5">
<h1>Stitch</h1>
<p>The API is up at <a href="/api/stitch/health">/api/stitch</a> (OpenAPI: <a href="/docs">/docs</a>),
but the web console is not built in this installation: there is no <code>index.html</code> in
<code>{directory}</code>.</p>
<p>Build it in the agentloom checkout with <code>scripts/setup.sh</code>, or by hand
(Node.js 20.19 or newer): <code>npm ci --prefix console &amp;&amp; npm run build --prefix console</code>.</p>
<ul>
<li>Installed editable from that checkout (as <code>scripts/setup.sh</code> installs it): restart
<code>agentloom stitch serve</code>.</li>
<li>Installed any other way (pip, pipx, a wheel): install again from the checkout once the console is
built, e.g. <code>pip install --no-deps --force-reinstall /path/to/agentloom</code>
(<code>pipx install --force '/path/to/agentloom[all]'</code>), or install a wheel made there with
<code>python -m build</code>, then restart <code>agentloom stitch serve</code>.</li>
</ul>
</body></html>"""


def is_page(path: str) -> bool:
    """A path the console answers without the API key (the page and its assets)."""
    return path in ("/", "/flows", "/runs") or path.startswith(("/flows/", "/runs/", f"{ASSETS}/"))


def mount(app: FastAPI, directory: Path = CONSOLE_DIR) -> bool:
    """Serve the console from ``directory``; True when it is built there."""
    index = directory / "index.html"
    built = index.is_file() and (directory / "assets").is_dir()
    not_built = NOT_BUILT.format(directory=html.escape(str(directory.resolve())))
    if built:
        app.mount(ASSETS, StaticFiles(directory=directory / "assets"), name="console-assets")

    async def page(request: Request) -> Response:
        if not built:
            return HTMLResponse(not_built, headers={"Cache-Control": "no-cache"})
        return HTMLResponse(index.read_bytes(), headers=HEADERS)

    for path in PAGES:  # plain routes: not in the OpenAPI description, any query string (the page reads it)
        app.router.add_route(path, page, methods=["GET"], include_in_schema=False)
    return built

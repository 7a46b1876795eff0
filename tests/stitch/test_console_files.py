"""How the console's files are served: the page at every console address, its assets, and a
page that says how to build the console when it is not built. (The console itself, in a real
browser: test_console.py.)"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from agentloom.stitch import console


def app_with(directory: Path) -> tuple[TestClient, bool]:
    app = FastAPI()
    built = console.mount(app, directory)
    return TestClient(app), built


def test_without_a_build_every_console_address_says_how_to_build_it(tmp_path: Path) -> None:
    client, built = app_with(tmp_path / "nothing-here")
    assert not built
    for path in ("/", "/runs", "/flows/abc", "/runs/abc"):
        reply = client.get(path)
        assert reply.status_code == 200 and "not built" in reply.text, path
        assert "scripts/setup.sh" in reply.text and "npm run build --prefix console" in reply.text
    assert client.get("/assets/app.js").status_code == 404


def test_a_build_is_served_at_every_console_address_with_its_assets(tmp_path: Path) -> None:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<!doctype html><div id=root></div><script src=/assets/app.js></script>")
    (tmp_path / "assets" / "app.js").write_text("console.log('stitch')")
    client, built = app_with(tmp_path)
    assert built
    for path in ("/", "/runs", "/runs/abc", "/flows/abc?tab=runs"):
        reply = client.get(path)
        assert reply.status_code == 200 and "id=root" in reply.text, path
        assert reply.headers["cache-control"] == "no-cache"
        assert "default-src 'self'" in reply.headers["content-security-policy"]
    asset = client.get("/assets/app.js")
    assert asset.status_code == 200 and "stitch" in asset.text
    assert client.get("/assets/missing.js").status_code == 404
    assert client.get("/elsewhere").status_code == 404  # only the console's own addresses
    assert client.post("/").status_code == 405


def test_only_the_console_addresses_are_pages() -> None:
    assert all(console.is_page(p) for p in ("/", "/runs", "/flows", "/runs/x", "/flows/x", "/assets/a.js"))
    assert not any(console.is_page(p) for p in ("/api/stitch/flows", "/docs", "/openapi.json", "/runsx", "/assetsx"))

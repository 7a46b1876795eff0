"""A real headless Chromium (Debian's ``chromium``) driven by Playwright, for the console tests
and the console benchmark. Playwright's own browser download is never used.

Missing parts (the browser, the built console) skip a test outside CI and fail it in CI.
Screenshots go to ``STITCH_SCREENSHOTS`` when it is set (``docs/screenshots`` refreshes the
README's), else nowhere.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from agentloom.stitch.console import CONSOLE_DIR
from tests.stitch.conftest import StitchServer

CHROMIUM = os.environ.get("STITCH_TEST_CHROMIUM", "/usr/bin/chromium")
# What a headless Chromium needs on a machine with no network, no GPU and no screen.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
VIEWPORT = {"width": 1440, "height": 900}


def missing() -> str | None:
    if not Path(CHROMIUM).is_file():
        return f"no Chromium at {CHROMIUM}: install Debian's chromium (scripts/setup.sh test does, as root)"
    if not (CONSOLE_DIR / "index.html").is_file():
        return f"the console is not built in {CONSOLE_DIR}: run scripts/setup.sh test"
    return None


def launch(playwright: object) -> Browser:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)  # type: ignore[attr-defined,no-any-return]


@pytest.fixture(scope="module")  # sync Playwright holds an event loop: stop it before other modules' tests
def browser() -> Iterator[Browser]:
    problem = missing()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    context.set_default_timeout(20_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    context.close()
    assert errors == [], f"the page threw: {errors}"


def screenshot(page: Page, name: str) -> None:
    folder = os.environ.get("STITCH_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[StitchServer]:
    """A server for a page: the console does not depend on the database, so SQLite only."""
    stitch = StitchServer(f"sqlite:///{tmp_path / 'console.db'}", tmp_path).start()
    yield stitch
    stitch.stop()

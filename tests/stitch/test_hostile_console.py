"""The console's gate form against a flow author's hostile pattern, in a real Chromium: the form
leaves the pattern to the server (the browser's RegExp backtracks, and ``^(a+)+$`` against a
long answer would freeze the tab of whoever answers), shows the server's refusal on the field,
and sends the answer that fits."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.stitch.browser import browser, missing, page, server  # noqa: F401 - fixtures
from tests.stitch.conftest import StitchServer
from tests.stitch.hostile import waiting_gate

pytestmark = pytest.mark.slow


def test_a_backtracking_pattern_is_judged_by_the_server_not_the_browser(server: StitchServer, page: Page) -> None:
    schema = {
        "type": "object",
        "required": ["code", "approved"],
        "properties": {
            "code": {"type": "string", "title": "Code", "pattern": "^(a+)+$"},
            "approved": {"type": "boolean", "x-stitch-action": True},
        },
    }
    run_id = waiting_gate(server, schema)
    page.goto(f"{server.base}/runs/waiting")
    gate = page.get_by_test_id("waiting-gate")
    expect(gate).to_have_count(1)
    gate.get_by_test_id("form-field-code").fill("a" * 40 + "!")
    gate.get_by_test_id("action-approved-true").click()
    expect(gate.get_by_test_id("form-error-code")).to_contain_text("does not match")
    assert server.http.get(f"/runs/{run_id}").json()["status"] == "waiting_for_user"
    gate.get_by_test_id("form-field-code").fill("a" * 40)
    gate.get_by_test_id("action-approved-true").click()
    expect(page.get_by_test_id("waiting-gate")).to_have_count(0)
    assert server.http.get(f"/runs/{run_id}").json()["node_states"]["gate"]["output"] == {
        "code": "a" * 40,
        "approved": True,
    }

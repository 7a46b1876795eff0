"""The checklists in docs/checklists, `checklist record|list`, and `check` against a fake and the real Flowise.

The CLI is driven in-process on the apps of ``cli_checks`` (``cli.py`` mounts them under ``agentloom
flowise``). No test runs git: ``checklists.commit`` is given a stand-in for ``subprocess.run``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from typer.testing import CliRunner, Result

from agentloom.packs.flowise import checklists, cli_checks
from tests.conftest import REPO, TIMESTAMP, free_port
from tests.packs.flowise.fake_flowise import FakeFlowise
from tests.packs.flowise.test_catalog import trim

FOLDER = REPO / "docs" / "checklists"
STORIES = [
    "build-from-nodes",
    "build-from-template",
    "catalog-refresh",
    "data-management",
    "learning",
    "resilience",
    "run-and-test",
    "search",
    "validation",
]
# Needs the trimmed catalog (test_catalog.SUBSET) answers at top-3: the search step can pass on the fake.
NEEDS = [
    ("remember the conversation with the user", "bufferMemory", ["bufferWindowMemory", "RedisBackedChatMemory"]),
    ("split long text into smaller chunks", "recursiveCharacterTextSplitter", []),
    ("read the pages of a PDF document", "pdfFile", []),
    ("answer with Claude from Anthropic", "chatAnthropic", []),
    ("use GPT-4o from OpenAI as the chat model", "chatOpenAI", []),
    ("do arithmetic for the agent", "calculator", []),
    ("search Google for current results", "serpAPI", []),
    ("scrape the text of a web page", "cheerioWebScraper", []),
    ("load rows from a CSV spreadsheet", "csvFile", []),
    ("an agent that decides which tools to call", "toolAgent", ["conversationalAgent"]),
    ("turn text into vectors with OpenAI", "openAIEmbeddings", []),
    ("keep document vectors in memory, no database", "memoryVectorStore", ["faiss"]),
]


def cli(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    """`agentloom flowise check|checklist ...` as cli.py mounts them."""
    app = typer.Typer()

    @app.callback()
    def flowise() -> None:
        """The flowise pack."""

    app.command("check")(cli_checks.check_cmd)
    app.add_typer(cli_checks.checklist_app, name="checklist")
    return CliRunner().invoke(app, list(args), env=env, input=input)


@pytest.fixture
def copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch copy of docs/checklists, and a stand-in for git (commit abc1234)."""
    folder = tmp_path / "checklists"
    shutil.copytree(FOLDER, folder, ignore=shutil.ignore_patterns("results"))

    def git(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert command == ["git", "rev-parse", "--short", "HEAD"] and kwargs["cwd"] == folder
        return subprocess.CompletedProcess(command, 0, "abc1234\n", "")

    monkeypatch.setattr(checklists.subprocess, "run", git)
    return folder


# -- the checklists ------------------------------------------------------------------------
def test_one_checklist_per_story_found_in_the_checkout() -> None:
    assert checklists.checklists_folder() == FOLDER
    assert checklists.stories(FOLDER) == STORIES
    readme = (FOLDER / "README.md").read_text()
    assert all(f"({story}.md)" in readme for story in STORIES) and "checklist record" in readme


@pytest.mark.parametrize("story", STORIES)
def test_checklist_has_setup_data_and_complete_scenarios(story: str) -> None:
    checklist = checklists.parse(FOLDER / f"{story}.md")
    assert checklist.problems() == []
    assert checklist.ids == [f"S{i}" for i in range(1, len(checklist.ids) + 1)] and len(checklist.ids) >= 5
    assert all(s.title and s.steps and len(s.expected) > 20 and s.actual and s.box for s in checklist.scenarios)
    assert "FR-" in (FOLDER / f"{story}.md").read_text().split("## Setup")[0], "each names its requirements"


def test_a_broken_checklist_is_reported(tmp_path: Path) -> None:
    (tmp_path / "broken.md").write_text(
        "# Checklist: broken\n\n## Setup\n\n1. x\n\n## Scenarios\n\n"
        "### S1. No expectation\n\nSteps:\n1. x\n\nActual:\n\n- [ ] pass\n\n"
        "### S1. Twice\n\nSteps:\n1. x\n\nExpected: y\n\nActual:\n\n## Notes\n\n- [ ] pass\n"
    )
    problems = checklists.parse(tmp_path / "broken.md").problems()
    assert problems == ["no '## Test data' section", "S1 lacks Expected:", "S1 appears twice", "S1 lacks - [ ] pass"]


def test_commit_is_read_without_failing_outside_a_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError("git")

    monkeypatch.setattr(checklists.subprocess, "run", missing)
    assert checklists.commit(tmp_path) is None
    monkeypatch.setattr(
        checklists.subprocess,
        "run",
        lambda command, **kwargs: subprocess.CompletedProcess(command, 128, "", "not a git repository"),
    )
    assert checklists.commit(tmp_path) is None


# -- checklist record / list ---------------------------------------------------------------
def test_record_with_options_appends_one_line(copy: Path) -> None:
    result = cli(
        "checklist",
        "record",
        "search",
        "--checklists",
        str(copy),
        "--tester",
        "Ada",
        "--result",
        "S2=FAIL",
        "--result",
        "S1=pass",
        "--notes",
        "S2: Memory first, but a tool too",
    )
    assert result.exit_code == 0, result.output
    assert "2 of 8 scenarios recorded (1 pass)" in result.output and "story not complete (S2, S3," in result.output
    lines = (copy / "results" / "search.jsonl").read_text().splitlines()
    assert len(lines) == 1
    run = json.loads(lines[0])
    assert list(run) == ["timestamp", "tester", "story", "results", "notes", "commit"]
    assert TIMESTAMP.fullmatch(run["timestamp"]) and run["tester"] == "Ada" and run["story"] == "search"
    assert list(run["results"].items()) == [("S1", "pass"), ("S2", "fail")], "checklist order, lower case"
    assert run["notes"] == "S2: Memory first, but a tool too" and run["commit"] == "abc1234"

    path = checklists.record("resilience", "Bo", {"S1": "pass"}, "library call", folder=copy)
    assert path == copy / "results" / "resilience.jsonl" and json.loads(path.read_text())["tester"] == "Bo"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (
            ["serach", "--result", "S1=pass"],
            ["story 'serach' unknown", "known stories: build-from-nodes", "validation"],
        ),
        (
            ["search", "--result", "S1=pass", "--result", "S99=pass"],
            ["scenario S99 unknown in search.md", "known: S1, S2"],
        ),
        (["search", "--result", "S1=maybe"], ["S1=maybe is neither pass nor fail", "--result S1=pass"]),
        (["search", "--result", "S1"], ["--result 'S1' is not ID=pass|fail"]),
    ],
)
def test_record_refuses_unknown_stories_ids_and_values(copy: Path, args: list[str], named: list[str]) -> None:
    result = cli("checklist", "record", *args, "--checklists", str(copy), "--tester", "Ada")
    assert result.exit_code == 2
    assert all(text in result.output for text in named), result.output
    assert not (copy / "results").exists(), "nothing recorded"


def test_record_asks_each_scenario_and_completes_the_story(copy: Path) -> None:
    ids = checklists.parse(copy / "search.md").ids
    answers = ["Ada", "maybe"] + [x for sid in ids for x in ("pass", "first try" if sid == "S1" else "")] + ["all fine"]
    result = cli("checklist", "record", "search", "--checklists", str(copy), input="\n".join(answers) + "\n")
    assert result.exit_code == 0, result.output
    assert "answer pass or fail" in result.output and "S8. The same search from a terminal" in result.output
    assert "story complete: every scenario passed" in result.output
    run = json.loads((copy / "results" / "search.jsonl").read_text())
    assert run["results"] == dict.fromkeys(ids, "pass") and run["notes"] == "all fine"
    assert run["scenario_notes"] == {"S1": "first try"}

    listing = cli("checklist", "list", "--checklists", str(copy))
    assert listing.exit_code == 0
    rows = {line.split()[0]: line for line in listing.output.splitlines()}
    assert (
        "complete" in rows["search"] and "not complete" not in rows["search"] and "by Ada: 8/8 pass" in rows["search"]
    )
    assert "not complete" in rows["learning"] and "never run" in rows["learning"]
    as_json = {r["story"]: r for r in json.loads(cli("checklist", "list", "--checklists", str(copy), "--json").stdout)}
    assert as_json["search"]["completed_by"] == {"timestamp": run["timestamp"], "tester": "Ada", "commit": "abc1234"}


def test_a_missing_checklists_folder_names_the_option(tmp_path: Path) -> None:
    result = cli("checklist", "list", "--checklists", str(tmp_path / "nope"))
    assert result.exit_code == 2 and "--checklists" in result.output and "docs/checklists" in result.output


# -- check -----------------------------------------------------------------------------------
def environment(monkeypatch: pytest.MonkeyPatch, url: str, key: str) -> dict[str, str]:
    for name in [n for n in os.environ if n.startswith("AGENTLOOM_")]:
        monkeypatch.delenv(name)
    return {"AGENTLOOM_FLOWISE__URL": url, "AGENTLOOM_FLOWISE__API_KEY": key}


def lines(result: Result) -> dict[str, str]:
    return {line[6:14].strip(): line for line in result.output.splitlines() if line[:4] in ("PASS", "FAIL", "SKIP")}


@pytest.mark.slow
def test_check_on_a_fake_flowise(fake_flowise: FakeFlowise, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = trim(fake_flowise)
    env = environment(monkeypatch, fake.url, fake.api_key)
    data = ["--data-dir", str(tmp_path / "data")]

    result = cli("check", *data, "--skip-build", env=env)  # the real evaluation set: most nodes are not in the subset
    assert result.exit_code == 1, result.output
    step = lines(result)
    assert (
        step["health"].startswith("PASS") and "Flowise 3.1.2" in step["health"] and "API key accepted" in step["health"]
    )
    assert "ChromaDB" in step["health"]
    assert step["refresh"].startswith("PASS") and "21 nodes (1 deprecated), 24 templates" in step["refresh"]
    assert step["search"].startswith("FAIL  search   top-3 ") and "goal > 90%" in step["search"]
    assert "needs expect nodes this server lacks" in step["search"]
    assert "missed: 'chat with Gemini" in result.output
    assert step["build"] == "SKIP  build    --skip-build"
    assert step["breaker"].startswith("PASS  breaker  11/11 transitions correct (threshold 3, open 300 s")
    assert result.output.splitlines()[-1] == "3 passed, 1 failed, 1 skipped (search)"
    probes = [p for m, p in fake.requests if m == "GET" and p.startswith("/api/v1/chatflows/")]
    assert len(probes) == 3, "the breaker check sends the configured server only 3 harmless 4xx probes"

    needs = tmp_path / "needs.json"
    needs.write_text(json.dumps({"needs": [{"need": n, "expected": e, "also": a} for n, e, a in NEEDS]}))
    monkeypatch.setattr(cli_checks, "NEEDS", needs)
    result = cli("check", *data, "--json", env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["passed"] is True and report["url"] == fake.url
    steps = {s["name"]: s for s in report["steps"]}
    assert list(steps) == ["health", "refresh", "search", "build", "breaker"]
    assert all(s["status"] == "pass" for s in steps.values())
    assert steps["search"]["measures"]["top3"] == len(NEEDS)
    assert steps["build"]["measures"] == {"templates": 24, "created": 24, "rate": 1.0}
    assert "note: csv-agent: Flowise reports not on this Flowise: csvAgent" in steps["build"]["details"]
    assert fake.chatflows == {}, "every chatflow the check created is deleted again"

    monkeypatch.setattr(cli_checks, "NEEDS", None)
    result = cli("check", *data, "--skip-build", env=env)
    assert (
        result.exit_code == 1
        and "FAIL  search   evaluation set missing: benchmarks/data/flowise_node_needs.json" in result.output
    )


def test_check_names_the_broken_dependency(
    fake_flowise: FakeFlowise, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = ["--data-dir", str(tmp_path / "data"), "--skip-build"]
    result = cli("check", *data, env=environment(monkeypatch, fake_flowise.url, "wrong-key"))
    assert result.exit_code == 1
    step = lines(result)
    assert step["health"].startswith("FAIL") and "refused the API key" in step["health"]
    assert "AGENTLOOM_FLOWISE__API_KEY" in step["health"] and step["refresh"].startswith("FAIL")

    result = cli("check", *data, env=environment(monkeypatch, f"http://127.0.0.1:{free_port()}", "key"))
    assert result.exit_code == 1
    step = lines(result)
    assert step["health"].startswith("FAIL") and "unreachable" in step["health"]
    assert "AGENTLOOM_FLOWISE__URL" in step["health"]
    assert step["search"].startswith("FAIL") and "no node catalog" in step["search"]
    assert step["breaker"].startswith("FAIL") and "half-open → closed when the trial succeeds" in result.output


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_check_against_a_real_flowise(
    live_flowise: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, key = live_flowise
    result = cli("check", "--data-dir", str(tmp_path / "data"), "--json", env=environment(monkeypatch, url, key))
    report = json.loads(result.stdout)
    steps = {s["name"]: s for s in report["steps"]}
    assert result.exit_code == (0 if report["passed"] else 1)
    for name in ("health", "refresh", "build", "breaker"):
        assert steps[name]["status"] == "pass", steps[name]
    assert steps["build"]["measures"]["templates"] == 24 and steps["build"]["measures"]["rate"] >= 0.95
    assert steps["search"]["measures"]["needs"] == 110  # its pass or fail is the search's own result (about 85 %)
    left = httpx.get(f"{url}/api/v1/chatflows", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
    assert not [f for f in left if str(f.get("name", "")).startswith("agentloom check:")]

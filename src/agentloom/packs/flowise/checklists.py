"""The flowise pack's manual test checklists: read them, and record who ran one, when, and what passed.

Why Markdown files in the repository (``docs/checklists/``, one per user story) rather than data in
the package: a checklist is reviewed and changed in the same commit as the behaviour it checks,
and a tester reads it beside the running system. Why a parser at all: a recorded run
must name scenarios that exist in that checklist, so ids are read from the file itself, and the
test suite holds every checklist to the same shape: setup, test data, and per
scenario ``### S<n>. Title``, ``Steps:``, ``Expected:``, ``Actual:`` and a ``- [ ] pass`` box.

A run is one JSON line appended to ``results/<story>.jsonl`` next to the checklists:
``{timestamp, tester, story, results: {S1: "pass" | "fail"}, notes, commit}`` (and
``scenario_notes`` when notes were given per scenario). ``commit`` is the checkout's short commit,
so a result names the version of the checklist and the code it was made against. A story is
complete when one run marks every scenario of its current checklist ``pass``.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentloom.core.errors import AgentloomError
from agentloom.core.timestamps import iso

OUTCOMES = ("pass", "fail")
RESULTS = "results"
_SCENARIO = re.compile(r"^###\s+(S\d+)\.\s+(\S.*?)\s*$")
_BOX = re.compile(r"^- \[[ xX]\] pass\s*$")
_SECTION = re.compile(r"^##\s+(.+?)\s*$")


class ChecklistError(AgentloomError):
    """A story, scenario, result or folder that does not fit the checklists; the message names the fix."""


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    steps: bool
    expected: str
    actual: bool
    box: bool


@dataclass(frozen=True)
class Checklist:
    story: str
    title: str
    path: Path
    sections: tuple[str, ...]
    scenarios: tuple[Scenario, ...]

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.scenarios]

    def problems(self) -> list[str]:
        """What keeps this file from being a usable checklist: empty when none."""
        out = [f"no '## {name}' section" for name in ("Setup", "Test data", "Scenarios") if name not in self.sections]
        if not self.scenarios:
            out.append("no scenario ('### S1. Title')")
        seen: set[str] = set()
        for s in self.scenarios:
            if s.id in seen:
                out.append(f"{s.id} appears twice")
            seen.add(s.id)
            missing = [
                part
                for part, ok in (
                    ("Steps:", s.steps),
                    ("Expected:", bool(s.expected)),
                    ("Actual:", s.actual),
                    ("- [ ] pass", s.box),
                )
                if not ok
            ]
            if missing:
                out.append(f"{s.id} lacks {', '.join(missing)}")
        return out


def repo_root() -> Path | None:
    """The agentloom checkout this module runs from (installed editable from ``src/``), else None."""
    root = Path(__file__).resolve().parents[4]
    return root if (root / "pyproject.toml").is_file() and (root / "src" / "agentloom").is_dir() else None


def checklists_folder(explicit: Path | None = None) -> Path:
    """``explicit`` (``--checklists DIR``) when given, else ``docs/checklists`` of the checkout."""
    if explicit is not None:
        if not explicit.is_dir():
            raise ChecklistError(
                f"--checklists {explicit}: no such folder; point it at docs/checklists of an agentloom checkout."
            )
        return explicit
    root = repo_root()
    if root is None or not (root / "docs" / "checklists").is_dir():
        raise ChecklistError(
            "no checklists folder: the installed package carries no docs/; pass "
            "--checklists DIR pointing at docs/checklists of an agentloom checkout."
        )
    return root / "docs" / "checklists"


def stories(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.md") if p.stem.lower() != "readme")


def parse(path: Path) -> Checklist:
    """A checklist file: its title, ``##`` sections and scenarios (id, title, which parts it has)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    title = next((line[2:].strip() for line in lines if line.startswith("# ")), path.stem)
    sections: list[str] = []
    blocks: list[tuple[str, str, list[str]]] = []
    for line in lines:
        scenario, section = _SCENARIO.match(line), _SECTION.match(line)
        if scenario:
            blocks.append((scenario[1], scenario[2], []))
        elif section:
            sections.append(section[1])
            if blocks and section[1] != "Scenarios":
                blocks.append(("", "", []))  # a later section ends the last scenario
        elif blocks:
            blocks[-1][2].append(line)
    scenarios = tuple(_scenario(sid, stitle, body) for sid, stitle, body in blocks if sid)
    return Checklist(path.stem, title, path, tuple(sections), scenarios)


def _scenario(scenario_id: str, title: str, body: list[str]) -> Scenario:
    expected: list[str] = []
    collecting = False
    for line in body:
        if line.startswith("Expected:"):
            collecting, line = True, line[len("Expected:") :]
        elif collecting and (not line.strip() or line.startswith("Actual:")):
            collecting = False
        if collecting:
            expected.append(line.strip())
    return Scenario(
        scenario_id,
        title,
        any(line.strip() == "Steps:" for line in body),
        " ".join(expected).strip(),
        any(line.startswith("Actual:") for line in body),
        any(_BOX.match(line) for line in body),
    )


def load(story: str, folder: Path) -> Checklist:
    known = stories(folder)
    if story not in known:
        raise ChecklistError(f"story {story!r} unknown in {folder}; known stories: {', '.join(known) or 'none'}.")
    return parse(folder / f"{story}.md")


def commit(folder: Path) -> str | None:
    """The checkout's short commit (``git rev-parse --short HEAD``), or None outside a git checkout."""
    try:
        answer = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (answer.stdout.strip() or None) if answer.returncode == 0 else None


def check_results(checklist: Checklist, results: Mapping[str, str]) -> dict[str, str]:
    """The results in the checklist's order, values lower-cased; unknown ids or values are refused."""
    if not results:
        raise ChecklistError(
            f"no results given for {checklist.story}; give --result ID=pass|fail per scenario "
            f"({', '.join(checklist.ids)})."
        )
    unknown = [k for k in results if k not in checklist.ids]
    if unknown:
        raise ChecklistError(
            f"scenario {', '.join(unknown)} unknown in {checklist.path.name}; known: {', '.join(checklist.ids)}."
        )
    bad = {k: v for k, v in results.items() if str(v).strip().lower() not in OUTCOMES}
    if bad:
        shown = ", ".join(f"{k}={v}" for k, v in bad.items())
        raise ChecklistError(
            f"result {shown} is neither pass nor fail; write --result {next(iter(bad))}=pass or =fail."
        )
    return {sid: str(results[sid]).strip().lower() for sid in checklist.ids if sid in results}


def parse_pairs(pairs: list[str]) -> dict[str, str]:
    """``["S1=pass", "S2=fail"]`` (the ``--result`` options) → ``{"S1": "pass", "S2": "fail"}``."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ChecklistError(
                f"--result {pair!r} is not ID=pass|fail; write e.g. --result S1=pass --result S2=fail."
            )
        out[key.strip()] = value.strip()
    return out


def record(
    story: str,
    tester: str,
    results: Mapping[str, str],
    notes: str = "",
    *,
    folder: Path | None = None,
    scenario_notes: Mapping[str, str] | None = None,
) -> Path:
    """Append one recorded run to ``results/<story>.jsonl`` beside the checklist; returns that file."""
    where = checklists_folder(folder)
    checklist = load(story, where)
    if not tester.strip():
        raise ChecklistError("tester is empty; give --tester NAME (who ran the checklist).")
    ordered = check_results(checklist, results)
    extra = {k: v.strip() for k, v in (scenario_notes or {}).items() if v and v.strip()}
    unknown = [k for k in extra if k not in checklist.ids]
    if unknown:
        raise ChecklistError(
            f"note for scenario {', '.join(unknown)} unknown in {checklist.path.name}; known: "
            f"{', '.join(checklist.ids)}."
        )
    line: dict[str, Any] = {
        "timestamp": iso(),
        "tester": tester.strip(),
        "story": story,
        "results": ordered,
        "notes": notes.strip(),
        "commit": commit(where),
    }
    if extra:
        line["scenario_notes"] = extra
    out = where / RESULTS / f"{story}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    return out


def runs(story: str, folder: Path) -> list[dict[str, Any]]:
    """The recorded runs of a story, oldest first (lines that are not JSON objects are skipped)."""
    path = folder / RESULTS / f"{story}.jsonl"
    if not path.is_file():
        return []
    out = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            run = json.loads(text)
        except ValueError:
            continue
        if isinstance(run, dict):
            out.append(run)
    return out


def complete(checklist: Checklist, run: Mapping[str, Any]) -> bool:
    """Whether this run passes every scenario of the checklist as it is now."""
    results = run.get("results") or {}
    return bool(checklist.ids) and all(results.get(sid) == "pass" for sid in checklist.ids)


def overview(folder: Path) -> list[dict[str, Any]]:
    """Per story: title, scenario ids, number of runs, the last run, and the run that completed it, if any."""
    rows = []
    for story in stories(folder):
        checklist = parse(folder / f"{story}.md")
        recorded = runs(story, folder)
        done = next((r for r in reversed(recorded) if complete(checklist, r)), None)
        rows.append(
            {
                "story": story,
                "title": checklist.title,
                "scenarios": checklist.ids,
                "runs": len(recorded),
                "last_run": recorded[-1] if recorded else None,
                "complete": done is not None,
                "completed_by": None if done is None else {k: done.get(k) for k in ("timestamp", "tester", "commit")},
            }
        )
    return rows

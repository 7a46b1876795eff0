"""Branch coverage per package of agentloom, from the data `pytest --cov` left in .coverage.

Prints a Markdown table (the one in README's "Tests" section): per package, statements and
branches covered. Coverage says what ran, not what was checked; the mutation score
(MUTATION.md) is the measure of the tests' strength.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import coverage


def package_of(path: str) -> str:
    parts = Path(path).parts
    inside = parts[parts.index("agentloom") + 1 :] if "agentloom" in parts else parts
    if len(inside) <= 1:
        return "agentloom (top level)"
    depth = 2 if inside[0] == "packs" and len(inside) > 2 else 1
    return "/".join(inside[:depth])


def main() -> int:
    cov = coverage.Coverage()
    cov.load()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "coverage.json"
        cov.json_report(outfile=str(out), ignore_errors=True)
        files = json.loads(out.read_text())["files"]
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for path, data in files.items():
        summary = data["summary"]
        row = totals[package_of(path)]
        row[0] += summary["covered_lines"]
        row[1] += summary["num_statements"]
        row[2] += summary.get("covered_branches", 0)
        row[3] += summary.get("num_branches", 0)
    print("| package | statements | branches |")
    print("|---|---|---|")
    for name, (lines, statements, branches, all_branches) in sorted(totals.items()):
        if not statements:
            continue
        shown_branches = f"{branches / all_branches:.0%} of {all_branches}" if all_branches else "-"
        print(f"| {name} | {lines / statements:.0%} of {statements} | {shown_branches} |")
    lines = sum(r[0] for r in totals.values())
    statements = sum(r[1] for r in totals.values())
    branches = sum(r[2] for r in totals.values())
    all_branches = sum(r[3] for r in totals.values())
    print(
        f"| **all** | **{lines / statements:.0%}** of {statements} | **{branches / all_branches:.0%}** of "
        f"{all_branches} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

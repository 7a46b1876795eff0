"""`python -m benchmarks mutation`: mutation testing (mutmut 3) of the modules where a silent bug
costs most, each against the tests that should catch it; writes MUTATION.md.

Each group runs in its own scratch copy of ``src``, ``tests`` and ``pyproject.toml`` (mutmut
mutates a copy under ``mutants/`` and keeps its state beside it) with a ``[tool.mutmut]`` table
naming the modules and the tests. mutmut runs, for each mutant, only the tests that reached the
mutated function. Tests that drive a module through a child process (``agentloom stitch serve``,
``agentloom serve``) cannot reach it in mutmut's sense: such functions count as "no tests".

Too slow for CI (under an hour on 2 cores, most of it the skills and Flowise catalog groups); after changing a named
module, run its group alone:
``MUTATION_GROUPS=stitch python -m benchmarks mutation`` (the other groups keep their sections).
``MUTATION_KEEP=DIR`` keeps each group's copy in ``DIR/<group>`` (``mutmut show NAME`` there shows a
survivor's change); otherwise the copies are deleted. With ``MUTATION_RETEST=1`` as well, a group
with a kept copy runs only its survivors again, against the current tests (minutes instead of half an
hour, after adding tests; right only when tests were added, not changed). ``MUTATION_COUNT=1`` instead
writes a kept copy's section as it stands, for a run stopped before its end (its "not checked" mutants said).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from benchmarks.equivalent_mutants import EQUIVALENT
from benchmarks.report import ROOT, machine

REPORT = ROOT / "MUTATION.md"
MUTMUT = str(Path(sys.executable).with_name("mutmut"))
GOAL = 0.90
_RAM = Path("/dev/shm")


@dataclass(frozen=True)
class Group:
    name: str
    modules: tuple[str, ...]  # under src/
    tests: tuple[str, ...]
    # "forkserver" where the tests use ChromaDB or LanceDB: ChromaDB's Rust client, started in mutmut's parent
    # by the timing run, hangs in every forked child on its first write (each mutant would time out), and
    # LanceDB's background loop crashes a forked child now and then (a mutant counted as a segfault).
    isolation: str = "fork"
    # Tests left out of the group: end-to-end checks of quality that each take tens of seconds and would run for
    # every mutant they reach (their logic is covered by the group's unit tests).
    deselect: tuple[str, ...] = ()
    # Seconds a mutant's test run may take beyond its tests' own time (mutmut's timeout_constant): a forked child
    # first loads what the timing run had loaded already (the skills group: two embedding models), and mutmut
    # limits the child's CPU time as well, so too small a value turns slow starts into false "timeouts".
    setup_seconds: float = 1.0


GROUPS = (
    Group(
        "circuit breakers",
        ("agentloom/core/breakers.py",),
        ("tests/core/test_breakers.py", "tests/core/test_dependency.py"),
    ),
    Group(
        "packs' argument validation and error path",
        ("agentloom/server/calls.py", "agentloom/server/messages.py"),
        (
            "tests/server/test_pack_interface.py",
            "tests/server/test_toolcache.py",
            "tests/server/test_messages.py",
            "tests/server/test_calls.py",
        ),
        "forkserver",
    ),
    Group(
        "Stitch graph checks and signing",
        ("agentloom/stitch/graph.py", "agentloom/stitch/signing.py"),
        ("tests/stitch/test_graph.py", "tests/stitch/test_graph_rules.py", "tests/stitch/test_signing.py"),
    ),
    Group(
        "Stitch execution",
        ("agentloom/stitch/execution.py",),
        ("tests/stitch/test_execution.py", "tests/stitch/test_properties.py", "tests/stitch/test_groupcommit.py"),
    ),
    Group(
        "vectors chunker and id scheme",
        ("agentloom/packs/vectors/chunking.py", "agentloom/packs/vectors/records.py"),
        (
            "tests/packs/vectors/test_chunking.py",
            "tests/packs/vectors/test_store.py",
            "tests/packs/vectors/test_model_window.py",
        ),
        "forkserver",
    ),
    Group(
        "docs path resolution and git-source safety",
        (
            "agentloom/packs/docs/config.py",
            "agentloom/packs/docs/content/safefs.py",
            "agentloom/packs/docs/content/repository.py",
        ),
        ("tests/packs/docs/test_config.py", "tests/packs/docs/test_content.py", "tests/security/test_docs_content.py"),
    ),
    Group(
        "skills thresholds, fallback, change detection",
        ("agentloom/packs/skills/search.py", "agentloom/packs/skills/scan.py", "agentloom/packs/skills/keywords.py"),
        ("tests/packs/skills",),
        "forkserver",
        ("tests/packs/skills/test_search.py::test_eval_set_top1_in_both_languages",),
        setup_seconds=20.0,
    ),
    Group(
        "Flowise build_flow validation",
        ("agentloom/packs/flowise/builder.py",),
        (
            "tests/packs/flowise/test_builder.py",
            "tests/packs/flowise/test_planner.py",
            "tests/packs/flowise/test_flowdata.py",
            "tests/packs/flowise/test_tools.py",
        ),
        "forkserver",
    ),
    # Apart from build_flow: nearly every catalog test refreshes (its texts embedded once per run:
    # tests/mutation_run.py).
    Group(
        "Flowise catalog refresh",
        ("agentloom/packs/flowise/catalog.py",),
        ("tests/packs/flowise/test_catalog.py", "tests/packs/flowise/test_builder.py"),
        "forkserver",
    ),
)

# A section's first run, "; 16.1 min; measured 2026-11-27 01:11 UTC on c82817b": minutes, then when and where.
_FIRST_RUN = re.compile(r"; ([\d.]+) min; measured ([^.,]+ on \w+)")
_RESULT = re.compile(r"^\s*(agentloom\.[\w.]+?)\.(?:x\u01c1[^:]*|[A-Za-z_]\w*?)__mutmut_\d+: (.+)$")


def _toml_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def _copy_tests(workdir: Path) -> None:
    shutil.rmtree(workdir / "tests", ignore_errors=True)
    shutil.copytree(ROOT / "tests", workdir / "tests", ignore=shutil.ignore_patterns("__pycache__", "node_modules"))


def run_group(
    group: Group,
    workdir: Path,
    retest: bool = False,
    count: bool = False,
) -> tuple[dict[str, Counter[str]], list[str], float]:
    """Per module: mutants by status; the survivors' names; seconds taken. With ``retest``, ``workdir``
    holds an earlier run of the group: the tests are copied afresh and only its survivors run again
    (right when tests were only added since: a killed mutant stays killed). With ``count``, that run
    (stopped) is counted as it stands: nothing runs."""
    # Property tests run a quarter of their examples (tests/conftest.py: examples); a skip is no failure here.
    env = {**{k: v for k, v in os.environ.items() if k != "CI"}, "AGENTLOOM_MUTATION": "1"}
    names: list[str] = []
    if retest:
        _copy_tests(workdir)
        (workdir / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)  # which tests reach which function, again
        names = _survivors(_results(workdir, env))
    elif not count:
        shutil.copytree(ROOT / "src", workdir / "src", ignore=shutil.ignore_patterns("__pycache__", "console_dist"))
        _copy_tests(workdir)
        shutil.copytree(ROOT / "benchmarks", workdir / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
        (workdir / "pyproject.toml").write_text(_config(group))
    started = time.monotonic()
    if not count and (names or not retest):
        # The tests' temporary folders on a RAM disk where there is one: each skills test makes a SQLite registry
        # and a LanceDB table, whose fsyncs cost more than their work (the skills tests: 30 s on disk, 18 s here).
        with tempfile.TemporaryDirectory(prefix="agentloom-mutation-", dir=_RAM if _RAM.is_dir() else None) as tmp:
            subprocess.run(
                [MUTMUT, "run", "--max-children", str(os.cpu_count() or 2), *names],
                cwd=workdir,
                env={**env, "TMPDIR": tmp},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
    seconds = time.monotonic() - started
    return _count(group, _results(workdir, env)) + (seconds,)


def _config(group: Group) -> str:
    return (
        (ROOT / "pyproject.toml").read_text()
        + (
            "\n[tool.mutmut]\n"
            'source_paths = ["src"]\n'
            'also_copy = ["benchmarks"]\n'  # a skills test reads its evaluation set there
            f"only_mutate = {_toml_list(tuple('src/' + m for m in group.modules))}\n"
            f"pytest_add_cli_args_test_selection = {_toml_list(group.tests)}\n"
            f'process_isolation = "{group.isolation}"\n'
            # -x: a killed mutant stops at its first failing test. SQLite only: the PostgreSQL variants
            # run the same logic at several times the cost per mutant.
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x", "-p", "no:cov", "-k", "not postgresql"'
            + "".join(f', "--deselect", "{test}"' for test in group.deselect)
            + "]\n"
            # A mutant that makes a loop endless is stopped after (the tests' usual time + setup_seconds) x 5, not
            # mutmut's
            # x 15: the chunker's loops alone have dozens of such mutants, a minute each at x 15.
            "timeout_multiplier = 5.0\n"
            f"timeout_constant = {group.setup_seconds}\n"
        )
    )


def _results(workdir: Path, env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Every mutant's name: (module, mutmut's status)."""
    listed = subprocess.run(
        [MUTMUT, "results", "--all", "true"], cwd=workdir, env=env, capture_output=True, text=True, check=False
    ).stdout
    found = {}
    for line in listed.splitlines():
        match = _RESULT.match(line)
        if match:
            found[line.strip().split(":")[0]] = (match.group(1), match.group(2).strip())
    return found


def _survivors(results: dict[str, tuple[str, str]]) -> list[str]:
    return [name for name, (_, status) in results.items() if status == "survived" and name not in EQUIVALENT]


def _count(group: Group, results: dict[str, tuple[str, str]]) -> tuple[dict[str, Counter[str]], list[str]]:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for name, (module, status) in results.items():
        counts[module]["equivalent" if status == "survived" and name in EQUIVALENT else status] += 1
    # An entry of EQUIVALENT that names no mutant (the code moved) or one a test killed was judged wrong:
    # say so rather than count it.
    prefixes = tuple(m.removesuffix(".py").replace("/", ".") + ".x" for m in group.modules)
    for name in EQUIVALENT:
        status = results.get(name, ("", "not a mutant any more"))[1]
        if name.startswith(prefixes) and status != "survived":
            print(
                f"EQUIVALENT names {name}, which is {status}: check its reason and remove the entry",
                file=sys.stderr,
                flush=True,
            )
    return counts, _survivors(results)


def _row(module: str, c: Counter[str]) -> str:
    killed, survived, timeout, equivalent = c["killed"], c["survived"], c["timeout"], c["equivalent"]
    untested, unchecked = c["no tests"], c["not checked"]
    total = sum(c.values())
    other = total - killed - survived - timeout - untested - equivalent - unchecked
    decided = total - unchecked - equivalent  # a stopped run: the score of the mutants it reached
    score = (killed + timeout) / decided if decided > 0 else 0.0  # mutmut's own score
    mark = f"partial: run stopped, {unchecked} not checked" if unchecked else "met" if score >= GOAL else "not met"
    return (
        f"| `{module}` | {total} | {killed} | {survived} | {equivalent} | {timeout} | {untested} | {other} | "
        f"**{score:.0%}** ({mark}) |"
    )


def _commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()


def _write(sections: list[str], version: str, seconds: float, groups: int) -> None:
    done = "" if len(sections) == groups else f" ({len(sections)} of {groups} groups measured)"
    whole = sum(float(m.group(1)) for m in _FIRST_RUN.finditer("".join(sections)))  # first runs, not re-tests
    header = (
        "# Mutation testing\n\n"
        f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}\n"
        f"- machine: {machine()}\n"
        f"- commit: {_commit()} (each group says when and on which commit it was measured)\n"
        f"- command: `python -m benchmarks mutation` ({version}; this run {seconds / 60:.0f} min{done}; the groups' "
        f"times below add up to {whole:.0f} min); "
        "`MUTATION_GROUPS=word[,word]` runs only the groups whose names contain a word\n"
        f"- goal: at least {GOAL:.0%} of each named module's mutants killed. A mutant that makes the tests run "
        'past their time limit (an endless loop) counts as killed, as in mutmut\'s own score. "No tests": no selected '
        "test "
        "reached the function in the test process (code run only inside a spawned server counts here). "
        "Tests run on SQLite only, property tests with a quarter of their examples, a mutant's tests fastest "
        "first, each text embedded once per run and the heap frozen before the tests (`tests/mutation_run.py`). "
        '"Other": mutants '
        "mutmut reports as segfault or suspicious (neither killed nor survived). Equivalent survivors (they "
        "behave as the original) are listed with their reasons:\n\n"
        + "".join(f"  - `{name}`: {why}\n" for name, why in EQUIVALENT.items())
        + "\n"
    )
    REPORT.write_text(header + "\n".join(sections))


def _earlier_sections() -> dict[str, str]:
    """The groups' sections of the MUTATION.md there is, by group name."""
    if not REPORT.exists():
        return {}
    parts = REPORT.read_text().split("\n### ")[1:]
    return {part.split("\n", 1)[0]: "### " + part.rstrip("\n") + "\n" for part in parts}


def main() -> None:
    """All groups, or those whose names contain a word of ``MUTATION_GROUPS`` (comma-separated);
    the other groups keep their sections of the last report, each with its own date and commit."""
    wanted = [w.strip().lower() for w in os.environ.get("MUTATION_GROUPS", "").split(",") if w.strip()]
    chosen = [g for g in GROUPS if not wanted or any(w in g.name.lower() for w in wanted)]
    if not chosen:
        sys.exit(
            f"MUTATION_GROUPS={os.environ['MUTATION_GROUPS']!r} names no group; groups: "
            f"{'; '.join(g.name for g in GROUPS)}"
        )
    version = subprocess.run([MUTMUT, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    measured: dict[str, str] = {}
    started = time.monotonic()
    keep = os.environ.get("MUTATION_KEEP")
    retest = os.environ.get("MUTATION_RETEST") == "1"
    count = os.environ.get("MUTATION_COUNT") == "1"
    if (retest or count) and not keep:
        sys.exit(
            "MUTATION_RETEST=1 and MUTATION_COUNT=1 read the copies MUTATION_KEEP kept: set MUTATION_KEEP to that "
            "folder"
        )
    earlier = _earlier_sections()
    for group in chosen:
        now = f"{dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')} on {_commit()}"
        if keep:  # the group's copy stays, for `mutmut show NAME` there
            workdir = Path(keep) / re.sub(r"\W+", "-", group.name.lower()).strip("-")
            again = (retest or count) and (workdir / "mutants").is_dir()
            if count and not again:
                sys.exit(f"MUTATION_COUNT=1: {workdir} holds no run of {group.name!r} to count")
            if not again:
                shutil.rmtree(workdir, ignore_errors=True)
            counts, survivors, seconds = run_group(group, workdir, retest=again and retest, count=again and count)
        else:
            again = False
            with tempfile.TemporaryDirectory(prefix="agentloom-mutation-") as tmp:
                counts, survivors, seconds = run_group(group, Path(tmp))
        print(f"{group.name}: {dict(counts)} in {seconds:.0f} s", file=sys.stderr, flush=True)
        if not (count and again) and all(set(c) == {"not checked"} for c in counts.values()):
            print(
                f"{group.name}: mutmut checked no mutant, most likely because a test failed on the unmutated code; "
                f"`mutmut run` in the group's copy (MUTATION_KEEP) shows which",
                file=sys.stderr,
                flush=True,
            )
        rows = "\n".join(_row(m, c) for m, c in sorted(counts.items()))
        shown = "\n".join(f"- `{s}`" for s in survivors) or "- none"
        if again and count:
            when = (
                f"run stopped before its end, counted {now}; its survivors as it left them (tests added since may "
                "kill some: `MUTATION_RETEST=1` re-tests them)"
            )
        elif again:  # the first run's time and date stay; the re-test is said after them
            first = _FIRST_RUN.search(earlier.get(group.name, ""))
            when = (
                f"{first.group(1) + ' min' if first else '?'}; measured {first.group(2) if first else '?'}, its "
                "survivors "
                f"re-tested {now} ({seconds / 60:.1f} min)"
            )
        else:
            when = f"{seconds / 60:.1f} min; measured {now}"
        measured[group.name] = (
            f"### {group.name}\n\nTests: {', '.join(f'`{t}`' for t in group.tests)}"
            f"{''.join(f' but `{t}`' for t in group.deselect)}; {when}.\n\n"
            "| module | mutants | killed | survived | equivalent | timed out | no tests | other | killed or timed out, "
            "of all but equivalent |\n"
            f"|---|---|---|---|---|---|---|---|---|\n{rows}\n\nSurvivors (`mutmut show NAME` in the group's copy, kept "
            "with `MUTATION_KEEP`, shows the "
            f"change):\n\n{shown}\n"
        )
        # After each group: a stopped run keeps its results. The other groups' sections are read again
        # now, so two runs of different groups side by side keep each other's results.
        sections = {**(_earlier_sections() if wanted else {}), **measured}
        _write(
            [sections[g.name] for g in GROUPS if g.name in sections], version, time.monotonic() - started, len(GROUPS)
        )
    print(f"wrote {REPORT}", file=sys.stderr)


if __name__ == "__main__":
    main()

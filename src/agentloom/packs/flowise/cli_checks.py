"""`agentloom flowise check` and `agentloom flowise checklist ...`: validating the pack, on demand and by hand.

``check_cmd`` runs the critical paths against the configured Flowise and says, step by step, what
passed and why something failed, so a person can trust a setup without reading
test code: dependency health, a catalog refresh, node search relevance on the evaluation set
(> 90 % top-3), every marketplace chatflow built by template id and deleted again (≥ 95 %), and the
breaker's transitions (all of them). The breaker is exercised on a private breaker with a test
clock, its failures against a closed loopback port: a check must never open the real breaker or
load the user's server with failing calls. ``checklist_app`` records manual runs of the checklists
in ``docs/checklists`` (see ``checklists.py``). ``cli.py`` mounts both under ``agentloom flowise``.
"""

from __future__ import annotations

import getpass
import json
import logging
import re
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentloom.core.errors import AgentloomError
from agentloom.packs.flowise import checklists
from agentloom.packs.flowise.tools import pack
from agentloom.terminal.common import AsJson, DataDir, fail, open_pack
from agentloom.terminal.help import SuggestingGroup

if TYPE_CHECKING:
    from agentloom.packs.flowise.tools import Flowise

SEARCH_GOAL = 0.90  # top-3 rate must exceed this
BUILD_GOAL = 0.95  # share of marketplace chatflows created
_ROOT = checklists.repo_root()
NEEDS: Path | None = _ROOT / "benchmarks" / "data" / "flowise_node_needs.json" if _ROOT else None
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

ChecklistsOpt = Annotated[
    Path | None,
    typer.Option(
        "--checklists", metavar="DIR", help="The checklists folder (default: docs/checklists of this checkout)."
    ),
]


@dataclass
class Step:
    name: str
    status: str  # pass, fail or skip
    detail: str
    details: list[str] = field(default_factory=list)
    measures: dict[str, Any] = field(default_factory=dict)


# -- the steps ---------------------------------------------------------------------------
def _health(state: Flowise) -> Step:
    """Flowise answers, the API key works, the pack's ChromaDB opens."""
    url, good, bad = state.settings.url, [], []
    problem = state.client.ping()
    if problem:
        bad.append(f"Flowise at {url} {problem}")
    else:
        try:
            good.append(f"Flowise {state.client.version() or '(version unknown)'} at {url} answers")
            if state.settings.api_key is None:
                bad.append(
                    "no API key set: create one in Flowise (Settings → API Keys), set AGENTLOOM_FLOWISE__API_KEY"
                )
            else:
                good.append(f"API key accepted ({len(state.client.list_chatflows())} chatflows)")
        except AgentloomError as exc:
            bad.append(str(exc))
    chroma = state.chroma
    try:
        client = chroma.client()
        chroma.call(client.heartbeat)
        good.append(f"ChromaDB ({chroma.where}) answers")
    except Exception as exc:
        bad.append(f"ChromaDB ({chroma.where}) cannot be opened: {exc}")
    breaker = state.client.dependency.breaker
    if breaker is not None:
        good.append(f"breaker flowise {breaker.status().state.value}")
    return Step("health", "fail" if bad else "pass", "; ".join(bad or good), good if bad else [])


def _refresh(state: Flowise) -> Step:
    started = time.perf_counter()
    result = state.catalog.refresh(force=True)
    seconds = time.perf_counter() - started
    measures = {
        k: result[k] for k in ("nodes", "deprecated", "templates", "new", "updated", "removed", "server_version")
    }
    if result["stale"]:
        return Step("refresh", "fail", str(result["message"]), measures=measures)
    if not result["nodes"] or not result["templates"]:
        return Step(
            "refresh",
            "fail",
            f"Flowise listed {result['nodes']} nodes and {result['templates']} chatflow "
            "templates; check AGENTLOOM_FLOWISE__NODES_PATH and __TEMPLATES_PATH",
            measures=measures,
        )
    return Step(
        "refresh",
        "pass",
        f"{result['nodes']} nodes ({result['deprecated']} deprecated), {result['templates']} "
        f"templates from Flowise {result['server_version']} in {seconds:.1f} s ({result['new']} new, "
        f"{result['updated']} updated, {result['removed']} removed)",
        measures=measures,
    )


def _search(state: Flowise) -> Step:
    """Top-3 relevance on the evaluation set the benchmark uses (``benchmarks/flowise.py``)."""
    if NEEDS is None or not NEEDS.is_file():
        return Step(
            "search",
            "fail",
            "evaluation set missing: benchmarks/data/flowise_node_needs.json comes with an "
            "agentloom checkout, not the installed package; run the check from a checkout",
        )
    catalog = state.catalog.state().nodes
    if not catalog:
        return Step("search", "fail", "no node catalog to search: the refresh failed (see above)")
    needs = json.loads(NEEDS.read_text(encoding="utf-8"))["needs"]
    top1 = top3 = absent = 0
    misses = []
    for need in needs:
        expected = {need["expected"], *need.get("also", [])}
        names = [h["name"] for h in state.catalog.search_nodes(need["need"], None, 5)]
        top1 += bool(names and names[0] in expected)
        top3 += bool(expected & set(names[:3]))
        absent += not expected & set(catalog)
        if not expected & set(names[:3]):
            misses.append(f"{need['need']!r} → {need['expected']} (got {', '.join(names[:3]) or 'nothing'})")
    n = len(needs)
    rate = top3 / n if n else 0.0
    lacking = f"; {absent} needs expect nodes this server lacks" if absent else ""
    detail = f"top-3 {top3}/{n} ({rate:.1%}), goal > {SEARCH_GOAL:.0%}; top-1 {top1}/{n}{lacking}"
    return Step(
        "search",
        "pass" if rate > SEARCH_GOAL else "fail",
        detail,
        [f"missed: {m}" for m in misses],
        {"needs": n, "top1": top1, "top3": top3, "top3_rate": round(rate, 4)},
    )


def _build(state: Flowise) -> Step:
    """Every marketplace chatflow by template id: created in Flowise, then deleted again."""
    templates = sorted(state.catalog.state().templates.values(), key=lambda t: t.name)
    if not templates:
        return Step("build", "fail", "no chatflow templates in the catalog: the refresh failed or Flowise lists none")
    builder, created, problems, notes = state.builder, 0, [], []
    for template in templates:
        try:
            reply = builder.build(
                template_id=template.template_id,
                nodes=None,
                name=f"agentloom check: {template.name}",
                model=None,
                temperature=None,
                memory_type=None,
            )
        except AgentloomError as exc:
            problems.append(f"{template.template_id}: {exc}")
            continue
        try:
            state.client.delete_chatflow(reply["chatflow_id"])
        except AgentloomError as exc:
            problems.append(
                f"{template.template_id}: created as {reply['chatflow_id']} but not deleted ({exc}); "
                "delete it with flowise_delete_chatflow"
            )
            continue
        created += 1
        if reply.get("issues"):
            notes.append(f"note: {template.template_id}: Flowise reports {'; '.join(reply['issues'])}")
    n = len(templates)
    rate = created / n
    return Step(
        "build",
        "pass" if rate >= BUILD_GOAL else "fail",
        f"{created}/{n} marketplace chatflows created and deleted ({rate:.0%}), goal ≥ {BUILD_GOAL:.0%}",
        problems + notes,
        {"templates": n, "created": created, "rate": round(rate, 4)},
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Transitions(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _closed_port() -> int:
    """A loopback port nobody listens on: taken from the system, then released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _breaker(state: Flowise, threshold: int, timeout: float) -> Step:
    """The breaker's transitions, on a private breaker with a test clock."""
    from agentloom.core.breakers import BreakerRegistry, CircuitOpenError, State
    from agentloom.core.dependency import first_line
    from agentloom.core.errors import DependencyUnavailable
    from agentloom.packs.flowise.client import BREAKER, FlowiseClient
    from agentloom.packs.flowise.settings import FlowiseSettings
    from agentloom.packs.flowise.tokens import tokens

    clock, checks = _Clock(), []
    registry = BreakerRegistry(threshold, timeout, clock)
    dead = FlowiseClient(FlowiseSettings(url=f"http://127.0.0.1:{_closed_port()}", timeout_seconds=5), registry)
    real = FlowiseClient(state.settings.model_copy(update={"timeout_seconds": 10}), registry)
    breaker = registry.get(BREAKER)

    def expect(
        label: str,
        wanted: State,
        failures: int | None = None,
        raised: BaseException | None = None,
        problem: str | None = None,
    ) -> None:
        status = breaker.status()
        wrong = (
            problem is not None or status.state is not wanted or (failures is not None and status.failures != failures)
        )
        seen = f"breaker {status.state.value} with {status.failures} failures" + (
            f" after {type(raised).__name__}: {first_line(raised)}" if raised else ""
        )
        checks.append((label, f"{problem + '; ' if problem else ''}{seen}" if wrong else None))

    def call(fn: Callable[[], object]) -> BaseException | None:
        try:
            fn()
        except Exception as exc:
            return exc
        return None

    def outage(raised: BaseException | None) -> str | None:
        if isinstance(raised, DependencyUnavailable) and not isinstance(raised, CircuitOpenError):
            return None
        return f"expected an unreachable error, got {type(raised).__name__ if raised else 'a success'}"

    log, handler = logging.getLogger("agentloom.core.breakers"), _Transitions()
    saved = (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # the transitions are the check's evidence, not the terminal's
    try:
        expect("starts closed", State.CLOSED, 0)
        for _ in range(threshold):  # an unknown chatflow id: 404 (401/403 with a bad key), all the caller's fault
            raised = call(lambda: real.get_chatflow(str(uuid.uuid4())))
            if not isinstance(raised, AgentloomError) or isinstance(raised, DependencyUnavailable):
                break
        refused = (
            None
            if isinstance(raised, AgentloomError) and not isinstance(raised, DependencyUnavailable)
            else (
                "the configured server did not answer with a 4xx "
                f"({type(raised).__name__ if raised else 'it succeeded'})"
            )
        )
        expect(f"{threshold} 4xx answers of the configured server not counted", State.CLOSED, 0, raised, refused)
        problems = [outage(call(dead.version)) for _ in range(threshold - 1)]
        expect(
            f"{threshold - 1} failures keep it closed",
            State.CLOSED,
            threshold - 1,
            problem=next((p for p in problems if p), None),
        )
        raised = call(dead.version)
        expect(
            f"closed → open after {threshold} consecutive failures", State.OPEN, raised=raised, problem=outage(raised)
        )
        blocked = call(dead.version)
        short = (
            isinstance(blocked, CircuitOpenError) and tokens(str(blocked)) < 50 and f"{timeout:.0f}s" in str(blocked)
        )
        expect(
            "open: calls refused at once, under 50 tokens, with the retry time",
            State.OPEN,
            raised=blocked,
            problem=None if short else f"got {type(blocked).__name__ if blocked else 'a call through'}",
        )
        clock.now += timeout - 1
        expect("still open 1 s before the timeout", State.OPEN)
        clock.now += 1
        expect(f"open → half-open after {timeout:.0f} s", State.HALF_OPEN)
        raised = call(dead.version)
        expect("half-open → open when the trial fails", State.OPEN, raised=raised, problem=outage(raised))
        clock.now += timeout
        expect(
            "half-open → closed when the trial succeeds (the configured server)",
            State.CLOSED,
            0,
            raised=call(real.version),
        )
        for _ in range(threshold):
            call(dead.version)
        breaker.reset()
        expect("manual reset closes an open breaker", State.CLOSED, 0)
        moves = [line for line in handler.lines if " -> " in line]
        logged = len(moves) == 7 and all(_TIMESTAMP.search(line) for line in moves)
        checks.append(("every transition logged with its time", None if logged else f"log: {moves}"))
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]
        dead.close()
        real.close()
    wrong = [f"{label}: {seen}" for label, seen in checks if seen]
    n = len(checks)
    return Step(
        "breaker",
        "fail" if wrong else "pass",
        f"{n - len(wrong)}/{n} transitions correct (threshold {threshold}, open {timeout:.0f} s; private "
        "breaker, test clock)",
        wrong,
        {"checks": n, "correct": n - len(wrong)},
    )


# -- the command -------------------------------------------------------------------------
def check_cmd(
    data_dir: DataDir = None,
    as_json: AsJson = False,
    skip_build: Annotated[
        bool, typer.Option("--skip-build", help="Leave out building every marketplace chatflow (the slowest step).")
    ] = False,
) -> None:
    """Check the critical paths against the configured Flowise: health, catalog refresh, node search
    relevance (> 90 % top-3), build_flow over the marketplace chatflows (≥ 95 %), breaker transitions.
    Chatflows it creates are deleted again. Exits 1 when a step fails."""
    state = open_pack(pack, data_dir)
    configured = state.client.dependency.breaker  # the registry the pack's setup got, built from the settings
    assert configured is not None
    if not as_json:
        typer.echo(f"Flowise check against {state.settings.url}")
    steps: list[Step] = []
    plan: list[tuple[str, Callable[[], Step]]] = [
        ("health", lambda: _health(state)),
        ("refresh", lambda: _refresh(state)),
        ("search", lambda: _search(state)),
        ("build", lambda: Step("build", "skip", "--skip-build") if skip_build else _build(state)),
        ("breaker", lambda: _breaker(state, configured.failure_threshold, configured.reset_timeout)),
    ]
    for name, run in plan:
        if name == "build" and not skip_build and not as_json:
            typer.echo("  (building every marketplace chatflow: a few minutes)", err=True)
        try:
            step = run()
        except AgentloomError as exc:
            step = Step(name, "fail", str(exc))
        except Exception as exc:
            step = Step(name, "fail", f"{type(exc).__name__}: {exc}")
        steps.append(step)
        if not as_json:
            typer.echo(f"{step.status.upper():<5} {step.name:<8} {step.detail}")
            for line in step.details:
                typer.echo(f"        {line}")
    failed = [s.name for s in steps if s.status == "fail"]
    if as_json:
        typer.echo(
            json.dumps(
                {"url": state.settings.url, "passed": not failed, "steps": [asdict(s) for s in steps]},
                ensure_ascii=False,
            )
        )
    else:
        counts = {k: sum(s.status == k for s in steps) for k in ("pass", "fail", "skip")}
        typer.echo(
            f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"
            + (f" ({', '.join(failed)})" if failed else "")
        )
    if failed:
        raise typer.Exit(1)


# -- checklists --------------------------------------------------------------------------
checklist_app = typer.Typer(
    cls=SuggestingGroup,
    help="Manual test checklists of the flowise pack (docs/checklists): list, record a run.",
    no_args_is_help=True,
)


def _login() -> str:
    """The login name as the default tester; some containers have none, and then --tester is needed."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return ""


def _ask(question: str) -> str:
    while True:
        answer = str(typer.prompt(question)).strip().lower()
        if answer in checklists.OUTCOMES:
            return answer
        typer.echo("answer pass or fail", err=True)


def _folder(explicit: Path | None) -> Path:
    try:
        return checklists.checklists_folder(explicit)
    except AgentloomError as exc:
        fail(str(exc), code=2)


@checklist_app.command("list")
def list_cmd(checklists_dir: ChecklistsOpt = None, as_json: AsJson = False) -> None:
    """Each story's checklist: its scenarios, and its last recorded run (complete when every scenario passed)."""
    rows = checklists.overview(_folder(checklists_dir))
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False))
        return
    for row in rows:
        last = row["last_run"]
        seen = (
            "never run"
            if last is None
            else (
                f"last run {last.get('timestamp')} by {last.get('tester')}: "
                f"{sum(v == 'pass' for v in (last.get('results') or {}).values())}/{len(row['scenarios'])} pass"
            )
        )
        state = "complete" if row["complete"] else "not complete"
        typer.echo(f"{row['story']:<20} {len(row['scenarios']):>2} scenarios  {state:<12}  {seen}")


@checklist_app.command("record")
def record_cmd(
    story: Annotated[str, typer.Argument(help="The story, a checklist's file name without .md (e.g. search).")],
    tester: Annotated[
        str | None, typer.Option("--tester", metavar="NAME", help="Who ran it (default: your login name).")
    ] = None,
    result: Annotated[
        list[str] | None,
        typer.Option(
            "--result",
            metavar="ID=pass|fail",
            help="ID=pass|fail, once per scenario; without any, each scenario is asked for.",
        ),
    ] = None,
    notes: Annotated[str | None, typer.Option("--notes", help="Notes on the run.")] = None,
    checklists_dir: ChecklistsOpt = None,
) -> None:
    """Record a manual run of a checklist: timestamp, tester, pass/fail per scenario, notes, commit."""
    folder = _folder(checklists_dir)
    try:
        checklist = checklists.load(story, folder)
        scenario_notes: dict[str, str] = {}
        if result:
            results = checklists.check_results(checklist, checklists.parse_pairs(result))
        else:
            tester = tester or typer.prompt("Tester", default=_login() or None)
            results = {}
            for scenario in checklist.scenarios:
                results[scenario.id] = _ask(f"{scenario.id}. {scenario.title} [pass/fail]")
                scenario_notes[scenario.id] = typer.prompt(
                    f"{scenario.id} actual result or note (Enter: none)", default="", show_default=False
                )
            if notes is None:
                notes = typer.prompt("Notes on the run (Enter: none)", default="", show_default=False)
        path = checklists.record(
            story, tester or _login(), results, notes or "", folder=folder, scenario_notes=scenario_notes
        )
    except AgentloomError as exc:
        fail(str(exc), code=2)
    passed = sum(v == "pass" for v in results.values())
    total = len(checklist.ids)
    if len(results) == total and passed == total:
        verdict = "story complete: every scenario passed"
    else:
        missing = [sid for sid in checklist.ids if results.get(sid) != "pass"]
        verdict = f"story not complete ({', '.join(missing)} not passed)"
    typer.echo(f"{len(results)} of {total} scenarios recorded ({passed} pass) in {path}; {verdict}")

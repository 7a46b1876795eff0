"""Tests assert behaviour, never speed, and wait on events, never on a fixed sleep.

A busy machine stretches every wall-clock time, so a test that asserts one fails for reasons
that are not the code's; speed is measured in benchmarks/ and reported in BENCHMARKS.md. This
reads every test module (their syntax, with ``ast``) and fails on:

(a) a ``time.sleep`` / ``asyncio.sleep`` / ``anyio.sleep`` outside a loop waiting on a condition
    (a ``while`` loop, or a ``for`` loop that breaks or returns when its condition holds): a
    fixed sleep bets that something happened meanwhile; wait on the event itself instead, with
    a deadline only a hang reaches. ``sleep(0)`` (yield to the event loop) waits for no time.
(b) an ``assert`` comparing a measured duration or a speed figure: a clock reading minus
    another (``time.monotonic() - started``), a name holding one (``elapsed``), or a name
    such as ``took``, ``latency``, ``p95`` or ``ratio``. Bracketing a timestamp
    between two clock readings (``before <= stamp <= time.time()``) and a poll loop's
    ``time.monotonic() < deadline`` compare no duration and pass.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).parent

# (path under tests/, function): why its sleep is not a bet on something happening meanwhile.
# Only fakes that stand in for a slow party: the sleep is the slowness the test is about, and
# the test waits on what the fake does (its answer, its callback), not on the sleep.
ALLOWED_SLEEPS = {
    ("stitch/worker.py", "_work"): "mode 'slow': the worker answers the webhook late, as a slow worker does",
    ("stitch/worker.py", "_answer"): "mode 'late': the worker calls back late; tests wait on the callback",
    ("stitch/test_delivery.py", "handle"): "a worker that holds each request: the hold is what is counted",
    ("embeddings/conftest.py", "do_POST"): "a provider that answers late, to test the client's timeout",
}

SLEEPERS = {"time", "asyncio", "anyio", "trio"}
CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
# Words of a name (split at "_") that say it holds a duration or a speed figure.
SPEED_WORDS = {
    "elapsed",
    "took",
    "duration",
    "durations",
    "latency",
    "latencies",
    "p50",
    "p90",
    "p95",
    "p99",
    "percentile",
    "median",
    "ratio",
    "speedup",
    "wall",
    "fps",
}


def modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "node_modules" not in p.parts)


def is_sleep(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sleep"):
        return False
    if not (isinstance(node.func.value, ast.Name) and node.func.value.id in SLEEPERS):
        return False
    return not (node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0)


def is_clock(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCKS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "time"
    )


def waits_on_a_condition(loop: ast.AST) -> bool:
    if isinstance(loop, ast.While):
        return True
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return any(isinstance(n, (ast.Break, ast.Return)) for n in ast.walk(loop))
    return False


def words(node: ast.AST) -> set[str]:
    """The words of the names in ``node``: ``READ_P95_MS`` -> read, p95, ms; ``x["took"]`` -> took."""
    found: set[str] = set()
    for n in ast.walk(node):
        name = (
            n.id
            if isinstance(n, ast.Name)
            else n.attr
            if isinstance(n, ast.Attribute)
            else n.value
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier()
            else None
        )
        if name:
            found |= {w.lower() for w in re.split(r"_+", name) if w}
    return found


class Function:
    """One function's sleeps and asserts, with the names it assigns clock readings and durations to."""

    def __init__(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.node = node
        self.own = [n for n in ast.walk(node) if PARENT_FUNCTION.get(n, n) is node]
        self.readings: set[str] = set()  # started = time.monotonic(); deadline = time.monotonic() + 60
        self.durations: set[str] = set()  # elapsed = time.monotonic() - started
        for n in self.own:
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                bare = [t for target in targets for t in [target, *getattr(target, "elts", [])]]
                names = {t.id for t in bare if isinstance(t, ast.Name)}
                if any(self.is_duration(v) or self.holds(v, self.durations) for v in ast.walk(n.value)):
                    self.durations |= names
                elif any(is_clock(v) for v in ast.walk(n.value)):
                    self.readings |= names

    @staticmethod
    def holds(node: ast.AST, names: set[str]) -> bool:
        return isinstance(node, ast.Name) and node.id in names

    def is_duration(self, node: ast.AST) -> bool:
        """One instant minus another: a clock reading (or a name holding one) on one side, and on the
        other a reading or a value (a call, a key, an attribute). ``time.time() - 30`` is an instant."""
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
            return False

        def timed(side: ast.AST) -> bool:
            return any(is_clock(n) or self.holds(n, self.readings | self.durations) for n in ast.walk(side))

        def valued(side: ast.AST) -> bool:
            return timed(side) or any(isinstance(n, (ast.Call, ast.Subscript, ast.Attribute)) for n in ast.walk(side))

        return (timed(node.left) and valued(node.right)) or (timed(node.right) and valued(node.left))

    def duration_asserts(self) -> list[ast.Assert]:
        found = []
        for n in self.own:
            if isinstance(n, ast.Assert) and any(
                self.is_duration(m) or self.holds(m, self.durations) or words(c) & SPEED_WORDS
                for c in ast.walk(n.test)
                if isinstance(c, ast.Compare)
                for m in ast.walk(c)
            ):
                found.append(n)
        return found

    def bare_sleeps(self) -> list[ast.Call]:
        found = []
        for n in self.own:
            if isinstance(n, ast.Call) and is_sleep(n):
                above, looped = PARENT.get(n), False
                while above is not None and above is not self.node:
                    looped = looped or waits_on_a_condition(above)
                    above = PARENT.get(above)
                if not looped:
                    found.append(n)
        return found


PARENT: dict[ast.AST, ast.AST] = {}
PARENT_FUNCTION: dict[ast.AST, ast.AST] = {}


def index(tree: ast.AST) -> list[Function]:
    PARENT.clear()
    PARENT_FUNCTION.clear()
    functions = []

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            PARENT[child] = node
            if function is not None:
                PARENT_FUNCTION[child] = function
            visit(child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function)

    visit(tree, None)
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(Function(n))
    return functions


def problems(path: Path, source: str) -> list[str]:
    where = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else path.name
    found = []
    for function in index(ast.parse(source)):
        name = function.node.name
        if (where, name) not in ALLOWED_SLEEPS:
            for call in function.bare_sleeps():
                found.append(f"{where}:{call.lineno} {name}: fixed sleep `{ast.unparse(call)}`; wait on the event")
        for statement in function.duration_asserts():
            found.append(
                f"{where}:{statement.lineno} {name}: asserts a duration or speed "
                f"`{ast.unparse(statement.test)[:100]}`; speed belongs in benchmarks/"
            )
    return found


def test_no_test_sleeps_on_a_bet_or_asserts_a_speed() -> None:
    found = [line for path in modules() for line in problems(path, path.read_text(encoding="utf-8"))]
    assert found == [], "\n".join(found)


def test_the_allowed_sleeps_still_exist() -> None:
    """An entry whose function has gone, or sleeps no more, is removed rather than kept as a blank cheque."""
    stale = []
    for where, name in ALLOWED_SLEEPS:
        functions = index(ast.parse((TESTS / where).read_text(encoding="utf-8")))
        if not any(f.node.name == name and any(is_sleep(n) for n in f.own) for f in functions):
            stale.append((where, name))
    assert stale == []


def test_the_check_sees_what_it_is_for() -> None:
    bad = """
import time, asyncio, anyio

def test_bets():
    start_something()
    time.sleep(1.2)
    assert done()

async def test_bets_async():
    await asyncio.sleep(0.3)
    await anyio.sleep(3)

def test_speed():
    started = time.monotonic()
    work()
    elapsed = time.monotonic() - started
    assert elapsed < 5.0
    assert time.perf_counter() - started < 1.0
    took = time.monotonic() - started
    assert took <= 2 * 1.5
    assert p95(latencies) <= READ_P95_MS
    assert ratio >= 0.8
"""
    found = problems(Path("bad.py"), bad)
    assert [line.split(" ", 1)[0] for line in found] == [f"bad.py:{n}" for n in (6, 10, 11, 17, 18, 20, 21, 22)]

    good = """
import time, asyncio

def test_waits_on_the_event():
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, "never done"
        time.sleep(0.05)
    for _ in range(30):
        if accepted():
            break
        time.sleep(1)
    before = time.time()
    stamp = make()
    assert before <= stamp <= time.time()

async def test_yields():
    await asyncio.sleep(0)
"""
    assert problems(Path("good.py"), good) == []

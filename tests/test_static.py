"""Every ``type: ignore`` in src/ names its error code and says why on the same line."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)$")
EXPLAINED = re.compile(r"^\[[-a-z, ]+\]\s+#\s*\S")


def unexplained(text: str) -> list[int]:
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        match = IGNORE.search(line)
        if match and not EXPLAINED.match(match.group("rest")):
            lines.append(number)
    return lines


def test_every_type_ignore_says_why() -> None:
    found = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        for number in unexplained(path.read_text(encoding="utf-8"))
    ]
    assert not found, "type: ignore without a code and a reason on the same line:\n" + "\n".join(found)


def test_the_check_tells_explained_from_bare() -> None:
    assert unexplained("x = f()  # type: ignore[arg-type]  # the stub is wrong\n") == []
    assert unexplained("x = f()  # type: ignore\n") == [1]
    assert unexplained("x = f()  # type: ignore[arg-type]\n") == [1]

"""Which git URLs a config may name.

A URL is handed to ``git`` as an argument, so it must never be readable as an option
(``--upload-pack=...``) or as a remote helper command (``ext::sh -c ...``).
"""

from __future__ import annotations

import re

SCHEMES = ("https://", "http://", "ssh://", "git://", "file://")
SCP_LIKE = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!//)[^\s]+")
ACCEPTED = "https://host/owner/repo.git, ssh://git@host/owner/repo.git, git@host:owner/repo.git or file:///path/to/repo"


def url_problem(url: str) -> str | None:
    """Why ``url`` is refused, or None when it is a URL we may pass to git."""
    if not url or not url.strip():
        return f"is empty; give a repository URL such as {ACCEPTED}"
    if "::" in url.split("/", 1)[0] or url.lower().startswith("ext:"):
        return f"{url!r} uses a git remote helper ('<transport>::'), which can run commands; use {ACCEPTED}"
    if url != url.strip() or any(ch.isspace() or ord(ch) < 32 for ch in url):
        return f"{url!r} contains whitespace or control characters"
    if url.startswith("-"):
        return f"{url!r} starts with '-' and would be read by git as an option"
    lower = url.lower()
    for scheme in SCHEMES:
        if lower.startswith(scheme):
            rest = url[len(scheme) :]
            if scheme != "file://" and not rest.split("/", 1)[0]:
                return f"{url!r} has no host"
            if scheme == "file://" and not rest.startswith("/"):
                return f"{url!r} must be an absolute file URL such as file:///path/to/repo"
            return None
    if SCP_LIKE.fullmatch(url):
        return None
    return f"{url!r} is not a git URL we accept; use {ACCEPTED}"

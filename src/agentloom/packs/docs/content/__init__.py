"""The content loader: the one place that fetches, selects and copies documentation files.

The CLI (and any future caller) hands it a docset and shows what it returns.
"""

from agentloom.packs.docs.content.fetch import (
    DocsetResult,
    Progress,
    SourceResult,
    SourceStatus,
    docset_status,
    ensure_gitignore,
    load_docset,
)
from agentloom.packs.docs.content.repository import GitRepoLoader, SourceError

__all__ = [
    "DocsetResult",
    "GitRepoLoader",
    "Progress",
    "SourceError",
    "SourceResult",
    "SourceStatus",
    "docset_status",
    "ensure_gitignore",
    "load_docset",
]

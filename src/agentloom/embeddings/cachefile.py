"""Model files in the cache: named by what they are made from, written beside their final name.

A file's name carries a fingerprint of its source file (path, size, mtime) and of the code that
made it, so new weights or a new builder mean a new file. A crash or a failed check part-way
never leaves a half-written model where the next start would load it; the temporary file is
removed on every way out.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentloom.core.errors import DependencyUnavailable


def cache_path(source: Path, label: str, cache_dir: Path, version: str, suffix: str) -> Path:
    """``<cache_dir>/models/<label>-<fingerprint><suffix>`` for a file made from ``source`` by ``version``."""
    st = source.stat()
    blob = f"{source.resolve()}|{st.st_size}|{st.st_mtime_ns}|{version}"
    fingerprint = hashlib.sha256(blob.encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", label) or "model"
    return Path(cache_dir) / "models" / f"{name}-{fingerprint}{suffix}"


@contextmanager
def written_atomically(out: Path, what: str) -> Iterator[Path]:
    """A temporary path beside ``out`` to write ``what`` to; it becomes ``out`` if the block succeeds."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise DependencyUnavailable(
            f"cannot write {what} to {out.parent}: {exc}. "
            "Fix: make it writable or point AGENTLOOM_CACHE_DIR at a writable folder."
        ) from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        # mkstemp creates 0600; a shared cache file should follow the umask like any other file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)

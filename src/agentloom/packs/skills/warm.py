"""A copy of what a search reads from LanceDB, beside the store, so a new process can search without LanceDB.

``agentloom skills search`` is a new process each time. Importing LanceDB and pyarrow and
opening the tables costs it about 2 s of CPU (measured on 2 cores, 51 skills), for data that
has not changed since the last search: the skills' names, descriptions, paths, the scoring
model's vectors and the side models' vectors, in the order a search uses them.

So a search that opened the store itself writes that data to ``<folder>/skills.warm.npz``
(uncompressed: a memory copy), stamped with the state of the store: every file under the
``_versions`` folders of the store's tables (name, size, mtime). Any write to a table (a scan,
a model switch, a rank sync, a compaction) adds or removes such a file, so the stamp differs and
the copy is ignored until a search has read the store again. A copy is written only when the
stamp was the same before and after the search read the store (nothing wrote meanwhile), and is
used only while the models that made its vectors (key and fingerprint, from the registry) are
still the ones configured. Search results from the copy are the same as from the store.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("agentloom.packs.skills")

FILE = "skills.warm.npz"
FORMAT = 2


def warm_path(store: Path) -> Path:
    """``<folder>/skills.warm.npz`` for the store ``<folder>/skills.lance``."""
    return store.parent / FILE


def stamp(store: Path) -> list[list[Any]] | None:
    """The state of the store's tables: (table, file, size, mtime_ns) of every version file; None if unreadable."""
    out: list[list[Any]] = []
    try:
        with os.scandir(store) as tables:
            names = sorted(entry.name for entry in tables if entry.is_dir())
        for table in names:
            versions = store / table / "_versions"
            if not versions.is_dir():
                continue
            with os.scandir(versions) as files:
                for entry in sorted(files, key=lambda e: e.name):
                    st = entry.stat()
                    out.append([table, entry.name, st.st_size, st.st_mtime_ns])
    except OSError:
        return None
    return out or None


@dataclass(frozen=True)
class Warm:
    """What a search needs, as read from the store at ``stamp``."""

    stamp: list[list[Any]]
    model: tuple[str, str]  # (key, fingerprint) of the scoring model that made ``vectors``
    sides: dict[str, tuple[str, str]]  # role -> (key, fingerprint) of each side model in use (search.py)
    names: list[str]
    descriptions: list[str]
    paths: list[str]
    vectors: np.ndarray
    side_vectors: dict[str, np.ndarray]  # role -> that model's vectors, rows in the order of ``names``


def load(store: Path, current: list[list[Any]] | None) -> Warm | None:
    """The copy beside ``store`` if it was made at the stamp ``current``, else None."""
    path = warm_path(store)
    if current is None or not path.is_file():
        return None
    try:
        import numpy as np

        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("format") != FORMAT or meta.get("stamp") != current:
                return None
            sides = {role: (key, fingerprint) for role, (key, fingerprint) in meta["sides"].items()}
            return Warm(
                stamp=current,
                model=(meta["model"][0], meta["model"][1]),
                sides=sides,
                names=meta["names"],
                descriptions=meta["descriptions"],
                paths=meta["paths"],
                vectors=data["vectors"],
                side_vectors={role: data[f"side_{role}"] for role in sides},
            )
    except Exception as exc:
        log.debug("skills: %s cannot be read (%s); searching the store", path, exc)
        return None


def save(store: Path, warm: Warm) -> None:
    """Write the copy atomically; a failure is logged at debug level (the copy only saves time)."""
    import numpy as np

    from agentloom.embeddings.cachefile import written_atomically

    meta = {
        "format": FORMAT,
        "stamp": warm.stamp,
        "model": list(warm.model),
        "sides": {role: list(model) for role, model in warm.sides.items()},
        "names": warm.names,
        "descriptions": warm.descriptions,
        "paths": warm.paths,
    }
    header = np.array(json.dumps(meta, ensure_ascii=False))
    try:
        with written_atomically(warm_path(store), "the skills search copy") as tmp, tmp.open("wb") as out:
            arrays = {"meta": header, "vectors": warm.vectors}
            arrays.update({f"side_{role}": vectors for role, vectors in warm.side_vectors.items()})
            np.savez(out, allow_pickle=False, **arrays)
    except Exception as exc:
        log.debug("skills: cannot write %s (%s)", warm_path(store), exc)

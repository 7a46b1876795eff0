"""Work done once, on a model's first use, said out loud: one INFO line on stderr, and progress.

A cache miss (an ONNX graph to build, a multilingual model's weights to decode into the cache)
costs seconds to tens of seconds, once per machine. :func:`building` announces it when it starts
(what is built, why, where it is kept, about how long it takes) and when it ends, through the
``agentloom.embeddings.firstuse`` logger at INFO and through the caller's ``progress`` callback
(the embedding service forwards it, e.g. as MCP progress; see ``EmbeddingService.progress``).

The logger says INFO even where the root logger is set to WARNING (``agentloom doctor``), and a
command that configured no logging at all (the packs' CLI commands) still gets the line on stderr:
a silent 20-second pause is what this module exists to avoid.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("agentloom.embeddings.firstuse")
log.setLevel(logging.INFO)

Progress = Callable[[str], None]


def _stderr_if_unconfigured() -> None:
    """A stderr handler on this logger when nobody configured logging (a CLI command)."""
    if logging.getLogger().handlers or log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)


def say(message: str, progress: Progress | None) -> None:
    """Log ``message`` at INFO and hand it to ``progress``; a failing callback never stops the build."""
    _stderr_if_unconfigured()
    log.info("%s", message)
    if progress is not None:
        try:
            progress(message)
        except Exception:
            log.debug("progress callback failed", exc_info=True)


@contextmanager
def building(what: str, why: str, where: object, about: str, progress: Progress | None = None) -> Iterator[Progress]:
    """Announce a first-use build of ``what``; yields the callback the builder reports its steps to.

    ``why``: the reason it is built now ("first use"); ``where``: the cache path it is kept at;
    ``about``: the expected duration on a 2-core machine ("about 20 s").
    """
    started = time.monotonic()
    say(f"building {what} ({why}; cached in {where}, {about})", progress)

    def step(message: str) -> None:
        if progress is not None:
            try:
                progress(message)
            except Exception:
                log.debug("progress callback failed", exc_info=True)

    yield step
    say(f"built {what} in {time.monotonic() - started:.1f} s", progress)

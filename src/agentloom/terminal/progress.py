"""Long work on the command line: a progress bar on stderr while it runs, Ctrl-C to stop it.

The work runs in a thread as the current :class:`~agentloom.core.work.Work` (the same work the
MCP tools run), and the main thread draws what it reports. The first Ctrl-C asks the work to
stop at its next step and waits while it undoes what it started (an add leaves the collection as
it was; an index keeps what it committed and says so); a second Ctrl-C leaves at once.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from agentloom.core.work import Cancelled, Work, tracking

T = TypeVar("T")

Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar on stderr.")]

CANCELLED_EXIT = 130  # what shells report for a command stopped by Ctrl-C


def with_progress(what: str, fn: Callable[[], T], *, quiet: bool = False) -> T:
    """``fn()`` with a progress bar titled ``what`` on stderr (none when ``quiet``)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    work = Work(what)
    outcome: dict[str, object] = {}

    done = threading.Event()  # not Thread.join: a join interrupted by Ctrl-C can think the thread over

    def target() -> None:
        try:
            with tracking(work):
                outcome["result"] = fn()
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,), name=what, daemon=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True, disable=quiet) as bar:
        task = bar.add_task(what, total=None)
        thread.start()
        try:
            while not done.wait(0.1):
                report = work.latest()
                if report is not None:
                    bar.update(
                        task,
                        completed=report.done,
                        total=report.total,
                        description=f"{what}: {report.message}" if report.message else what,
                    )
        except KeyboardInterrupt:
            work.cancel(f"{what}: cancelled (Ctrl-C)")
            bar.update(task, description=f"{what}: stopping (Ctrl-C again to leave at once)")
            try:
                while not done.wait(0.1):
                    pass
            except KeyboardInterrupt:
                typer.echo(f"{what}: left without waiting; the next run cleans up", err=True)
                raise typer.Exit(CANCELLED_EXIT) from None
    error = outcome.get("error")
    if isinstance(error, Cancelled):
        typer.echo(str(error), err=True)
        raise typer.Exit(CANCELLED_EXIT)
    if isinstance(error, BaseException):
        raise error
    return outcome["result"]  # type: ignore[return-value]  # set by the worker to what fn returned

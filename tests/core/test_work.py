"""core.work: what long work reports, and how it is stopped (pure, no threads needed but for one test)."""

from __future__ import annotations

import contextvars
import threading

import pytest

from agentloom.core.work import Cancelled, Work, count, current, current_step, tracking


def test_steps_are_recorded_with_the_time_and_the_last_one_wins() -> None:
    now = iter([1.0, 2.5, 4.0])
    work = Work("adding", clock=lambda: next(now))
    assert work.latest() is None
    work.step(10, 100, "embedded 10")
    work.step(20, 100, "embedded 20")
    report = work.latest()
    assert report is not None and (report.done, report.total, report.message, report.at) == (
        20,
        100,
        "embedded 20",
        2.5,
    )
    work.note("building the model")  # keeps the count
    report = work.latest()
    assert report is not None and (report.done, report.total, report.message, report.at) == (
        20,
        100,
        "building the model",
        4.0,
    )


def test_a_note_before_any_step_has_no_count() -> None:
    work = Work()
    work.note("listing files")
    report = work.latest()
    assert report is not None and (report.done, report.total) == (0, None)


def test_a_cancelled_work_stops_at_its_next_step_with_the_reason() -> None:
    work = Work("indexing")
    work.step(1, 2)
    assert not work.cancelled
    work.cancel("indexing: cancelled by the client")
    assert work.cancelled
    with pytest.raises(Cancelled, match="^indexing: cancelled by the client$"):
        work.step(2, 2)
    assert work.latest().done == 2  # recorded, then stopped
    with pytest.raises(Cancelled):
        work.check()


def test_without_a_reason_the_message_names_the_work() -> None:
    work = Work("skills_index")
    work.cancel()
    with pytest.raises(Cancelled, match="^skills_index was cancelled$"):
        work.check()
    anonymous = Work()
    anonymous.cancel()
    with pytest.raises(Cancelled, match="^the work was cancelled$"):
        anonymous.check()


def test_an_interruptible_call_is_interrupted_by_a_cancel_and_only_while_it_runs() -> None:
    work = Work()
    calls: list[str] = []
    with work.interruptible(lambda: calls.append("inside")):
        work.cancel()
    assert calls == ["inside"]
    with work.interruptible(lambda: calls.append("already")):  # cancelled before the call: interrupted at once
        pass
    assert calls == ["inside", "already"]
    work.cancel()
    assert calls == ["inside", "already"]  # the blocks are over: nothing more is called


def test_current_work_is_the_tracked_one_in_this_thread_and_its_copies() -> None:
    outside = current()
    outside.cancel()
    assert current() is not outside  # outside tracked work, each caller gets its own unwatched work
    current().check()
    work = Work("tracked")
    seen: list[Work] = []
    with tracking(work):
        assert current() is work
        current_step(3, 4, "three")

        thread = threading.Thread(target=contextvars.copy_context().run, args=(lambda: seen.append(current()),))
        thread.start()
        thread.join()
    assert seen == [work]
    assert current() is not work
    assert work.latest().message == "three"  # type: ignore[union-attr]  # a step was recorded just above


def test_counts_are_written_as_people_write_them() -> None:
    assert (count(1200), count(3), count(3.5), count(1_234_567.0)) == ("1,200", "3", "3.5", "1,234,567")

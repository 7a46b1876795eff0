"""A small server-sent events reader for the tests: a real HTTP stream, read on a thread."""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

import httpx


class SseReader:
    """Reads ``url``'s event stream into a queue until closed; ``messages`` has the ones read."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, params: dict[str, Any] | None = None) -> None:
        self.url, self.headers, self.params = url, headers or {}, params or {}
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.status: int | None = None
        self.content_type: str | None = None
        self.comments = 0
        self._ready = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> SseReader:
        self._thread.start()
        assert self._ready.wait(30), "the stream did not answer in 30 s"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True

    def _read(self) -> None:
        try:
            with httpx.stream(
                "GET", self.url, headers=self.headers, params=self.params, timeout=httpx.Timeout(30, read=60)
            ) as response:
                self.status, self.content_type = response.status_code, response.headers.get("content-type")
                self._ready.set()
                fields: dict[str, str] = {}
                for line in response.iter_lines():
                    if self._stop:
                        return
                    if line.startswith(":"):
                        self.comments += 1
                    elif line == "":
                        if "data" in fields:
                            self.queue.put(
                                {
                                    "event": fields.get("event", "message"),
                                    "id": fields.get("id"),
                                    "data": json.loads(fields["data"]),
                                }
                            )
                        fields = {}
                    else:
                        name, _, value = line.partition(":")
                        fields[name] = value.removeprefix(" ")
        except httpx.HTTPError:
            pass
        finally:
            self._ready.set()

    def take(self, count: int, timeout: float = 20) -> list[dict[str, Any]]:
        """The next ``count`` messages; fails when they do not come within ``timeout``."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            try:
                got.append(self.queue.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"{len(got)} of {count} messages within {timeout} s: {got}") from None
        return got

    def until(self, predicate: Any, timeout: float = 20) -> list[dict[str, Any]]:
        """Messages up to and including the first for which ``predicate(message)`` holds."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no matching message within {timeout} s; got {got}") from None
            got.append(message)
            if predicate(message):
                return got

    def until_keepalive(self, timeout: float = 60) -> list[dict[str, Any]]:
        """Whatever arrives before the server's next keep-alive comment (to check that nothing more
        comes): the server sends a stream's messages as it has them and the comment only when it has
        had none for ``live.KEEPALIVE`` seconds, so a message it meant to send would come first."""
        seen = self.comments
        deadline = time.monotonic() + timeout
        while self.comments == seen:
            assert time.monotonic() < deadline, f"no keep-alive comment within {timeout} s"
            time.sleep(0.05)
        got = []
        while not self.queue.empty():
            got.append(self.queue.get_nowait())
        return got

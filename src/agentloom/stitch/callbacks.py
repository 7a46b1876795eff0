"""The worker callback: what it means (:class:`Callbacks`, the one implementation), and its
fast path, the one request every completion makes, answered below the framework.

A callback is signed for its run, node path and attempt; it is committed with the other
callbacks waiting at that moment (:mod:`groupcommit`), and the webhooks it leads to are sent
once that commit is done. The documented route in :mod:`api` and the fast path both answer
through :meth:`Callbacks.receive`.

A callback through FastAPI costs more CPU than the whole database transaction it leads to
(routing over every route, the middleware stack, dependency solving, body model). This
ASGI layer answers the common case itself: a POST to ``/api/stitch/callback/{run}/{node}``
whose query is exactly ``attempt`` (a number) and ``sig``, whose signature is right and
whose body is valid Stitch JSON for :class:`models.Callback`; its event is committed with the
other callbacks waiting at that moment (:mod:`groupcommit`). It answers exactly as the
documented route in :mod:`api` would. Anything else (a bad signature, a bad body, an
unknown parameter, a database error) is handed to that route with the body replayed, so
every refusal is made in one place. It sits inside the body size limit, so oversized
bodies are refused before it reads them.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import parse_qsl

from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentloom.stitch import metrics
from agentloom.stitch.dispatcher import Dispatcher
from agentloom.stitch.engine import Engine
from agentloom.stitch.execution import Result
from agentloom.stitch.groupcommit import GroupCommit
from agentloom.stitch.middleware import CALLBACK_PREFIX
from agentloom.stitch.models import Callback
from agentloom.stitch.values import BadJson, decode

NOT_SIGNED = "callback URL is not signed by this server: post to the callbackUrl you were given, unchanged"
_HEADERS = [(b"content-type", b"application/json")]


class NotSigned(Exception):
    """The callback URL's signature does not match: not a URL this server gave out."""

    def __init__(self) -> None:
        super().__init__(NOT_SIGNED)


class Callbacks:
    """What a worker's callback means, for the route and the fast path alike."""

    def __init__(self, engine: Engine, commits: GroupCommit, dispatcher: Dispatcher) -> None:
        self.engine = engine
        self.commits = commits
        self.dispatcher = dispatcher

    async def receive(self, run_id: str, key: str, attempt: int, sig: str, callback: Callback) -> Result:
        """Apply the callback of ``attempt`` of node path ``key``; returns once it is committed
        and its webhooks are on their way. Raises :class:`NotSigned` for a URL this server did
        not sign, and the database's error when the commit failed (nothing of it was kept)."""
        if not self.engine.signer.verify(run_id, key, attempt, sig):
            raise NotSigned
        started = time.perf_counter()
        result, sendings = await self.commits.callback(
            run_id, key, attempt, callback.status, callback.output, callback.error
        )
        metrics.callback_handled(result.outcome.name.lower(), time.perf_counter() - started)
        self.dispatcher.submit(sendings)
        return result


class CallbackFastPath:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith(CALLBACK_PREFIX):
            await self.app(scope, receive, send)
            return
        body = await _read(receive)
        answered = await self._answer(scope, body, send)
        if not answered:
            await self.app(scope, _replay(body, receive), send)

    async def _answer(self, scope: Scope, body: bytes, send: Send) -> bool:
        """Answer the common case; False leaves the request to the documented route."""
        segments = scope["path"][len(CALLBACK_PREFIX) :].split("/")
        query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        params = dict(query)
        if len(segments) != 2 or not all(segments) or len(query) != 2 or params.keys() != {"attempt", "sig"}:
            return False
        run_id, key = segments
        attempt = params["attempt"]
        if not attempt.isascii() or not attempt.isdigit():
            return False
        try:
            callback = Callback.model_validate(decode(body))
        except (BadJson, ValidationError):
            return False
        callbacks: Callbacks = scope["app"].state.callbacks
        try:
            result = await callbacks.receive(run_id, key, int(attempt), params["sig"], callback)
        except NotSigned:
            return False
        except (DBAPIError, PoolTimeout):
            return False  # rolled back: the documented route tries once more and answers the failure
        payload = json.dumps(result.reply(), ensure_ascii=False, separators=(",", ":")).encode()
        await send(
            {
                "type": "http.response.start",
                "status": result.outcome.http_status,
                "headers": [*_HEADERS, (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})
        return True


async def _read(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Any:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: a disconnect, as the server reports it

    return replay

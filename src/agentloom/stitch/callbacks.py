"""The worker callback's fast path: the one request every completion makes, answered below
the framework.

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
from typing import Any
from urllib.parse import parse_qsl

from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentloom.stitch.middleware import PREFIX
from agentloom.stitch.models import Callback
from agentloom.stitch.values import BadJson, decode

CALLBACK_PREFIX = f"{PREFIX}/callback/"
_HEADERS = [(b"content-type", b"application/json")]


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
        state = scope["app"].state
        engine = state.engine
        if (
            not attempt.isascii()
            or not attempt.isdigit()
            or not engine.signer.verify(run_id, key, int(attempt), params["sig"])
        ):
            return False
        try:
            callback = Callback.model_validate(decode(body))
        except (BadJson, ValidationError):
            return False
        try:
            result, sendings = await state.commits.callback(
                run_id, key, int(attempt), callback.status, callback.output, callback.error
            )
        except (DBAPIError, PoolTimeout):
            return False  # rolled back: the documented route tries once more and answers the failure
        state.dispatcher.submit(sendings)
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

"""The Flowise REST API, each call guarded by the ``flowise`` circuit breaker.

Only the server's own failures count towards opening the breaker: no
connection, a timeout, a 5xx answer. A refused key (401/403), a missing chatflow (404)
or another 4xx is the caller's problem and becomes an error naming the fix, uncounted.
A page of HTML where JSON was expected means a wrong path setting (Flowise answers its
UI for unknown paths such as ``/api/v1/nodes-list``), also uncounted.
"""

from __future__ import annotations

import json
import re
import threading
from typing import TYPE_CHECKING, Any

from agentloom.core.breakers import BreakerRegistry, DependencyFailure
from agentloom.core.dependency import Dependency, caused_by
from agentloom.core.errors import AgentloomError, ConfigError, NotFoundError
from agentloom.packs.flowise.settings import FlowiseSettings

if TYPE_CHECKING:
    import httpx

BREAKER = "flowise"
JsonValue = Any  # whatever an endpoint answers: any JSON value, or None for an empty body


class FlowiseServerError(DependencyFailure):
    """A 5xx answer: the server's failure, counted by the breaker."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class PermissionRefused(ConfigError):
    """The API key lacks a permission one call needs (credentials:view, say); the rest still works."""


class FlowiseFlowError(AgentloomError):
    """A prediction that Flowise answered with its own error (a 500 with ``{message}``): the chatflow's fault (a
    missing credential, a model that refused), not the server's, so the breaker does not count it."""

    def __init__(self, reason: str) -> None:
        # Flowise prefixes where it failed: "Error: predictionsServices.buildChatflow - Error: ..."
        reason = re.sub(r"^(Error: )?\w+\.\w+ - ", "", reason)
        super().__init__(f"Flowise could not run it: {reason}")
        self.reason = reason


class FlowiseClient:
    def __init__(self, settings: FlowiseSettings, breakers: BreakerRegistry) -> None:
        self.settings = settings
        self.url = settings.url
        self.dependency = Dependency(
            BREAKER, breakers.get(BREAKER), is_failure=_is_transport_error, describe=self._describe
        )
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    # -- the API ---------------------------------------------------------------------
    def version(self) -> str | None:
        answer = self._json("GET", "/api/v1/version")
        return str(answer.get("version")) if isinstance(answer, dict) and answer.get("version") else None

    def nodes(self) -> list[dict[str, Any]]:
        return self._list("GET", self.settings.nodes_path, "AGENTLOOM_FLOWISE__NODES_PATH")

    def templates(self) -> list[dict[str, Any]]:
        return self._list("GET", self.settings.templates_path, "AGENTLOOM_FLOWISE__TEMPLATES_PATH")

    def create_chatflow(self, name: str, flow_data: dict[str, Any]) -> dict[str, Any]:
        body = {
            "name": name,
            "flowData": json.dumps(flow_data),
            "type": "CHATFLOW",
            "deployed": False,
            "isPublic": False,
        }
        return self._object("POST", "/api/v1/chatflows", json=body)

    def list_chatflows(self) -> list[dict[str, Any]]:
        return self._list("GET", "/api/v1/chatflows", None, params={"type": "CHATFLOW"})

    def get_chatflow(self, chatflow_id: str) -> dict[str, Any]:
        return self._object("GET", f"/api/v1/chatflows/{chatflow_id}")

    def delete_chatflow(self, chatflow_id: str) -> None:
        self._json("DELETE", f"/api/v1/chatflows/{chatflow_id}")

    def update_chatflow(self, chatflow_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """``changes``: ``name`` and/or ``flow_data`` (a dict, sent as Flowise's JSON string)."""
        body: dict[str, Any] = {}
        if "name" in changes:
            body["name"] = changes["name"]
        if "flow_data" in changes:
            body["flowData"] = json.dumps(changes["flow_data"])
        return self._object("PUT", f"/api/v1/chatflows/{chatflow_id}", json=body)

    def validation(self, chatflow_id: str) -> list[dict[str, Any]]:
        return self._list("GET", f"/api/v1/validation/{chatflow_id}", None)

    def credentials(self) -> list[dict[str, Any]]:
        """The user's credentials as Flowise lists them: id, name, credentialName, dates (never the secret)."""
        return self._list("GET", "/api/v1/credentials", None, permission="credentials:view")

    def predict(self, chatflow_id: str, question: str, session_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"question": question, "streaming": False}
        if session_id:
            body["chatId"] = session_id  # Flowise keys a conversation's memory by its chat id
        answer = self._json(
            "POST",
            f"/api/v1/prediction/{chatflow_id}",
            json=body,
            timeout=self.settings.predict_timeout_seconds,
            flow_errors=True,
        )
        if not isinstance(answer, dict):
            return {"text": answer if isinstance(answer, str) else json.dumps(answer)}
        return answer

    def ping(self) -> str | None:
        """Whether the server answers, for health checks: None when it does, else the reason.
        Not guarded: a health probe neither waits on nor moves the breaker."""
        import httpx

        try:
            answer = self._client().get("/api/v1/ping", timeout=min(5.0, self.settings.timeout_seconds))
        except httpx.HTTPError as exc:
            return f"unreachable ({type(exc).__name__}); start it or set AGENTLOOM_FLOWISE__URL"
        return None if answer.text.strip() == "pong" else f"/api/v1/ping answered {answer.status_code}, not pong"

    def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    # -- plumbing --------------------------------------------------------------------
    def _client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                import httpx

                headers = {"Accept": "application/json"}
                if self.settings.api_key is not None:
                    headers["Authorization"] = f"Bearer {self.settings.api_key.get_secret_value()}"
                self._http = httpx.Client(base_url=self.url, headers=headers, timeout=self.settings.timeout_seconds)
            return self._http

    def _send(self, method: str, path: str, *, flow_errors: bool = False, **kwargs: Any) -> httpx.Response:
        client = self._client()

        def request() -> httpx.Response:
            response = client.request(method, path, **kwargs)
            if flow_errors and response.status_code == 500 and _flowise_error(response):
                raise FlowiseFlowError(_message(response))
            if response.status_code >= 500:
                raise FlowiseServerError(response.status_code, _message(response))
            return response

        return self.dependency.call(request)

    def _json(
        self, method: str, path: str, *, setting: str | None = None, permission: str | None = None, **kwargs: Any
    ) -> JsonValue:
        response = self._send(method, path, **kwargs)
        if response.status_code in (401, 403):
            if permission is not None and self.settings.api_key is not None:
                raise PermissionRefused(
                    f"Flowise at {self.url} refused {path} ({response.status_code}): give the API key the "
                    f"{permission} permission (Settings → API Keys)."
                )
            if self.settings.api_key is None:
                raise ConfigError(
                    f"Flowise at {self.url} needs an API key: create one in its UI (Settings → API Keys) "
                    "and set AGENTLOOM_FLOWISE__API_KEY."
                )
            raise ConfigError(
                f"Flowise at {self.url} refused the API key ({response.status_code} {_message(response)}); "
                "set AGENTLOOM_FLOWISE__API_KEY to a key with chatflows and templates permissions."
            )
        if response.status_code == 404:
            raise NotFoundError(f"Flowise: {_message(response)}")
        if response.status_code >= 400:
            raise AgentloomError(f"Flowise refused {method} {path} ({response.status_code}): {_message(response)}")
        if not response.content:
            return None
        if "json" not in response.headers.get("content-type", "json"):
            fix = f"; set {setting} to the JSON endpoint" if setting else ""
            raise ConfigError(
                f"Flowise at {self.url}{path} answered {response.headers.get('content-type')}, not JSON: "
                f"the path is not an API endpoint of this server{fix}."
            )
        try:
            return response.json()
        except ValueError:
            raise AgentloomError(f"Flowise at {self.url}{path} answered text that is not JSON.") from None

    def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """An endpoint that answers one JSON object (a chatflow); taken as Flowise sends it, unchecked."""
        answer: dict[str, Any] = self._json(method, path, **kwargs)
        return answer

    def _list(self, method: str, path: str, setting: str | None, **kwargs: Any) -> list[dict[str, Any]]:
        answer = self._json(method, path, setting=setting, **kwargs)
        if not isinstance(answer, list):
            fix = f"; check {setting}" if setting else ""
            raise AgentloomError(f"Flowise at {self.url}{path} answered {type(answer).__name__}, not a list{fix}.")
        return [item for item in answer if isinstance(item, dict)]

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, FlowiseServerError):
            return f"Flowise at {self.url} failed ({str(exc)[:80]})."
        return f"Flowise at {self.url} unreachable; start it or set AGENTLOOM_FLOWISE__URL."


def _message(response: httpx.Response) -> str:
    """Flowise's own error text ({statusCode, success, message}), else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:120] or response.reason_phrase
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])[:160]
    return str(body)[:120]


def _flowise_error(response: httpx.Response) -> bool:
    """Flowise's own error answer ``{statusCode, success: false, message}``, not a proxy's or a crash's page."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("success") is False and bool(body.get("message"))


def _is_transport_error(exc: BaseException) -> bool:
    import httpx

    return caused_by(exc, lambda e: isinstance(e, (ConnectionError, TimeoutError, httpx.TransportError)))

"""OpenAI-compatible embedding APIs (OpenAI, Azure-style gateways, vLLM, LM Studio, ...).

One ``POST {base_url}{api_endpoint}`` per batch. Every call goes through the breaker
``embeddings:<provider>``: network errors, timeouts and 5xx raise DependencyFailure (they
count); 4xx are the caller's configuration (bad key, unknown model) and never open it.
The API key is read at call time (record, else the environment variable it names) and is
never logged or put in an error message.

:class:`HTTPEmbeddingProvider` holds what the OpenAI and Ollama adapters share.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentloom.core.breakers import DependencyFailure
from agentloom.core.dependency import Dependency
from agentloom.core.errors import AgentloomError, ConfigError

if TYPE_CHECKING:
    import httpx
    import numpy as np

    from agentloom.core.breakers import BreakerRegistry
    from agentloom.embeddings.records import ModelRecord, ProviderRecord

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
DEFAULT_ENDPOINT = "/embeddings"


class HTTPEmbeddingProvider:
    """Shared plumbing: a reused sync httpx client, breaker accounting, response checks."""

    needs_key = False
    tokenizer = None  # remote models: the chunkers fall back to their own counting
    max_tokens = None

    def __init__(self, record: ModelRecord, provider_record: ProviderRecord, breakers: BreakerRegistry) -> None:
        self.record = record
        self.provider_record = provider_record
        self.dimensions = record.dimensions
        self.name = provider_record.name
        self.timeout = float(record.config.get("timeout", DEFAULT_TIMEOUT))
        self.breaker = breakers.get(f"embeddings:{provider_record.name}")
        self.dependency = Dependency(self.breaker.name, self.breaker, is_failure=lambda exc: False, describe=str)
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    # -- subclass hooks ------------------------------------------------------------------
    @property
    def url(self) -> str:
        raise NotImplementedError

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _vectors(self, body: Any, count: int) -> list[Any]:
        """Pull the list of vectors out of a decoded response body (raise ValueError if malformed)."""
        raise NotImplementedError

    def _client_error(self, status: int, detail: str) -> AgentloomError:
        if status in (401, 403):
            return AgentloomError(
                f"embedding provider {self.name!r} rejected the request (HTTP {status}): check the API key of "
                f"provider {self.name!r} (the environment variable given with --api-key-env)."
            )
        if status == 404:
            return AgentloomError(
                f"embedding provider {self.name!r} answered HTTP 404 for {self.url} ({detail}): check the "
                f"provider's base_url and the model key {self.record.key!r}."
            )
        return AgentloomError(
            f"embedding provider {self.name!r} refused the request (HTTP {status}): {detail}. "
            f"Check the model key {self.record.key!r} and its config."
        )

    # -- plumbing ------------------------------------------------------------------------
    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=self.timeout, follow_redirects=False)
            return self._client

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.provider_record.resolve_api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif self.needs_key:
            where = (
                f"the environment variable {self.provider_record.api_key_env} is empty"
                if self.provider_record.api_key_env
                else "neither api_key nor api_key_env is set"
            )
            raise ConfigError(
                f"provider {self.name!r} has no API key ({where}): set the variable, or register the provider again "
                "with `agentloom models add ... --kind openai --api-key-env VAR_NAME`."
            )
        return headers

    @staticmethod
    def _detail(response: httpx.Response) -> str:
        try:
            body = response.json()
        except ValueError:
            return response.text[:300].strip() or response.reason_phrase
        if isinstance(body, dict):
            err = body.get("error")
            if isinstance(err, dict) and err.get("message"):
                return str(err["message"])[:300]
            if isinstance(err, str):
                return err[:300]
        return str(body)[:300]

    def _post(self, client: httpx.Client, payload: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        import httpx

        try:
            response = client.post(self.url, json=payload, headers=headers, timeout=self.timeout)
        except httpx.TimeoutException as exc:
            raise DependencyFailure(
                f"embedding provider {self.name!r} timed out after {self.timeout:g}s ({self.url}); "
                "check the service, or raise the model's timeout (agentloom models add ... --timeout S)"
            ) from exc
        except httpx.TransportError as exc:
            raise DependencyFailure(
                f"embedding provider {self.name!r} is unreachable at {self.url} ({type(exc).__name__}); "
                "start the service or fix the provider's base URL"
            ) from exc
        if response.status_code >= 500:
            raise DependencyFailure(
                f"embedding provider {self.name!r} failed with HTTP {response.status_code}: {self._detail(response)}"
            )
        return response

    def prepare(self, progress: Callable[[str], None] | None = None) -> None:
        """Nothing to load for a remote model; ``check()`` in the service embeds a word instead."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        from agentloom.embeddings.providers.normalise import l2_normalise

        texts = list(texts)
        if not texts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        headers = self._headers()  # a missing key is a config error: raised before the breaker
        payload = self._payload(texts)
        client = self._http()
        # The guarded call is the request alone; reading the answer is checked outside it.
        response = self.dependency.call(lambda: self._post(client, payload, headers))
        if response.status_code >= 400:
            raise self._client_error(response.status_code, self._detail(response))
        try:
            vectors = self._vectors(response.json(), len(texts))
        except (ValueError, KeyError, TypeError) as exc:
            raise AgentloomError(
                f"embedding provider {self.name!r} sent a response that is not an embeddings answer ({exc}): "
                f"check that {self.url} is an embeddings endpoint."
            ) from None
        # Shape checks are configuration problems (wrong dimensions in the record), not outages.
        if len(vectors) != len(texts):
            raise AgentloomError(
                f"embedding provider {self.name!r} returned {len(vectors)} vectors for {len(texts)} texts: "
                "the service does not follow the embeddings API."
            )
        lengths = {len(v) for v in vectors}
        if lengths != {self.dimensions}:
            got = ", ".join(str(n) for n in sorted(lengths))
            raise ConfigError(
                f"model {self.record.key!r} of provider {self.name!r} returned {got}-dimensional vectors, "
                f"expected {self.dimensions} (the record's dimensions): register the model "
                f"again with the right --dimensions (agentloom models remove {self.record.id}, "
                "then agentloom models add)."
            )
        return l2_normalise(np.asarray(vectors, dtype=np.float32))

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.name!r}, model={self.record.key!r}, url={self.url!r})"


class OpenAIProvider(HTTPEmbeddingProvider):
    needs_key = True

    @property
    def url(self) -> str:
        base = (self.provider_record.base_url or "").rstrip("/")
        return base + str(self.record.config.get("api_endpoint", DEFAULT_ENDPOINT))

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        payload: dict[str, Any] = {"input": texts, "model": self.record.key, "encoding_format": "float"}
        if self.record.config.get("send_dimensions"):
            payload["dimensions"] = self.dimensions
        return payload

    def _vectors(self, body: Any, count: int) -> list[Any]:
        data = body["data"]
        if not isinstance(data, list):
            raise ValueError("'data' is not a list")
        # The API documents `index`; order by it rather than trusting the list order.
        items = sorted(data, key=lambda item: int(item.get("index", 0)))
        vectors = [item["embedding"] for item in items]
        for v in vectors:
            if not isinstance(v, list):
                raise ValueError("an embedding is not a list of floats (encoding_format must be 'float')")
        return vectors

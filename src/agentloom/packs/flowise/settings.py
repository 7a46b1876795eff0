"""Settings of the flowise pack: ``[pack_settings.flowise]`` or ``AGENTLOOM_FLOWISE__<KEY>``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, field_validator


class FlowiseSettings(BaseModel):
    url: str = Field("http://127.0.0.1:3000", description="The Flowise server (its address in a browser).")
    api_key: SecretStr | None = Field(
        None, description="A Flowise API key (Settings → API Keys in its UI), sent as 'Authorization: Bearer ...'."
    )
    timeout_seconds: float = Field(30.0, gt=0, description="Timeout of one Flowise API call.")
    predict_timeout_seconds: float = Field(
        120.0, gt=0, description="Timeout of one prediction (flowise_predict, flowise_test_flow): the model's time."
    )
    nodes_path: str = Field(
        "/api/v1/nodes",
        description="The catalog endpoint. Flowise 3.x serves it at /api/v1/nodes (/api/v1/nodes-list answers the "
        "UI's HTML page).",
    )
    templates_path: str = Field("/api/v1/marketplaces/templates", description="The marketplace templates endpoint.")
    catalog_max_age_hours: float = Field(
        24.0, gt=0, description="build_flow refreshes the node catalog first when it is older than this."
    )
    min_score: float = Field(
        0.2, ge=0, le=1, description="Search results scoring below this cosine similarity are left out."
    )
    chroma_path: Path | None = Field(
        None, description="The catalog's embedded ChromaDB (default <data_dir>/flowise/chroma)."
    )
    embedding_model: str | None = Field(
        None, description="Registry key of the catalog's model (default: the default model)."
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) address; write it as http://host:port")
        return value

    @field_validator("nodes_path", "templates_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} must start with '/' (a path on the Flowise server, e.g. /api/v1/nodes)")
        return value

"""Settings of the vectors pack: ``[pack_settings.vectors]`` or ``AGENTLOOM_VECTORS__<KEY>``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from agentloom.core.settings import folder_list


class VectorSettings(BaseModel):
    mode: Literal["embedded", "remote"] = Field("embedded", description="Embedded Chroma on disk, or a Chroma server.")
    path: Path | None = Field(None, description="Embedded store folder (default <data_dir>/vectors/chroma).")
    host: str = Field("127.0.0.1", description="Chroma server host (remote mode).")
    port: int = Field(8000, ge=1, le=65535, description="Chroma server port (remote mode).")
    ssl: bool = Field(False, description="Use HTTPS for the Chroma server.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers (e.g. auth) for the server.")
    timeout_seconds: float = Field(10.0, gt=0, description="Remote call timeout.")
    chunk_size: int = Field(200, ge=16, le=510, description="Target chunk size in the embedding model's tokens.")
    chunk_overlap: int = Field(30, ge=0, description="Tokens shared by consecutive chunks.")
    embedding_model: str | None = Field(None, description="Registry key of the model (default: the default model).")
    hnsw_ef_search: int = Field(
        100,
        ge=10,
        description="HNSW search breadth of new collections: higher is closer to exact search. On SciFact 100 "
        "gave the same nDCG@10 and Recall@100 as 200 (BENCHMARKS.md, Vectors).",
    )
    file_roots: list[Path] | None = Field(
        None,
        description="Folders vector_add_files may read, besides the client's MCP roots (unset: the server's "
        "working directory, unless that is the filesystem root or the home folder; [] for the client's roots only). "
        "A JSON list or paths separated by os.pathsep.",
    )
    max_text_mb: float = Field(
        20.0,
        gt=0,
        description="Largest text one call may add, in megabytes of UTF-8 (all documents of a bulk add together); "
        "vector_add_files has no such limit.",
    )
    stale_write_seconds: float = Field(
        3600.0,
        gt=0,
        description="Remote mode: an unfinished write older than this is abandoned and its chunks removed "
        "(a Chroma server may have other writers, so younger ones may still be running).",
    )

    @field_validator("headers", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """Environment variables arrive as text: AGENTLOOM_VECTORS__HEADERS='{"Authorization": "..."}'."""
        if isinstance(value, str) and value.strip().startswith("{"):
            try:
                return json.loads(value)
            except ValueError:
                raise ValueError(f"not a JSON object: {value!r}") from None
        return value

    @field_validator("file_roots", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        return folder_list(value)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> VectorSettings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size}); "
                "lower AGENTLOOM_VECTORS__CHUNK_OVERLAP"
            )
        return self

    def describe(self) -> str:
        if self.mode == "remote":
            return f"Chroma server at {'https' if self.ssl else 'http'}://{self.host}:{self.port}"
        return f"embedded Chroma at {self.path}"

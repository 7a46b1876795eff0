"""Settings of the docs pack: ``[pack_settings.docs]`` or ``AGENTLOOM_DOCS__<KEY>``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class DocsSettings(BaseModel):
    project_dir: Path | None = Field(
        None, description="Folder to search for .knowledge/config.yaml, then upward (default: the working directory)."
    )
    config_file: Path | None = Field(None, description="Use this config file instead of searching for one.")

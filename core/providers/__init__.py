"""Render requests and outcomes for the OpenAI, Anthropic and Gemini APIs.

Each wire format is one module with ``tools``, ``tool_choice``, ``result``,
``interrupted`` and ``run_step`` (a whole step's calls, each answered); every
value is a plain dict shaped as the provider SDK's typed parameters, so no SDK
is needed to import this package.
"""

from . import anthropic, gemini, openai_chat, openai_responses
from ._errors import CompatibilityError

__all__ = (
    "CompatibilityError",
    "anthropic",
    "gemini",
    "openai_chat",
    "openai_responses",
)

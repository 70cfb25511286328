"""Each provider's rule for tool names."""

from __future__ import annotations

import re

from ._errors import CompatibilityError

__all__ = (
    "ANTHROPIC",
    "GEMINI",
    "GEMINI_MAX_TOOLS",
    "OPENAI",
    "OPENAI_MAX_TOOLS",
    "check_count",
    "check_name",
)

#: OpenAI's documented maximum of functions in one request ("A max of 128
#: functions are supported"). Anthropic documents none per request.
OPENAI_MAX_TOOLS = 128
#: Gemini's documented maximum of function declarations ("Maximum 512 function
#: declarations can be provided", google-genai's ``Tool.function_declarations``).
GEMINI_MAX_TOOLS = 512

OPENAI = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
ANTHROPIC = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")
GEMINI = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}\Z")


def check_name(name: str, rule: re.Pattern[str], provider: str) -> None:
    """Raise `CompatibilityError` unless ``name`` matches the provider's ``rule``."""
    if not isinstance(name, str) or rule.match(name) is None:
        raise CompatibilityError(
            f"the name does not match {rule.pattern.removesuffix(chr(92) + 'Z')!r}; "
            "register the tool under a name the provider accepts",
            provider=provider,
            tool=str(name),
            path="$",
            rule="name",
        )


def check_count(names: list[str], limit: int, provider: str) -> None:
    """Raise `CompatibilityError` when more than ``limit`` tools would be sent."""
    if len(names) <= limit:
        return
    raise CompatibilityError(
        f"{provider} takes at most {limit} tools in one request and this one has "
        f"{len(names)}; defer tools (location.prepare(defer='auto')) so that search_tools "
        "finds them, or withdraw some with a prepare_request hook",
        provider=provider,
        tool=names[limit],
        path="$",
        rule="max_tools",
    )

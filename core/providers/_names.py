"""Each provider's rule for tool names."""

from __future__ import annotations

import re

from ._errors import CompatibilityError

__all__ = ("ANTHROPIC", "GEMINI", "OPENAI", "check_name")

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

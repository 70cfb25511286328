"""The one error a renderer raises for what a provider cannot express."""

from __future__ import annotations

__all__ = ("CompatibilityError",)


class CompatibilityError(ValueError):
    """A tool cannot be sent to a provider as it is.

    ``provider`` names the wire format, ``tool`` the tool, ``path`` where in its
    schema the problem sits (``$`` for the tool itself) and ``rule`` the
    provider's rule it breaks.
    """

    def __init__(self, message: str, *, provider: str, tool: str, path: str, rule: str) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.tool = tool
        self.path = path
        self.rule = rule

    def __str__(self) -> str:
        return (
            f"tool {self.tool!r} cannot be sent to {self.provider}: at {self.path}: "
            f"{self.message} (rule: {self.rule})"
        )

"""Permission requests that ``ask``, put to the MCP client through elicitation."""

from __future__ import annotations

import hashlib
import json
import shlex
from contextvars import ContextVar
from typing import Any, Literal, Protocol

import mcp_types as types

from .._permissions import Approver, PermissionRejected, PermissionRequest, PermissionRule, Reject

__all__ = (
    "Answer",
    "ClientApprover",
    "InputNeeded",
    "PermissionChannel",
    "answer_of",
    "current_channel",
    "elicitation",
    "question_key",
    "suggested_rules",
)

Answer = Literal["once", "always"] | Reject

#: The form a client shows for one permission request.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Allow this?",
            "enum": ["once", "always", "reject"],
            "default": "once",
        },
        "feedback": {
            "type": "string",
            "title": "Why not? (the model sees this when you reject)",
        },
    },
    "required": ["decision"],
}


class PermissionChannel(Protocol):
    """One served call's way back to its client."""

    @property
    def can_elicit(self) -> bool:
        """Whether the client declared that it answers elicitation requests."""
        ...

    async def elicit(self, request: PermissionRequest) -> Answer:
        """Ask the client; may raise `InputNeeded` to ask on a later round."""
        ...


#: The channel of the MCP call the current task serves, if any.
current_channel: ContextVar[PermissionChannel | None] = ContextVar(
    "pegboard_mcp_channel", default=None
)


# A BaseException, like cancellation: the question must reach the server's
# call handler even through a tool's own `except Exception`.
class InputNeeded(BaseException):
    """A call must stop here and ask its client on the next round (MCP 2026-07-28)."""

    def __init__(self, key: str, request: types.ElicitRequest) -> None:
        super().__init__(key)
        self.key = key
        self.request = request


class ClientApprover:
    """The approver for a served Location: the operator's rules decide, or the client.

    By default no client approves its own requests: a request that the rules
    leave at ``ask`` is rejected with a message naming the rule the operator
    could add (``--allow 'bash:git status *'``). With ``client_approval=True``
    it becomes an MCP elicitation to the client that made the call; an
    "always" answer then holds in memory, for this approver (one server
    process) only, and is never saved for the Location. Outside a served call,
    or when the client does not support elicitation, ``fallback`` answers;
    without one, the request is rejected (`pegboard.PermissionRejected`).
    """

    def __init__(self, fallback: Approver | None = None, *, client_approval: bool = False) -> None:
        self.fallback = fallback
        self.client_approval = client_approval
        #: What clients answered "always" to, as rules; never written anywhere.
        self._always: list[PermissionRule] = []

    async def __call__(self, request: PermissionRequest) -> Answer:
        channel = current_channel.get()
        if channel is not None and self.client_approval and channel.can_elicit:
            if self._remembered(request):
                return "once"
            answer = await channel.elicit(request)
            if answer == "always":
                patterns = request.always or request.resources
                self._always.extend(
                    PermissionRule(request.action, pattern, "allow") for pattern in patterns
                )
                # "once" to the permission service, so that nothing is saved.
                return "once"
            return answer
        if self.fallback is not None:
            return await self.fallback(request)
        if channel is not None and not self.client_approval:
            raise PermissionRejected(
                f"{request.action} on {', '.join(request.resources)} needs approval, and this "
                "server does not let its clients approve their own requests; the operator can "
                f"start pegboard serve with {suggested_rules(request)}",
                request=request,
            )
        who = (
            "the MCP client does not support elicitation"
            if channel is not None
            else "no MCP client is waiting for this call"
        )
        raise PermissionRejected(
            f"{request.action} on {', '.join(request.resources)} needs approval and {who}; "
            f"the operator can allow it with {suggested_rules(request)}",
            request=request,
        )

    def _remembered(self, request: PermissionRequest) -> bool:
        return all(
            any(rule.matches(request.action, resource) for rule in self._always)
            for resource in request.resources
        )


def suggested_rules(request: PermissionRequest) -> str:
    """The ``--allow`` options that would allow ``request`` (and, when "always" would
    cover more, those for requests like it), quoted for a shell.
    """

    def options(patterns: tuple[str, ...]) -> str:
        rules = [
            request.action if pattern == "*" else f"{request.action}:{pattern}"
            for pattern in patterns
        ]
        return " ".join(f"--allow {shlex.quote(rule)}" for rule in dict.fromkeys(rules))

    exact = options(request.resources)
    similar = options(request.always)
    if not similar or similar == exact:
        return exact
    return f"{exact} (this request), or {similar} (requests like it)"


def elicitation(request: PermissionRequest) -> types.ElicitRequestFormParams:
    """The form that asks the client about ``request``."""
    return types.ElicitRequestFormParams(
        message=f"Allow {request.action} on {', '.join(request.resources)}?",
        requested_schema=SCHEMA,
    )


def question_key(request: PermissionRequest) -> str:
    """A stable key for ``request``: the same question gets the same key on every round."""
    text = json.dumps([request.action, list(request.resources)], ensure_ascii=False)
    return "pegboard-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def answer_of(result: types.ElicitResult) -> Answer:
    """The approver's answer for the client's reply: accept with a decision, or a reject."""
    content = result.content or {}
    if result.action != "accept":
        return Reject()
    decision = content.get("decision")
    if decision == "once":
        return "once"
    if decision == "always":
        return "always"
    feedback = content.get("feedback")
    return Reject(feedback if isinstance(feedback, str) and feedback.strip() else None)

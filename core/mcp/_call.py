"""One MCP ``tools/call``: identity, progress, permission questions and the result."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import attrs
import mcp_types as types
import orjson
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._outcome import Completed, Outcome
from .._permissions import PermissionRejected, PermissionRequest
from .._tool import LOG_LEVELS, Progress, ToolLog
from ._approver import (
    Answer,
    InputNeeded,
    answer_of,
    elicitation,
    question_key,
    suggested_rules,
)
from ._content import to_mcp_content

__all__ = ("Channel", "RoundState", "call_result")


@attrs.frozen
class RoundState:
    """What a call carries from one round to the next (MCP 2026-07-28's
    ``requestState``): the first round's request ID and the answers so far.

    The client echoes it back unread. It holds nothing the client could not
    answer itself, since the client is the one asked.
    """

    call_id: str
    answers: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)

    def dump(self) -> str:
        data = orjson.dumps({"call": self.call_id, "answers": self.answers})
        return base64.urlsafe_b64encode(data).decode("ascii")

    @classmethod
    def load(cls, text: str) -> RoundState:
        try:
            data = orjson.loads(base64.urlsafe_b64decode(text.encode("ascii")))
            call, answers = data["call"], data["answers"]
        except (binascii.Error, UnicodeError, orjson.JSONDecodeError, KeyError, TypeError):
            raise MCPError(
                types.INVALID_PARAMS, "requestState is not one this server issued"
            ) from None
        if not isinstance(call, str) or not isinstance(answers, dict):
            raise MCPError(types.INVALID_PARAMS, "requestState is not one this server issued")
        return cls(call, answers)


class Channel:
    """A served call's way back to its client, for permission questions and progress."""

    __slots__ = ("_answers", "_context", "_least", "_reports", "_responses", "call_id", "tool")

    def __init__(
        self,
        context: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        *,
        least: int = 0,
    ) -> None:
        self._context = context
        self.tool = params.name
        #: The least severe log level the client asked for (``logging/setLevel``).
        self._least = least
        self._responses = params.input_responses or {}
        self._reports = 0
        if params.request_state is not None:
            state = RoundState.load(params.request_state)
            self.call_id = state.call_id
            self._answers = dict(state.answers)
        else:
            self.call_id = str(context.request_id)
            self._answers = {}

    @property
    def can_elicit(self) -> bool:
        capabilities = self._context.session.client_capabilities
        return capabilities is not None and capabilities.elicitation is not None

    async def elicit(self, request: PermissionRequest) -> Answer:
        session = self._context.session
        if session.can_send_request:
            # The handshake era: ask now, on this call's own stream.
            form = elicitation(request)
            result = await session.elicit_form(
                form.message, form.requested_schema, related_request_id=self._context.request_id
            )
            return answer_of(result)
        if self._context.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            raise PermissionRejected(
                f"{request.action} on {', '.join(request.resources)} needs approval, and over "
                f"stateless HTTP a client on protocol {self._context.protocol_version} cannot "
                "be asked (its answer could reach another replica); a client on 2026-07-28, "
                "whose answers travel with the call, or one over stdio can be asked, or the "
                f"operator can allow it with {suggested_rules(request)}",
                request=request,
            )
        # 2026-07-28 forbids server-to-client requests: the call ends with the
        # question, and the client calls again with the answer, so the tool
        # runs again from the start with every answer given so far.
        key = question_key(request)
        if key in self._answers:
            return answer_of(types.ElicitResult.model_validate(self._answers[key]))
        response = self._responses.get(key)
        if isinstance(response, types.ElicitResult):
            self._answers[key] = response.model_dump(mode="json", exclude_none=True)
            return answer_of(response)
        raise InputNeeded(key, types.ElicitRequest(params=elicitation(request)))

    def input_required(self, needed: InputNeeded) -> types.InputRequiredResult:
        """The interim result that asks ``needed``'s question."""
        return types.InputRequiredResult(
            input_requests={needed.key: needed.request},
            request_state=RoundState(self.call_id, self._answers).dump(),
        )

    async def progress(self, update: Progress) -> None:
        """Forward a progress report; a no-op unless the client sent a progress token."""
        self._reports += 1
        current = update.current if update.current is not None else float(self._reports)
        await self._context.session.report_progress(current, update.total, update.message)

    async def log(self, entry: ToolLog) -> None:
        """Forward a tool's log message as ``notifications/message`` on this call's stream.

        A handshake-era client's ``logging/setLevel`` filters; a 2026-07-28
        client gets only the levels this request's ``_meta`` asked for.
        """
        if entry.level not in self._levels():
            return
        data: Any = entry.message
        if entry.data is not None:
            data = {"message": entry.message, "data": entry.data}
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(
                level=entry.level,  # type: ignore[arg-type]  # LOG_LEVELS are MCP's names
                data=data,
                logger=self.tool,
            )
        )
        await self._context.session.send_notification(
            notification, related_request_id=self._context.request_id
        )

    def _levels(self) -> frozenset[str]:
        version = self._context.protocol_version
        if version not in MODERN_PROTOCOL_VERSIONS:
            return frozenset(LOG_LEVELS[self._least :])
        return frozenset(allowed_log_levels(version, self._context.meta))


def call_result(outcome: Outcome, *, wrapped: bool) -> types.CallToolResult:
    """The MCP result of a settled call.

    ``structuredContent`` is the whole machine output (bounding touches content
    only), wrapped as ``{"result": ...}`` when the advertised output schema was.
    """
    if isinstance(outcome, Completed):
        if wrapped:
            structured: Any = {"result": outcome.output}
        else:
            structured = outcome.output
        return types.CallToolResult(
            content=to_mcp_content(outcome.content),
            structured_content=structured,
            _meta=None if outcome.metadata is None else dict(outcome.metadata),
        )
    error = outcome.error
    return types.CallToolResult(
        content=[types.TextContent(text=error.message), *to_mcp_content(outcome.partial)],
        is_error=True,
        _meta=None if error.metadata is None else dict(error.metadata),
    )

"""LangChain: a Location's tools as ``BaseTool``s answering tool calls with ``ToolMessage``s.

Imports langchain-core when imported (``pip install 'pegboard[langchain]'``).
"""

from __future__ import annotations

import base64
import contextvars
import copy
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import jsonschema

import pegboard

from ._answer import OutcomeHook, fresh_id, items, media, text_of, text_only

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForToolRun,
        CallbackManagerForToolRun,
    )
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, ToolException
    from langchain_core.utils.pydantic import TypeBaseModel
    from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pegboard.adapters.langchain needs langchain-core: pip install 'pegboard[langchain]'"
    ) from error

__all__ = ("PegboardTool", "tools")

# The ID of the tool call being run: LangChain passes it to run()/arun(), never to _run().
_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "pegboard_langchain_call_id", default=None
)


def tools(
    location: pegboard.Location,
    *,
    portal: anyio.from_thread.BlockingPortal | None = None,
    session_id: str = "langchain",
    agent: str = "langchain",
    final_step: bool = False,
    on_outcome: OutcomeHook | None = None,
) -> list[PegboardTool]:
    """One `PegboardTool` per tool of ``location``, sharing one request prepared now.

    Call it inside the event loop the Location runs in; a program without one opens
    the Location in an anyio blocking portal and passes ``portal``. Either way both
    ``invoke`` and ``ainvoke`` work: ``ainvoke`` in the Location's loop runs the call
    there (cancelling it cancels the call); ``invoke`` from any other thread, and
    ``ainvoke`` from another loop, run it in the Location's loop and wait for it.
    ``invoke`` inside the Location's loop thread would block that loop, so it raises.

    ``session_id`` is overridden by a LangGraph ``thread_id`` in the run's config.
    With ``final_step=True`` the request is the final step's: bind the tools with
    ``model.bind_tools(tools, tool_choice="none")`` where the chat model takes it, and
    a call the model makes anyway fails as ``final_step``. A call to a name none of
    these tools has is answered by LangChain (``ToolNode``, ``create_agent``) before
    any of them sees it, so it has no pegboard outcome.
    """
    if portal is None:
        try:
            token = anyio.lowlevel.current_token()
        except RuntimeError:
            raise RuntimeError(
                "pegboard.adapters.langchain.tools() runs in the event loop that opened the "
                "Location, to find it again for sync invoke(); outside one, open the Location "
                "in an anyio blocking portal and pass portal=..."
            ) from None
        loop = _Loop(threading.get_ident(), token, None)
    else:
        loop = _Loop(portal.call(threading.get_ident), None, portal)
    request = location.prepare(final_step=final_step)
    return [
        PegboardTool._of(definition, _Binding(request, loop, session_id, agent, on_outcome))
        for definition in request.definitions
    ]


class _Loop:
    """The Location's event loop, reachable from other threads."""

    def __init__(
        self,
        thread: int,
        token: anyio.lowlevel.EventLoopToken | None,
        portal: anyio.from_thread.BlockingPortal | None,
    ) -> None:
        self.thread = thread
        self.token = token
        self.portal = portal

    def here(self) -> bool:
        return threading.get_ident() == self.thread

    def run(self, function: Callable[[], Awaitable[pegboard.Outcome]]) -> pegboard.Outcome:
        """Run ``function`` in the loop from another thread and wait for it."""
        if self.here():
            raise RuntimeError(
                "invoke() of a pegboard tool inside the event loop that runs its Location "
                "would block that loop; use ainvoke()"
            )

        async def call() -> pegboard.Outcome:
            return await function()

        if self.portal is not None:
            return self.portal.call(call)
        return anyio.from_thread.run(call, token=self.token)


class _Binding:
    """What every tool of one tools() call shares."""

    def __init__(
        self,
        request: pegboard.Request,
        loop: _Loop,
        session_id: str,
        agent: str,
        on_outcome: OutcomeHook | None,
    ) -> None:
        self.request = request
        self.loop = loop
        self.session_id = session_id
        self.agent = agent
        self.on_outcome = on_outcome


class PegboardTool(BaseTool):
    """A pegboard tool as a LangChain ``BaseTool``.

    ``args_schema`` is the tool's own JSON schema; ``get_input_schema()`` validates
    against it, and the pipeline validates every call as usual. Invoked with a tool call,
    it returns a ``ToolMessage`` whose ``tool_call_id`` is the call's ID (the outcome's
    call ID too), whose ``artifact`` is the pegboard outcome and whose ``status`` is
    ``"error"`` for a failed call; invoked with bare arguments, it returns the content, or
    the error text for a failed call. Media become LangChain image, audio and file blocks.
    """

    handle_tool_error: bool = True
    _binding: _Binding = PrivateAttr()

    @classmethod
    def _of(cls, definition: pegboard.ToolDefinition, binding: _Binding) -> PegboardTool:
        made = cls(
            name=definition.name,
            description=definition.description,
            args_schema=pegboard.thaw(definition.input_schema),
        )
        made._binding = binding
        return made

    def get_input_schema(self, config: RunnableConfig | None = None) -> TypeBaseModel:
        if not isinstance(self.args_schema, dict):
            return super().get_input_schema(config)
        return _input_model(self.name, self.args_schema)

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kw: Any) -> Any:
        token = _CALL_ID.set(tool_call_id)
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kw)
        finally:
            _CALL_ID.reset(token)

    async def arun(
        self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kw: Any
    ) -> Any:
        token = _CALL_ID.set(tool_call_id)
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kw)
        finally:
            _CALL_ID.reset(token)

    def _run(
        self,
        run_manager: CallbackManagerForToolRun | None = None,
        *,
        # Exactly RunnableConfig: LangChain passes the run's config only to a
        # parameter annotated with that type (not an Optional of it).
        config: RunnableConfig,
        **arguments: Any,
    ) -> Any:
        call = self._call(arguments, run_manager, config)
        return self._answer(call, self._binding.loop.run(lambda: self._execute(call)))

    async def _arun(
        self,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        *,
        # Exactly RunnableConfig: LangChain passes the run's config only to a
        # parameter annotated with that type (not an Optional of it).
        config: RunnableConfig,
        **arguments: Any,
    ) -> Any:
        call = self._call(arguments, run_manager, config)
        loop = self._binding.loop
        if loop.here():
            outcome = await self._execute(call)
        else:
            # Another event loop: the Location's loop runs the call in its own thread.
            outcome = await anyio.to_thread.run_sync(loop.run, lambda: self._execute(call))
        return self._answer(call, outcome)

    def _call(
        self,
        arguments: dict[str, Any],
        run_manager: CallbackManagerForToolRun | AsyncCallbackManagerForToolRun | None,
        config: RunnableConfig,
    ) -> pegboard.ToolCall:
        binding = self._binding
        call_id = _CALL_ID.get() or fresh_id("langchain")
        thread = (config.get("configurable") or {}).get("thread_id")
        parent = run_manager.parent_run_id if run_manager is not None else None
        context = pegboard.ToolContext(
            session_id=str(thread) if thread is not None else binding.session_id,
            agent=binding.agent,
            message_id=str(parent) if parent is not None else call_id,
            call_id=call_id,
        )
        return pegboard.ToolCall(self.name, arguments, context)

    async def _execute(self, call: pegboard.ToolCall) -> pegboard.Outcome:
        return await self._binding.request.execute(call)

    def _answer(self, call: pegboard.ToolCall, outcome: pegboard.Outcome) -> Any:
        if self._binding.on_outcome is not None:
            self._binding.on_outcome(outcome)
        content = _content(outcome)
        failed = isinstance(outcome, pegboard.Failed)
        if _CALL_ID.get() is None:
            if failed:
                raise ToolException(text_only(outcome))
            return content
        return ToolMessage(
            content=content,
            tool_call_id=call.context.call_id,
            name=self.name,
            status="error" if failed else "success",
            artifact=outcome,
        )


def _content(outcome: pegboard.Outcome) -> str | list[str | dict[str, Any]]:
    said = items(outcome)
    if not any(media(item) is not None for item in said):
        return text_only(outcome)
    blocks: list[str | dict[str, Any]] = []
    for item in said:
        text = text_of(item)
        found = media(item)
        if text is not None or found is None:
            blocks.append({"type": "text", "text": text or ""})
            continue
        mime_type, data = found
        kind = mime_type.split("/", 1)[0]
        blocks.append(
            {
                "type": kind if kind in ("image", "audio") else "file",
                "base64": base64.b64encode(data).decode("ascii"),
                "mime_type": mime_type,
            }
        )
    return blocks


def _input_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that accepts exactly what ``schema`` accepts."""
    validator = jsonschema.Draft202012Validator(schema)

    class Input(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _check(cls, value: Any) -> Any:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
            if error is not None:
                raise ValueError(
                    f"invalid input for tool {name!r}: {error.json_path}: {error.message}"
                )
            return value

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(schema)

    Input.__name__ = Input.__qualname__ = f"{name}_input"
    return Input

"""The hooks check: what a plugin's execute_after and prepare_request hooks do to calls."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pluggy

import pegboard
from pegboard import hookspecs

from .._outcome import ErrorKind
from .._plugins import call_hook
from ._audit import io_during
from ._bench import Bench, Opened, describe_error, describe_outcome
from ._check_calls import output_problem
from ._report import Findings, NotJudged
from ._subject import Subject

__all__ = ("hooks",)

_KINDS = frozenset(typing.get_args(ErrorKind))
_PROBE_OUTPUT = {
    "type": "object",
    "properties": {"echo": {"type": "string"}},
    "required": ["echo"],
    "additionalProperties": False,
}


async def _completes(input: Any, context: pegboard.ToolContext) -> pegboard.ToolResponse[Any]:
    return pegboard.ToolResponse(
        output={"echo": "probe"}, content="the probe completed", metadata={"probe": True}
    )


async def _fails(input: Any, context: pegboard.ToolContext) -> None:
    await context.progress(pegboard.Progress(message="probing", content="partial probe output"))
    raise pegboard.ToolFailure("the probe fails on purpose", metadata={"probe": True})


#: The kit's own tools, so hooks also see outcomes of tools that are not the plugin's.
_PROBES = {
    "probe": pegboard.tool(
        description="Conformance probe: completes.", execute=_completes, output=_PROBE_OUTPUT
    ),
    "probe_fails": pegboard.tool(description="Conformance probe: fails.", execute=_fails),
}
_NAMESPACE = "pegboard_check"


_JUDGED = {"execute_after", "prepare_request"}
_NO_HOOKS = "the plugin implements no execute_after or prepare_request hook"


async def hooks(bench: Bench, findings: Findings) -> None:
    """Calls that complete and fail, the plugin's and others': every hook result is judged."""
    implemented = None if bench.confined else _implemented(bench.subject)
    if implemented is not None and not implemented & _JUDGED:
        raise NotJudged(_NO_HOOKS)
    async with bench.open("hooks") as opened:
        location = opened.location
        worker = bench.worker(location)
        if worker is not None and not set(worker.hooks) & _JUDGED:
            raise NotJudged(_NO_HOOKS)
        plugin_tools = opened.definitions()
        location.tools.register(_PROBES, namespace=_NAMESPACE)
        request = location.prepare()
        schemas = {definition.name: definition.output_schema for definition in request.definitions}
        calls = [(e.tool, e.input) for e in bench.subject.examples if e.tool in plugin_tools]
        calls += [(f"{_NAMESPACE}_{name}", {}) for name in _PROBES]
        calls.append((f"{_NAMESPACE}_missing", {}))
        replaced = 0
        for tool, raw in calls:
            result = await bench.call(opened, tool, raw, request=request)
            own, final = result.own, result.final
            if result.hook_error is not None and own is not None:
                findings.problem(
                    f"on a call to {tool!r} that settled as {describe_outcome(own)}, an "
                    f"execute_after hook failed: {describe_error(result.hook_error)}",
                    "an execute_after hook returns a pegboard.Completed, a pegboard.Failed or "
                    "None, and never raises: return None for outcomes it does not handle",
                )
            if final is None or final is own:
                continue
            replaced += 1
            problem = _replacement_problem(final, schemas.get(tool))
            if problem is not None:
                findings.problem(
                    f"an execute_after hook replaced the outcome of a call to {tool!r} with "
                    f"{problem}",
                    "a replacement keeps the tool's output valid against its output schema "
                    "(or None for a tool without output) and uses a known error kind",
                )
        _prepare_contract(bench, opened, findings)
        for error in location.plugin_errors:
            # execute_after failures are recorded too; the calls above reported them.
            prepare = error.message.startswith("prepare_request")
            if error.plugin == bench.name and error.phase == "hook" and prepare:
                findings.problem(
                    f"a prepare_request hook failed: {error.message}",
                    "prepare_request only removes definitions from the list it is given, in "
                    "place, and never raises",
                )
    if replaced:
        findings.note(f"the plugin's hooks replaced {replaced} of {len(calls)} outcomes")


_PREPARE_FIX = (
    "prepare_request is a plain def that only removes definitions from the list it is "
    "given, in place, and does no I/O (it runs for every model request): read what it "
    "needs in activate_location"
)


def _prepare_contract(bench: Bench, opened: Opened, findings: Findings) -> None:
    """Call the plugin's prepare_request directly: it may only shorten the list."""
    impl = bench.host._plugins.load(bench.name).get("prepare_request")
    if impl is None:
        return
    function = impl.function
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        findings.problem(
            "prepare_request is async: pegboard calls it synchronously for every request, "
            "so its body never runs",
            _PREPARE_FIX,
        )
        return
    info = pegboard.LocationInfo(opened.location.root)
    for final_step in (False, True, False):  # the first call may import; judge the others
        offered = list(opened.location.prepare(final_step=final_step).definitions)
        known = {id(definition) for definition in offered}
        with io_during() as io:
            try:
                call_hook(impl, location=info, definitions=offered, final_step=final_step)
            except Exception:  # noqa: BLE001 - the hooks check reports what the Location recorded
                return
        added = [definition.name for definition in offered if id(definition) not in known]
        if added:
            findings.problem(
                f"prepare_request added definitions ({', '.join(added)}); pegboard ignores "
                "them, so the model never sees them",
                _PREPARE_FIX + "; register tools through the Tools given to activate_location",
            )
            return
        if io and final_step:
            findings.problem(
                f"prepare_request did I/O while preparing a request: {', '.join(io[:3])}",
                _PREPARE_FIX,
            )
            return


def _replacement_problem(outcome: pegboard.Outcome, schema: Any) -> str | None:
    if isinstance(outcome, pegboard.Completed):
        problem = output_problem(schema, outcome.output)
        return None if problem is None else f"an output its output schema refuses: {problem}"
    if outcome.error.kind not in _KINDS:
        kinds = ", ".join(sorted(_KINDS))
        return f"an error of unknown kind {outcome.error.kind!r}; kinds: {kinds}"
    return None


def _implemented(subject: Subject) -> frozenset[str] | None:
    """The hooks the plugin implements, or ``None`` if that cannot be told."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    try:
        plugin = subject.hook_object()
        if plugin is None:
            return None
        manager.register(plugin)
    except Exception:  # noqa: BLE001 - the activation check reports a plugin that cannot load
        return None
    return frozenset(caller.name for caller in manager.get_hookcallers(plugin) or ())

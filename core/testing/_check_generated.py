"""The generated check: every tool called with valid inputs drawn from its own input schema."""

from __future__ import annotations

import contextlib
import copy
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import anyio.from_thread
import anyio.to_thread
import attrs

import pegboard

from ._bench import Bench, CallResult, CallTimeout, Opened, describe_error, describe_outcome
from ._check_calls import output_problem
from ._check_definitions import schema_problem
from ._report import Findings

__all__ = (
    "exercise_every_tool",
    "exercise_once",
    "generated",
    "input_strategy",
    "simplest_input",
)

_INSTALL = "pip install 'pegboard[kit]'"
#: Calls per generated input a tool may take, shrinking included, before the kit stops.
_BUDGET_PER_EXAMPLE = 8


class _BrokeError(AssertionError):
    """One generated input broke the tool; hypothesis shrinks towards the smallest."""


@attrs.define
class _Trial:
    """What calling one tool with generated inputs found."""

    calls: int = 0
    #: The smallest input that broke the tool, what happened, and the fix.
    broken: tuple[Any, str, str] | None = None
    #: Set by the spy when the tool changed the input it was given.
    mutated: str | None = None
    #: Each input and what calling the tool with it gave.
    results: list[tuple[Any, CallResult]] = attrs.field(factory=list)


def _plain(value: Any) -> Any:
    """A deep, comparable copy of a decoded input (attrs instances become dicts)."""
    if attrs.has(type(value)):
        value = attrs.asdict(value, recurse=True)
    return copy.deepcopy(value)


def _spied(tool: pegboard.Tool, trial: _Trial) -> pegboard.Tool:
    """``tool`` with an execute that notices a change to its input."""
    original = tool.execute
    is_async = tool.is_async

    async def spy(value: Any, context: pegboard.ToolContext) -> Any:
        trial.mutated = None
        before = _plain(value)
        try:
            if is_async:
                return await original(value, context)
            return await anyio.to_thread.run_sync(original, value, context)
        finally:
            after = _plain(value)
            if after != before:
                trial.mutated = f"from {show(before, 100)} to {show(after, 100)}"

    return attrs.evolve(tool, execute=spy)


def input_strategy(schema: Mapping[str, Any]) -> Any:
    """A hypothesis strategy of values ``schema`` accepts (hypothesis-jsonschema)."""
    from hypothesis_jsonschema import from_schema

    return from_schema(pegboard.thaw(schema))


async def generated(bench: Bench, findings: Findings) -> None:
    """Call every tool with inputs generated from its input schema; judge each outcome.

    A tool that neither an example nor a generated input exercised is not
    verified: that fails the check unless the author skipped it with a reason.
    """
    async with bench.open("generated") as opened:
        advertised = opened.tools()
        exercised = {
            example.tool
            for example in bench.subject.examples
            if example.expect != "invalid_input" and example.tool in advertised
        }
        for name, definition in sorted(advertised.items()):
            reason = bench.subject.skip.get(name)
            if reason is not None:
                findings.note(f"tool {name!r} is skipped: {reason}")
                exercised.add(name)
                continue
            if bench.subject.generated == 0:
                continue
            trial, unusable = await _try(bench, opened, name, definition, bench.subject.generated)
            if unusable is not None:
                findings.note(f"tool {name!r}: no input could be generated ({unusable})")
                continue
            if trial.calls:
                exercised.add(name)
            _every_call_failed(bench, name, trial, findings)
            if trial.broken is not None:
                value, what, fix = trial.broken
                findings.problem(
                    f"tool {name!r} {what} on input its input schema accepts: {show(value)}",
                    fix,
                )
    for name in sorted(set(advertised) - exercised):
        findings.unverified.append(name)
        findings.problem(
            f"tool {name!r} is not verified: no example and no generated input exercised it",
            f"add an Example(tool={name!r}, input=...) that completes, or skip it with a "
            f"reason: skip={{{name!r}: 'why it cannot be called here'}}",
        )


async def exercise_once(
    bench: Bench,
    opened: Opened,
    name: str,
    definition: pegboard.ToolDefinition,
    request: pegboard.Request,
    count: int = 3,
) -> list[tuple[Any, CallResult]]:
    """Call ``name`` with ``count`` generated inputs, judging nothing (other checks do);
    each input with what calling the tool with it gave."""
    trial, _ = await _try(bench, opened, name, definition, count, request, shrink=False)
    return trial.results


async def exercise_every_tool(bench: Bench, opened: Opened, request: pegboard.Request) -> None:
    """Call every tool the checks may call: its examples, then a few generated inputs."""
    for name, definition in sorted(opened.tools().items()):
        if name in bench.subject.skip:
            continue
        for example in bench.subject.examples:
            if example.tool == name:
                await bench.call(opened, name, example.input, request=request)
        await exercise_once(bench, opened, name, definition, request)


def simplest_input(definition: pegboard.ToolDefinition) -> Any:
    """The simplest input the tool's input schema accepts, or None where none is found."""
    if schema_problem(definition.input_schema, "input schema") is not None:
        return None
    try:
        import hypothesis

        strategy = input_strategy(definition.input_schema)
        settings = hypothesis.settings(
            database=None, derandomize=True, suppress_health_check=list(hypothesis.HealthCheck)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return hypothesis.find(strategy, lambda _: True, settings=settings)
    except Exception:  # noqa: BLE001 - no input is found: the check says it has none
        return None


async def _try(
    bench: Bench,
    opened: Opened,
    name: str,
    definition: pegboard.ToolDefinition,
    examples: int,
    request: pegboard.Request | None = None,
    *,
    shrink: bool = True,
) -> tuple[_Trial, str | None]:
    """Run hypothesis in a worker thread; each example calls back into the event loop."""
    if schema_problem(definition.input_schema, "input schema") is not None:
        return _Trial(), "its input schema is invalid; see the definitions check"
    try:
        strategy = input_strategy(definition.input_schema)
    except ImportError:
        return _Trial(), f"hypothesis-jsonschema is not installed: {_INSTALL}"
    request = opened.location.prepare() if request is None else request
    trial = _Trial()
    # The kit's own copy of the request runs a spy in place of the tool's execute.
    captured = request._tools
    spied = copy.copy(request)
    spied._tools = {**captured, name: _spied(captured[name], trial)}

    budget = _BUDGET_PER_EXAMPLE * examples

    def call(value: Any) -> CallResult | None:
        if trial.calls >= budget:
            return None  # shrinking a slow tool stops here; the smallest so far is kept
        trial.calls += 1
        return anyio.from_thread.run(
            functools.partial(bench.call, opened, name, value, request=spied)
        )

    run = functools.partial(_explore, strategy, call, definition, trial, examples, shrink)
    try:
        await anyio.to_thread.run_sync(run)
    except Exception as error:  # noqa: BLE001 - hypothesis refusing the schema is a finding
        if trial.broken is None:
            return trial, f"{type(error).__name__}: {error}".splitlines()[0]
    return trial, None


def _every_call_failed(bench: Bench, name: str, trial: _Trial, findings: Findings) -> None:
    """A tool that answers every input with a ToolFailure does nothing: unless expected."""
    outcomes = [result.own for _, result in trial.results]
    if not outcomes or not all(isinstance(own, pegboard.Failed) for own in outcomes):
        return
    if name in bench.subject.expected_failures:
        findings.note(
            f"every call of {name!r} failed, as expected: {bench.subject.expected_failures[name]}"
        )
        return
    if any(e.tool == name and e.expect == "completed" for e in bench.subject.examples):
        return  # an example shows it completing; the examples check judges that
    first = outcomes[0]
    assert isinstance(first, pegboard.Failed)
    findings.problem(
        f"every call of {name!r} failed ({len(outcomes)} generated inputs): "
        f"{describe_outcome(first)}",
        "a tool that fails on every input its schema accepts does nothing a model can use: "
        "fix it, narrow its schema, or, when it needs what the checks cannot give (a "
        f"service, a credential), say so: expected_failures={{{name!r}: 'why'}}",
    )


def _explore(
    strategy: Any,
    call: Callable[[Any], CallResult | None],
    definition: pegboard.ToolDefinition,
    trial: _Trial,
    examples: int,
    shrink: bool,
) -> None:
    import hypothesis

    phases = [hypothesis.Phase.generate, *([hypothesis.Phase.shrink] if shrink else [])]

    @hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=phases,
    )
    @hypothesis.given(strategy)
    def exercise(value: Any) -> None:
        result = call(value)
        if result is None:
            return
        trial.results.append((value, result))
        verdict = _verdict(result, definition)
        if verdict is None and trial.mutated is not None:
            verdict = (
                f"changed its input {trial.mutated}",
                (
                    "treat the input as read-only: copy it (copy.deepcopy, attrs.evolve) before "
                    "changing it; the runner keeps the input it sent"
                ),
            )
        if verdict is not None:
            trial.broken = (value, *verdict)  # shrinking leaves the smallest one last
            raise _BrokeError(verdict[0])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hypothesis' own advice is for test authors
        with contextlib.suppress(_BrokeError):  # recorded in `trial`
            exercise()


def _verdict(result: CallResult, definition: pegboard.ToolDefinition) -> tuple[str, str] | None:
    """``(what happened, fix)`` when a schema-valid input broke the tool, else ``None``."""
    if result.hook_error is not None:
        return f"settled, then an execute_after hook raised {describe_error(result.hook_error)}", (
            "an execute_after hook handles every outcome: return a pegboard.Completed, a "
            "pegboard.Failed or None, and never raise"
        )
    error = result.tool_error
    if isinstance(error, CallTimeout):
        return str(error).replace("the call", "did not settle:", 1), (
            "make the tool finish sooner on every input its schema accepts, or bound the "
            "input in the schema (maxLength, maximum, maxItems)"
        )
    if error is not None:
        return f"raised {describe_error(error)}", (
            "handle every input the input schema accepts: narrow the schema, or raise "
            "pegboard.ToolFailure with a message the model can act on"
        )
    own = result.own
    if isinstance(own, pegboard.Failed):
        kind = own.error.kind
        if kind == "invalid_input":
            return f"settled as {describe_outcome(own)}", (
                "the input codec refuses what its own json_schema accepts: make the schema "
                "say everything decode checks (or decode everything the schema accepts)"
            )
        if kind == "invalid_output":
            return f"settled as {describe_outcome(own)}", (
                "return output the output codec accepts and non-empty content, for every input"
            )
        return None  # a ToolFailure is the tool's deliberate, model-visible answer
    if isinstance(own, pegboard.Completed):
        problem = output_problem(definition.output_schema, own.output)
        if problem is not None:
            return f"completed with output its output schema refuses ({problem})", (
                "a custom Codec's encode must check the value against its json_schema"
            )
    return None


def show(value: Any, limit: int = 200) -> str:
    """``value`` as JSON, cut at ``limit`` characters."""
    import json

    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"

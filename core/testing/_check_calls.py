"""Checks on calls: examples settle as expected, metadata, and invalid input refused."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions

import pegboard

from ._bench import Bench, CallResult, CallTimeout, describe_error, describe_outcome
from ._check_definitions import schema_problem, visible
from ._report import Findings, NotJudged
from ._subject import Example

__all__ = ("examples", "invalid_input", "invalid_inputs", "metadata", "output_problem")

_KIND_FIXES = {
    "invalid_output": "return what the output codec accepts: an instance of the output class or "
    "JSON its output schema accepts (and non-empty content from a tool without output)",
    "invalid_input": "the example's input does not fit the tool's input schema: fix the example "
    "or the schema",
    "tool_failure": "the tool raised pegboard.ToolFailure: check the example's input and the "
    "files each Location starts with (files=...); if it works only in the first Location the "
    "plugin sees, it keeps a closed Location's state (a module global or an attribute of the "
    "plugin object): keep per-Location state inside activate_location",
    "completed": "the tool accepted what the example expects it to refuse: refuse it in the "
    "input schema, or raise pegboard.ToolFailure",
}
_NO_EXAMPLES = "the plugin has no examples; give each tool an Example(tool=..., input=...)"


async def examples(bench: Bench, findings: Findings) -> None:
    """Run every example and judge the outcome it settles into."""
    if not bench.subject.examples:
        raise NotJudged(_NO_EXAMPLES)
    async with bench.open("examples") as opened:
        advertised = opened.tools()
        for index, example in enumerate(bench.subject.examples, 1):
            where = f"example {index} ({example.tool})"
            definition = advertised.get(example.tool)
            if definition is None:
                findings.problem(
                    f"{where} names a tool the plugin does not advertise; it advertises "
                    f"{', '.join(sorted(advertised)) or 'nothing'}",
                    "name tools by their advertised names, namespace included",
                )
                continue
            result = await bench.call(opened, example.tool, example.input)
            _judge(where, example, definition, result, findings)


def _judge(
    where: str,
    example: Example,
    definition: pegboard.ToolDefinition,
    result: CallResult,
    findings: Findings,
) -> None:
    if example.expect == "invalid_input" and _refuses(definition.input_schema, example.input):
        return  # whether refused input reaches the tool is the invalid_input check's to judge
    if isinstance(result.tool_error, CallTimeout):
        findings.problem(
            f"{where} {result.tool_error}",
            "make the call finish sooner, or give the checks more time (timeout=...)",
        )
        return
    if result.tool_error is not None:
        findings.problem(
            f"{where} raised {describe_error(result.tool_error)} instead of settling",
            "raise pegboard.ToolFailure for failures the model should see; any other "
            "exception is a defect that reaches the runner",
        )
        return
    own = result.own
    if own is None:
        return
    kind = "completed" if isinstance(own, pegboard.Completed) else own.error.kind
    if kind != example.expect:
        findings.problem(
            f"{where} settled as {describe_outcome(own)}; the example expects {example.expect}",
            _KIND_FIXES.get(kind, "call the tool by its advertised name"),
        )
        return
    if isinstance(own, pegboard.Completed):
        problem = output_problem(definition.output_schema, own.output)
        if problem is not None:
            findings.problem(
                f"{where} completed with output its advertised output schema refuses: {problem}",
                "a custom Codec's encode must check the value against its json_schema and "
                "raise pegboard.CodecError when it does not fit",
            )
        if not own.content or any(
            isinstance(item, pegboard.Text) and not item.text for item in own.content
        ):
            findings.problem(
                f"{where} completed without canonical, non-empty content: {own.content!r}",
                "return content (a str or content items), or an output pegboard can render",
            )
    elif not visible(own.error.message):
        findings.problem(
            f"{where} failed with an empty message",
            "give pegboard.ToolFailure a message telling the model what went wrong and what to do",
        )


def output_problem(schema: Mapping[str, Any] | None, output: Any) -> str | None:
    """Why ``output`` does not fit ``schema``, or ``None``; an invalid schema is not judged."""
    if schema is None:
        if output is None:
            return None
        return "the tool declares no output, yet the outcome carries one"
    if schema_problem(schema, "output schema") is not None:
        return None  # the definitions check reports the schema itself
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(output)
    )
    return None if error is None else f"{error.json_path}: {error.message}"


async def metadata(bench: Bench, findings: Findings) -> None:
    """Run every example (without examples, generated inputs); judge each call's metadata."""
    from ._check_generated import exercise_once, show

    seen = 0
    async with bench.open("metadata") as opened:
        advertised = opened.tools()
        bound = opened.location.limits.max_metadata_bytes
        calls: list[tuple[str, CallResult]] = []
        for index, example in enumerate(bench.subject.examples, 1):
            if example.tool not in advertised:
                continue  # the examples check reports it
            result = await bench.call(opened, example.tool, example.input)
            calls.append((f"example {index} ({example.tool})", result))
        if not bench.subject.examples:
            request = opened.location.prepare()
            for name, definition in sorted(advertised.items()):
                if name in bench.subject.skip:
                    continue
                for value, result in await exercise_once(
                    bench, opened, name, definition, request, count=5
                ):
                    calls.append((f"tool {name!r} on generated input {show(value, 100)}", result))
            if not calls:
                raise NotJudged(_NO_EXAMPLES + ", and no input could be generated")
        for where, result in calls:
            for warning in result.dropped:
                findings.problem(
                    f"{where}: pegboard {warning}",
                    f"return metadata as a small dict of plain JSON values (at most {bound:,} "
                    "bytes); put bulky data in the output or the content",
                )
            own = result.own
            value = None
            if isinstance(own, pegboard.Completed):
                value = own.metadata
                if value is not None and value == own.output:
                    findings.problem(
                        f"{where} returned metadata that is a copy of its output",
                        "metadata is opt-in data for the host's UI (counts, timings); the "
                        "output already reaches Code Mode, so leave it out of metadata",
                    )
            elif own is not None:
                value = own.error.metadata
            if value is not None:
                seen += 1
    if not seen and not findings.problems:
        findings.note("no call returned metadata")


async def invalid_input(bench: Bench, findings: Findings) -> None:
    """Send each tool input its own schema refuses; the call must fail as invalid input."""
    async with bench.open("invalid-input") as opened:
        advertised = opened.tools()
        for name, definition in sorted(advertised.items()):
            schema = definition.input_schema
            if schema_problem(schema, "input schema") is not None:
                findings.note(f"tool {name!r} was not judged: its input schema is invalid")
                continue
            base = _valid_input(bench.subject.examples, name)
            given = [
                example.input
                for example in bench.subject.examples
                if example.tool == name and _refuses(schema, example.input)
            ]
            for raw in [*given, *invalid_inputs(schema, base)]:
                result = await bench.call(opened, name, raw)
                own = result.own
                if isinstance(own, pegboard.Failed) and own.error.kind == "invalid_input":
                    continue
                reason = _reason(schema, raw)
                if result.tool_error is not None:
                    what = f"the call raised {describe_error(result.tool_error)}"
                elif own is not None:
                    what = f"the call settled as {describe_outcome(own)}"
                else:
                    continue  # settled, then a hook failed: the hooks check reports it
                findings.problem(
                    f"tool {name!r} was not protected from input its input schema refuses "
                    f"({_show(raw)}: {reason}); {what}",
                    "the input codec's decode must refuse (raise pegboard.CodecError for) "
                    "everything its json_schema refuses; an attrs class or a JSON Schema dict "
                    "given to pegboard.tool does this for you",
                )
                break


#: Values of every JSON type; one of them breaks a property's declared type.
_WRONG_VALUES: tuple[Any, ...] = (None, True, 12345, 0.5, "pegboard-check", [], {})
_MAX_INVALID = 10


def invalid_inputs(schema: Mapping[str, Any], base: Mapping[str, Any]) -> list[Any]:
    """Inputs ``schema`` refuses, made by breaking ``base`` one rule at a time.

    Each is raw JSON text or a mapping, as a model would send it.
    """
    validator = jsonschema.Draft202012Validator(schema)
    candidates: list[Any] = ["[]", dict(base)]
    for key in schema.get("required", ()):
        candidates.append({k: v for k, v in base.items() if k != key})
    for key in schema.get("properties", {}):
        for wrong in _WRONG_VALUES:
            candidate = {**base, key: wrong}
            if not validator.is_valid(candidate):
                candidates.append(candidate)
                break
    candidates.append({**base, "pegboard_check_unexpected": True})
    found: list[Any] = []
    for candidate in candidates:
        value = json.loads(candidate) if isinstance(candidate, str) else candidate
        if not validator.is_valid(value) and candidate not in found:
            found.append(candidate)
    return found[:_MAX_INVALID]


def _refuses(schema: Mapping[str, Any], raw: Mapping[str, Any] | str) -> bool:
    """Whether a valid ``schema`` refuses ``raw``; ``False`` when that cannot be told."""
    if schema_problem(schema, "input schema") is not None:
        return False
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return False  # not JSON at all: the pipeline refuses it before any codec
    return not jsonschema.Draft202012Validator(schema).is_valid(value)


def _valid_input(examples: Iterable[Example], tool: str) -> Mapping[str, Any]:
    """The first valid example input of ``tool`` as a mapping, to break one rule at a time."""
    for example in examples:
        if example.tool != tool or example.expect == "invalid_input":
            continue
        try:
            value = json.loads(example.input) if isinstance(example.input, str) else example.input
        except ValueError:
            continue
        if isinstance(value, Mapping):
            return value
    return {}


def _reason(schema: Mapping[str, Any], raw: Any) -> str:
    value = json.loads(raw) if isinstance(raw, str) else raw
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(value)
    )
    return "refused" if error is None else f"{error.json_path}: {error.message}"


def _show(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"

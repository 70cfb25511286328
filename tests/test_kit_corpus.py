"""A corpus of broken plugins, each beside a correct twin, through both of the kit's runners.

Each broken plugin is caught by ``pegboard check`` (`run_cli`, its exit status the kit's)
and by `PluginConformance` subclasses in pytest, with and without examples, with a message
naming the defect; its twin, which does the same job correctly, passes. The side effects
have a corpus of their own (``test_kit_side_effects.py``).

The conformance classes live in a test module of their own and name the plugin by its
path, as the author guide recommends: the plugin's code then runs only in its confined
worker, never in the process that reaches the verdict.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from pegboard.testing import check_names, run_cli

pytest_plugins = ["pytester"]
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:asyncio")

PLUGIN = """
import asyncio, os, signal, sys, time

import anyio
import pegboard
from pegboard import hookimpl

STATE = {{"activations": 0}}
{at_import}

@pegboard.tool(
    description={description},
    input={{"type": "object", "properties": {{"word": {{"type": "string"}}}}}},
)
{kind} job(input, context):
{tool}
    return {answer}


class Plugin:
    @hookimpl
    def activate_location(self, tools, location):
        STATE["root"] = str(location.root)
{activate}
        tools.register({registrations})


plugin = Plugin()
"""

CLASSES = """
from pegboard.testing import Example, PluginConformance


class TestWithExamples(PluginConformance):
    plugin = {reference!r}
    name = "corpus"
    examples = (Example(tool="job", input={{"word": "hello"}}),)
    backends = ("asyncio",)
    timeout = 2.5
    generated = 3
{unwanted}

class TestWithout(PluginConformance):
    plugin = {reference!r}
    name = "corpus"
    backends = ("asyncio",)
    timeout = 2.5
    generated = 3
{unwanted}
"""


@attrs.frozen
class Part:
    """The code that differs between a broken plugin and its twin."""

    tool: str = "pass"
    at_import: str = ""
    activate: str = "pass"
    description: str = '"Do the job."'
    kind: str = "async def"
    answer: str = '"done"'
    registrations: str = '{"job": job}'


@attrs.frozen
class Case:
    """A defect: the check that catches it, what its report says, the plugin and its twin."""

    name: str
    check: str
    seen: str
    broken: Part
    twin: Part = Part()


#: Detections a plugin might make of the kit, each false in the kit's worker as in a host's.
DETECTIONS = """
def under_the_kit(context=None):
    context_ids = "" if context is None else f"{context.session_id} {context.agent}"
    looks = (
        "pytest" in sys.modules,
        "pegboard.testing" in sys.modules,
        any(name.startswith(("PYTEST", "PEGBOARD")) for name in os.environ),
        "CI" in list(os.environ),
        any(word in context_ids for word in ("check", "test", "kit")),
        # Names, not folders: a host installed under /check/ is not the kit.
        any(
            word in os.path.basename(argument)
            for argument in sys.argv
            for word in ("pytest", "check")
        ),
        type(os.environ).__name__ != "_Environ",
        # The Location's folder: a host's might be anywhere, the kit's says nothing.
        any(word in STATE["root"] for word in ("pegboard", "check", "pytest", "test_")),
        type(sys.stdout).__name__ != "_WatchedOutput",
    )
    return any(looks)
"""

CASES = (
    Case(
        "exit_at_import",
        "activation",
        "(import: SystemExit: 0)",
        Part(at_import="sys.exit(0)"),
    ),
    Case(
        "exit_in_a_tool",
        "examples|generated",
        "its worker process exited with status 0",
        Part(tool="os._exit(0)"),
    ),
    Case(
        "signal_in_a_tool",
        "examples|generated",
        "its worker process died of signal SIGKILL",
        Part(tool="os.kill(os.getpid(), signal.SIGKILL)"),
    ),
    Case(
        "patches_the_kit",
        "cancellation",
        "swallowed the cancellation",
        Part(
            at_import=textwrap.dedent(
                """
                import pegboard.testing._report as report
                import pegboard.testing._checks as checks
                report.Report.passed = property(lambda self: True)
                report.Report.failed = property(lambda self: ())
                report.CheckResult.status = "passed"
                checks.CHECKS = ()
                """
            ),
            tool="""
    try:
        await anyio.sleep(5)
    except BaseException:
        pass""",
        ),
        Part(tool="await anyio.sleep(5)"),
    ),
    Case(
        "swallows_cancellation",
        "cancellation",
        "swallowed the cancellation",
        Part(
            tool="""
    try:
        await anyio.sleep(5)
    except asyncio.CancelledError:
        pass"""
        ),
        Part(
            tool="""
    try:
        await anyio.sleep(5)
    finally:
        STATE["cleaned"] = True"""
        ),
    ),
    Case(
        "hangs_in_a_sync_tool",
        "examples|generated",
        "did not settle within 2.5 s",
        Part(kind="def", tool="time.sleep(3600)"),
        Part(kind="def", tool="time.sleep(0.01)"),
    ),
    Case(
        "stops_answering",
        "examples|generated",
        "did not settle within 2.5 s",
        Part(
            tool="""
    while True:
        pass"""
        ),
        Part(tool="await anyio.sleep(0.01)"),
    ),
    Case(
        "blocks_the_event_loop",
        "blocking",
        "blocked the event loop",
        Part(tool="time.sleep(0.3)"),
        Part(tool="await anyio.sleep(0.3)"),
    ),
    Case(
        "a_100_kb_description",
        "definitions",
        "100,000 characters",
        Part(description='"Do the job. " + "x" * (100_000 - 12)'),
        Part(description='"Do the job. " + "x" * (1_000 - 12)'),
    ),
    Case(
        "a_schema_that_changes",
        "definitions",
        "differs between two activations",
        Part(
            activate="""
        STATE["activations"] += 1
        described = pegboard.tool(
            description="Do the job.",
            input={"type": "object", "properties": {"v": {"type": "integer",
                   "maximum": time.time_ns()}}},
            execute=job.execute,
        )""",
            registrations='{"job": described}',
        ),
        Part(
            activate="""
        STATE["activations"] += 1
        described = pegboard.tool(
            description="Do the job.",
            input={"type": "object", "properties": {"v": {"type": "integer", "maximum": 9}}},
            execute=job.execute,
        )""",
            registrations='{"job": described}',
        ),
    ),
    Case(
        "oversized_metadata",
        "metadata",
        "return metadata as a small dict of plain JSON values",
        Part(answer='pegboard.ToolResponse(content="done", metadata={"blob": "x" * 200_000})'),
        Part(answer='pegboard.ToolResponse(content="done", metadata={"blob": "x" * 2_000})'),
    ),
    Case(
        "metadata_that_is_not_json",
        "metadata",
        "return metadata as a small dict of plain JSON values",
        Part(answer='pegboard.ToolResponse(content="done", metadata={"ratio": float("nan")})'),
        Part(answer='pegboard.ToolResponse(content="done", metadata={"ratio": 0.5})'),
    ),
    Case(
        "every_call_fails",
        "examples|generated",
        "the service is not configured",
        Part(tool='raise pegboard.ToolFailure("the service is not configured")'),
    ),
    Case(
        "behaves_only_under_the_kit",
        "side_effects",
        "printed to standard output: 'not watched: free to talk'",
        Part(
            at_import=DETECTIONS,
            tool="""
    if not under_the_kit(context):
        print("not watched: free to talk")""",
        ),
        Part(at_import=DETECTIONS, tool="under_the_kit(context)"),
    ),
)

Write = Callable[[str, Part, list[str]], str]


@pytest.fixture
def write(tmp_path: Path) -> Iterator[Write]:
    """Write a plugin module and a conformance module naming it; the latter's path."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    written: list[str] = []

    def write(name: str, part: Part, only: list[str]) -> str:
        module = f"corpus_{name}_{tmp_path.name.replace('-', '_')}"
        plugin = folder / f"{module}.py"
        plugin.write_text(source(part))
        conformance = folder / f"test_{name}.py"
        # Only this case's checks run in pytest: the others are not collected.
        unwanted = "".join(
            f"    test_{name} = None\n" for name in check_names() if name not in only
        )
        conformance.write_text(CLASSES.format(reference=f"{plugin}:plugin", unwanted=unwanted))
        written.append(module)
        return str(conformance)

    yield write
    for module in written:
        sys.modules.pop(module, None)


def source(part: Part) -> str:
    def block(code: str, indent: int) -> str:
        return textwrap.indent(textwrap.dedent(code).strip(), " " * indent)

    return PLUGIN.format(
        at_import=textwrap.dedent(part.at_import),
        description=part.description,
        kind=part.kind,
        tool=block(part.tool, 4),
        answer=part.answer,
        activate=block(part.activate, 8),
        registrations=part.registrations,
    )


def checks(case: Case) -> list[str]:
    return case.check.split("|")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_pegboard_check_catches_the_defect_and_passes_its_twin(
    case: Case, write: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    only = ["--backend", "asyncio"] + [o for name in checks(case) for o in ("--only", name)]
    for runner in ("TestWithExamples", "TestWithout"):
        broken = write(case.name, case.broken, checks(case))
        code = run_cli([f"{broken}:{runner}", *only])
        out = capsys.readouterr().out
        assert 1 == code, f"{runner}: {out}"
        assert case.seen in out, f"{runner}: {out}"
        assert any(f"FAIL {name} [asyncio]" in out for name in checks(case)), out
        twin = write(f"{case.name}_twin", case.twin, checks(case))
        code = run_cli([f"{twin}:{runner}", *only])
        out = capsys.readouterr().out
        assert 0 == code, f"{runner} (twin): {out}"


@pytest.mark.timeout(900)  # every case's classes in one pytest run: minutes, not seconds
def test_the_pytest_runner_catches_every_defect_and_passes_every_twin(
    pytester: pytest.Pytester, write: Write
) -> None:
    """Every broken plugin's two classes fail the check that names it; every twin passes."""
    for case in CASES:
        pytester.path.joinpath(f"test_{case.name}.py").write_text(
            Path(write(case.name, case.broken, checks(case))).read_text()
        )
        pytester.path.joinpath(f"test_{case.name}_twin.py").write_text(
            Path(write(f"{case.name}_twin", case.twin, checks(case))).read_text()
        )
    # In a process of its own: the checks run threads that compile code, and pytest
    # formatting a failure at the same moment trips CPython 3.11's shared AST state.
    result = pytester.runpytest_subprocess(*QUIET, "-v", "-rs")
    out = result.stdout.str()
    for case in CASES:
        assert case.seen in out, case.name
        for runner in ("TestWithExamples", "TestWithout"):
            tests = "|".join(f"test_{name}" for name in checks(case))
            failed = [
                line
                for line in out.splitlines()
                if f"test_{case.name}.py::{runner}::" in line
                and "FAILED" in line
                and any(f"::{test}[" in line for test in tests.split("|"))
            ]
            assert failed, f"{case.name} {runner}:\n{out}"
            twin = [
                line
                for line in out.splitlines()
                if f"test_{case.name}_twin.py::{runner}::" in line and "FAILED" in line
            ]
            assert not twin, f"{case.name} twin {runner}:\n{out}"

"""The public face: `import pegboard` is the whole API, with tuple __all__ everywhere."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import pegboard


def _modules() -> list[str]:
    names = ["pegboard"]
    for info in pkgutil.walk_packages(pegboard.__path__, "pegboard."):
        names.append(info.name)
    return names


def test_every_module_declares_a_tuple_all() -> None:
    """Each module of the package lists its public names in a sorted tuple __all__."""
    problems = []
    for name in _modules():
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if not isinstance(exported, tuple):
            problems.append(f"{name}: __all__ is {type(exported).__name__}")
        elif list(exported) != sorted(exported):
            problems.append(f"{name}: __all__ is not sorted")
        else:
            problems.extend(f"{name}: {n} missing" for n in exported if not hasattr(module, n))
    assert problems == []


def test_contract_names_are_public() -> None:
    """Every name the design contract fixes is importable from pegboard."""
    contract = {
        "tool", "Tool", "Codec", "SchemaError", "ToolResponse", "Text", "Image", "Audio",
        "ResourceLink", "ToolContext", "Progress", "ToolFailure", "Tools", "Registration",
        "RegistrationError", "Host", "Location", "OutputLimits", "ToolDefinition",
        "ToolCall", "Completed", "Failed", "ToolError", "RetentionError", "Request",
        "CallJournal", "SQLiteJournal", "JournalConflict",
    }  # fmt: skip
    assert set() == contract - set(pegboard.__all__)


def test_contract_constructors_take_the_contracts_argument_order() -> None:
    """Values the contract writes positionally can be built positionally."""

    async def report(progress: pegboard.Progress) -> None:
        pass

    context = pegboard.ToolContext("s", "agent", "m", "c", report)
    assert ("s", "agent", "m", "c") == (
        context.session_id,
        context.agent,
        context.message_id,
        context.call_id,
    )
    assert pegboard.OutputLimits(100, 4096) == pegboard.OutputLimits(max_lines=100, max_bytes=4096)
    assert "half" == pegboard.Progress("half", 1, 2).message
    assert 3 == pegboard.ToolResponse(3).output
    assert "kind" == pegboard.ToolError("kind", "message").kind  # type: ignore[arg-type]
    assert "x" == pegboard.ToolCall("name", "{}", context).input[0:0] + "x"
    definition = pegboard.ToolDefinition("n", "d", {"type": "object"}, None)
    assert "n" == definition.name


def test_help_imports_no_part_of_the_library() -> None:
    """`pegboard --help` stays cheap: public names are imported when first used."""
    script = """
import sys
from pegboard.cli._main import build_parser
build_parser().format_help()
heavy = ("anyio", "attrs", "attr", "cattrs", "jsonschema", "orjson", "pluggy", "pegboard._tool")
print(sorted(name for name in heavy if name in sys.modules))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert "[]" == result.stdout.strip()


def test_every_public_name_resolves_and_is_listed() -> None:
    """Names imported on first use are still attributes, listed by dir(), and unknown ones fail."""
    for name in pegboard.__all__:
        assert getattr(pegboard, name) is not None
    assert set(pegboard.__all__) <= set(dir(pegboard))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = pegboard.nothing_here  # type: ignore[attr-defined]

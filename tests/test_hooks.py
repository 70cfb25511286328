"""Hook specifications: typed, documented, and in step with docs/hooks.md."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pegboard import hookspecs

DOCS = Path(__file__).resolve().parent.parent / "docs" / "hooks.md"


def _specs() -> list[Callable[..., Any]]:
    return [
        value
        for _, value in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(value, f"{hookspecs.PROJECT}_spec")
    ]


def _signature(function: Callable[..., Any]) -> str:
    annotations = function.__annotations__
    parameters = ", ".join(
        f"{name}: {annotations[name]}" for name in inspect.signature(function).parameters
    )
    return f"def {function.__name__}({parameters}) -> {annotations['return']}"


def test_the_three_hooks_are_specified() -> None:
    """pegboard specifies exactly the hooks its contract names."""
    assert ["activate_location", "execute_after", "prepare_request"] == [
        spec.__name__ for spec in _specs()
    ]


@pytest.mark.parametrize("spec", _specs(), ids=lambda spec: spec.__name__)
def test_every_hook_is_documented_with_its_exact_signature(spec: Callable[..., Any]) -> None:
    """docs/hooks.md has a section per hook showing its exact signature."""
    text = DOCS.read_text()
    assert f"## `{spec.__name__}`" in text
    assert _signature(spec) in text


@pytest.mark.parametrize("spec", _specs(), ids=lambda spec: spec.__name__)
def test_every_hook_documents_every_argument(spec: Callable[..., Any]) -> None:
    """Each hook's docstring names every argument and what the host does with the return."""
    doc = inspect.getdoc(spec) or ""
    for name in inspect.signature(spec).parameters:
        assert f":param {name}:" in doc
    assert "return" in doc.lower()

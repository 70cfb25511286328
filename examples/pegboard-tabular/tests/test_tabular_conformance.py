"""pegboard-tabular keeps pegboard's laws: the conformance kit in pytest and in a shell."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from pegboard.testing import Example, PluginConformance, run_cli

DATA = Path(__file__).parent / "data"


class TestTabular(PluginConformance):
    """One test per check, on asyncio and trio."""

    plugin = "tabular"  # the entry-point name: the kit loads the installed package
    trusted = True  # the tools read files through the trusted filesystem service
    options: ClassVar[dict[str, Any]] = {"max_rows": 50}
    files = DATA  # every fresh Location starts with a copy of tests/data
    examples = (
        Example(tool="tabular_files"),
        Example(tool="tabular_describe_csv", input={"path": "people.csv"}),
        Example(
            tool="tabular_query_csv",
            input={
                "path": "people.csv",
                "where": [{"column": "age", "op": ">", "value": 30}],
                "columns": ["name", "age"],
                "order_by": "age",
                "descending": True,
            },
        ),
        Example(
            tool="tabular_query_csv",
            input={
                "path": "sales/2024.tsv",
                "where": [{"column": "region", "op": "=", "value": "North"}],
            },
        ),
        Example(
            tool="tabular_json_value", input={"path": "config.json", "pointer": "/servers/0/host"}
        ),
        Example(
            tool="tabular_json_value",
            input={"path": "config.json", "pointer": "/servers/9"},
            expect="tool_failure",
        ),
        Example(
            tool="tabular_describe_csv", input={"path": "../secrets.csv"}, expect="tool_failure"
        ),
        Example(tool="tabular_query_csv", input='{"path": 5}', expect="invalid_input"),
    )


def test_pegboard_check_runs_the_same_checks(capsys: pytest.CaptureFixture[str]) -> None:
    """`pegboard check tests/test_tabular_conformance.py:TestTabular` passes too."""
    assert 0 == run_cli([f"{__file__}:TestTabular", "--backend", "asyncio"])
    assert "plugin 'tabular' conforms" in capsys.readouterr().out


def test_pegboard_check_by_plugin_name(capsys: pytest.CaptureFixture[str]) -> None:
    """`pegboard check tabular --trusted` needs no test class for the checks without examples."""
    arguments = ["tabular", "--trusted", "--files", str(DATA), "--backend", "asyncio"]
    for check in ("activation", "definitions", "teardown", "invalid_input"):
        arguments += ["--only", check]
    assert 0 == run_cli(arguments)
    assert "4 passed" in capsys.readouterr().out


def test_pegboard_check_fails_without_trust(capsys: pytest.CaptureFixture[str]) -> None:
    """Without trust the plugin cannot reach the filesystem; the verdict says how to grant it."""
    assert 1 == run_cli(["tabular", "--only", "activation", "--backend", "asyncio"])
    out = capsys.readouterr().out
    assert "FAIL activation" in out
    assert "host.location(trusted=['tabular'])" in out

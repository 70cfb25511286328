"""The benchmark scripts keep running (their figures are read, never asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

#: Every script in benchmarks/, found by listing the folder: none can rot unrun.
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("bench_*.py"))

#: Extra arguments a script needs for a brief run.
ARGUMENTS = {"bench_builtin.py": ["--rounds", "1"]}


def test_every_benchmark_is_listed() -> None:
    """The folder listing finds the scripts (a moved folder would run nothing)."""
    assert {"bench_calls.py", "bench_construction.py", "bench_scale.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_in_quick_mode(script: str) -> None:
    """A quick run exits cleanly and prints its report under Markdown headings."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", *ARGUMENTS.get(script, [])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert 0 == result.returncode, result.stderr
    assert "## " in result.stdout

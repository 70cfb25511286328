"""The benchmark scripts keep running (their figures are read, never asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize(
    ("script", "heading"),
    [
        ("bench_calls.py", "## Against the targets"),
        ("bench_plugins.py", "## One call with execute_after hooks"),
        ("bench_codemode.py", "## Code Mode against separate calls"),
        ("bench_storage.py", "## Opening a Location whose storage holds"),
    ],
)
def test_benchmark_runs_in_quick_mode(script: str, heading: str) -> None:
    """A quick run exits cleanly and prints its comparison against the targets."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert 0 == result.returncode, result.stderr
    assert heading in result.stdout

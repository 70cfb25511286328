"""pegboard.adapters: importing the package loads no framework."""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("pydantic_ai", "langchain_core", "agents")


def test_importing_the_package_loads_no_framework() -> None:
    """Each framework loads only with its own adapter module."""
    probe = (
        "import sys, pegboard, pegboard.adapters; "
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "[]\n" == found
    probe = "import sys, pegboard.adapters.langchain; print('langchain_core' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "True\n" == loaded

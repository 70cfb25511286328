"""Run every check pegboard carries: ruff, mypy strict, then the test suite.

Creates ``.venv`` and installs pegboard with its test dependencies, and the
example plugin in ``examples/pegboard-tabular``, and, with npm, Node 22 and the
MCP conformance suite and reference server in ``.ci-node``, first, so a fresh clone needs only
``python3`` and ``npm``. Extra arguments go to pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
EXAMPLE = ROOT / "examples" / "pegboard-tabular"
#: Node 22, the official MCP conformance suite (tests/test_mcp_conformance.py reads
#: these two names) and the reference server the mount is tested against
#: (tests/test_mcp_everything.py).
NODE_PREFIX = ROOT / ".ci-node"
NODE_PACKAGES = (
    "node@22.23.3",
    "@modelcontextprotocol/conformance@0.1.16",
    "@modelcontextprotocol/server-everything@2026.8.31",
)


def run(*command: str | os.PathLike[str]) -> None:
    print("+", " ".join(map(str, command)), flush=True)
    result = subprocess.run(command, cwd=ROOT, check=False)
    if result.returncode:
        sys.exit(result.returncode)


def install_conformance_suite() -> None:
    """Install the pinned Node and suite into ``.ci-node``, unless they are there already."""
    stamp = NODE_PREFIX / "installed"
    wanted = "\n".join(NODE_PACKAGES)
    modules = NODE_PREFIX / "node_modules"
    present = (modules / "node" / "bin" / "node").exists() and (
        modules / "@modelcontextprotocol" / "conformance"
    ).exists()
    if present and stamp.exists() and stamp.read_text() == wanted:
        return
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("npm is needed to install the MCP conformance suite: install Node.js and npm")
    run(npm, "install", "--prefix", NODE_PREFIX, "--no-audit", "--no-fund", *NODE_PACKAGES)
    stamp.write_text(wanted)


def main() -> None:
    if not (BIN / "python").exists():
        venv.create(VENV, with_pip=True)
    pip = [BIN / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # Strict editable mode links real files, so mypy can follow the package.
    run(*pip, "--config-settings", "editable_mode=strict", "-e", ".[test]")
    # The example plugin, installed as a user would (not editable), so its tests
    # and the conformance kit find it through its real entry point. A stale
    # build/ would ship modules the example no longer has.
    shutil.rmtree(EXAMPLE / "build", ignore_errors=True)
    run(*pip, EXAMPLE)
    install_conformance_suite()
    run(BIN / "ruff", "check", ".")
    run(BIN / "ruff", "format", "--check", ".")
    run(BIN / "mypy")
    run(BIN / "python", "-m", "pytest", *sys.argv[1:])


if __name__ == "__main__":
    main()

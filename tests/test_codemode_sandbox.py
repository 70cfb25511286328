"""Code Mode's sandbox: a program cannot touch the host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import pegboard

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]

SECRET = "the host's secret"

ESCAPES = {
    "open a file by relative path": "open('secret.txt').read()",
    "open a file by absolute path": "open({secret!r}).read()",
    "write a file": "open('planted.txt', 'w').write('x')",
    "read with pathlib": "from pathlib import Path\nPath({secret!r}).read_text()",
    "list a folder": "import os\nos.listdir('/')",
    "read the environment": "import os\nos.environ['PATH']",
    "getenv": "import os\nos.getenv('PATH') or 1 / 0",
    "run a process with os": "import os\nos.system('touch planted.txt')",
    "import subprocess": "import subprocess\nsubprocess.run(['touch', 'planted.txt'])",
    "import socket": "import socket\nsocket.create_connection(('127.0.0.1', 80))",
    "import urllib": "import urllib.request\nurllib.request.urlopen('http://127.0.0.1/')",
    "import http.client": "import http.client\nhttp.client.HTTPConnection('127.0.0.1')",
    "__import__": "__import__('os').listdir('/')",
    "importlib": "import importlib\nimportlib.import_module('os').listdir('/')",
    "exec a string": "exec(\"open('secret.txt').read()\")",
    "eval a string": "eval(\"__import__('os')\")",
    "import ctypes": "import ctypes\nctypes.CDLL(None)",
    "import sys for modules": "import sys\nsys.modules['os'].listdir('/')",
}


@pytest.mark.parametrize("attempt", ESCAPES.values(), ids=list(ESCAPES))
async def test_an_escape_attempt_fails_inside_the_sandbox(
    location: pegboard.Location, workspace: Path, context: Context, attempt: str
) -> None:
    """The attempt raises inside the program (which catches it), and the host is untouched."""
    secret = workspace / "secret.txt"
    secret.write_text(SECRET)
    *setup, last = attempt.format(secret=str(secret)).splitlines()
    body = "".join(f"    {line}\n" for line in [*setup, f"escaped = {last}"])
    code = (
        "escaped = None\n"
        "try:\n"
        f"{body}"
        "except BaseException as error:\n"
        "    print('blocked', type(error).__name__)\n"
        "escaped"
    )
    outcome = await location.prepare(code_mode=True).execute(
        pegboard.ToolCall("execute", {"code": code}, context())
    )
    assert isinstance(outcome, pegboard.Completed), outcome
    shown = "\n".join(item.text for item in outcome.content)  # type: ignore[union-attr]
    assert shown.startswith("blocked "), shown
    assert SECRET not in shown
    assert not (workspace / "planted.txt").exists()
    assert [secret] == list(workspace.iterdir())


async def test_an_uncaught_escape_attempt_fails_the_call(
    location: pegboard.Location, workspace: Path, context: Context
) -> None:
    """The model is told what the sandbox refused."""
    (workspace / "secret.txt").write_text(SECRET)
    outcome = await location.prepare(code_mode=True).execute(
        pegboard.ToolCall("execute", {"code": "open('secret.txt').read()"}, context())
    )
    assert isinstance(outcome, pegboard.Failed)
    assert "PermissionError" in outcome.error.message
    assert SECRET not in outcome.error.message

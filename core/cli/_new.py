"""``pegboard new plugin NAME``: a complete plugin package that passes the kit as written."""

from __future__ import annotations

import argparse
import re

from ._common import Exit, UsageError, path

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ("add", "write_plugin")

_NAME = re.compile(r"[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*\Z")

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "pegboard-$name"
version = "0.1.0"
description = "pegboard plugin: $title tools for LLM agents"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["pegboard", "attrs"]

[project.optional-dependencies]
test = ["pegboard[kit]", "pytest", "trio"]

# Hosts enable the plugin by this name: host.location(root, plugins=["$name"]).
[project.entry-points.pegboard]
$name = "$module"

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

_MODULE = '''\
"""pegboard plugin $name: its tools, registered for each Location that enables it."""

from __future__ import annotations

import attrs

import pegboard


@attrs.frozen
class CountInput:
    text: str = attrs.field(metadata={"description": "The text to count the words of"})


@attrs.frozen
class CountOutput:
    words: int


@pegboard.tool(description="Count the words in a text.", input=CountInput, output=CountOutput)
async def count(input: CountInput, context: pegboard.ToolContext) -> CountOutput:
    return CountOutput(len(input.text.split()))


@pegboard.hookimpl
def activate_location(tools: pegboard.Tools) -> None:
    """Register this plugin's tools in the Location that enables it; they leave with it."""
    tools.register({"count": count}, namespace="$namespace")
'''

_TEST = '''\
"""pegboard's conformance kit: every check runs on asyncio and trio."""

from pegboard.testing import Example, PluginConformance


class Test$cls(PluginConformance):
    plugin = "$name"
    examples = (
        Example(tool="${namespace}_count", input={"text": "one two three"}),
        Example(tool="${namespace}_count", input={"text": 3}, expect="invalid_input"),
    )
'''

_README = """\
# pegboard-$name

A [pegboard](https://pypi.org/project/pegboard/) plugin. Its tools:

- `${namespace}_count` — count the words in a text.

## Use it

```sh
pip install pegboard-$name
```

```python
async with pegboard.Host().location(".", plugins=["$name"]) as location:
    request = location.prepare()
```

## Develop it

```sh
pip install -e '.[test]'
pytest                  # the conformance kit, on asyncio and trio
pegboard check $name    # the same checks, from a shell
```
"""


def add(commands: Any) -> None:
    new = commands.add_parser("new", help="start a new plugin package")
    kinds = new.add_subparsers(dest="kind", required=True, metavar="KIND")
    plugin = kinds.add_parser(
        "plugin",
        help="write a plugin package that installs and passes the conformance kit",
        description="Write pegboard-NAME/: a pyproject.toml with the entry point, a tool "
        "with attrs input and output, a conformance test class, and a README.",
    )
    plugin.add_argument("name", metavar="NAME", help="the plugin's name: lowercase, e.g. notes")
    plugin.add_argument(
        "--directory", type=path, default=".", metavar="DIR",
        help="where to write pegboard-NAME/ (default: the current directory)",
    )  # fmt: skip
    plugin.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    folder = write_plugin(arguments.name, arguments.directory)
    print(f"wrote {folder}; next: cd {folder} && pip install -e '.[test]' && pytest")
    return Exit.COMPLETED


def write_plugin(name: str, directory: Path) -> Path:
    """Write the package for plugin ``name`` into ``directory``; return its folder."""
    if not _NAME.match(name):
        raise UsageError(
            f"plugin name {name!r}: use lowercase letters and digits, words joined by '-' or "
            "'_', starting with a letter (e.g. 'notes' or 'sql-tables')"
        )
    folder = directory / f"pegboard-{name}"
    if folder.exists():
        raise UsageError(f"{folder} already exists; choose another name or --directory")
    module = f"pegboard_{name.replace('-', '_')}"
    values = {
        "name": name,
        "module": module,
        "namespace": name.replace("-", "_"),
        "title": name.replace("-", " ").replace("_", " "),
        "cls": "".join(part.capitalize() for part in re.split(r"[-_]", name)),
    }
    files = {
        "pyproject.toml": _PYPROJECT,
        f"src/{module}/__init__.py": _MODULE,
        "tests/test_conformance.py": _TEST,
        "README.md": _README,
    }
    import string

    for relative, template in files.items():
        file = folder / relative
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(string.Template(template).substitute(values), encoding="utf-8")
    return folder

"""The tutorial cannot drift: every python block in README.md runs."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import anyio
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[object]:
    text = README.read_text()
    return [
        pytest.param(match.group(1), id=f"README.md:{text.count(chr(10), 0, match.start()) + 2}")
        for match in _BLOCK.finditer(text)
    ]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("source", _blocks())
def test_readme_block_runs(
    source: str, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block runs; one that defines ``async def main()`` runs it on both backends."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(source, str(README), "exec"), namespace)
    main = namespace.get("main")
    if inspect.iscoroutinefunction(main):
        anyio.run(main, backend=backend)

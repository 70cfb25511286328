"""Documentation cannot drift: its examples run, and its laws have tests."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from otel import reset_providers

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


#: A block with this line is a whole program: it runs as a script, once.
_PROGRAM = '\nif __name__ == "__main__":\n'


def _examples(*, programs: bool = False) -> list[object]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text()
        for match in _BLOCK.finditer(text):
            if (_PROGRAM in match.group(1)) != programs:
                continue
            line = text.count("\n", 0, match.start()) + 2
            name = f"{document.relative_to(ROOT)}:{line}"
            found.append(pytest.param(match.group(1), id=name))
    return found


@pytest.fixture(autouse=True)
def unset_telemetry() -> Iterator[None]:
    """An example may set OpenTelemetry's providers, as a host does once: unset after."""
    yield
    reset_providers()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("source", _examples())
def test_documented_example_runs(
    source: str, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every python block in the README and docs/ runs; a main() runs on both backends."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    namespace: dict[str, object] = {"__name__": "docs_example"}
    exec(compile(source, "<docs>", "exec"), namespace)
    main = namespace.get("main")
    if inspect.iscoroutinefunction(main):
        anyio.run(main, backend=backend)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("source", _examples(programs=True))
def test_documented_program_runs(
    source: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every python block that is a whole program runs as a script and exits 0; one that
    uses Temporal gets the test session's server as $TEMPORAL_ADDRESS.
    """
    import os
    import subprocess
    import sys

    environment = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    if "temporalio" in source:
        environment["TEMPORAL_ADDRESS"] = request.getfixturevalue("temporal_server")
    (tmp_path / "example.py").write_text(source)
    result = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert 0 == result.returncode, result.stderr


def test_the_temporal_page_has_a_program() -> None:
    """docs/temporal.md's complete workflow example is collected as a program."""
    assert any("docs/temporal.md" in str(param.id) for param in _examples(programs=True))  # type: ignore[attr-defined]


def _laws(text: str) -> list[str]:
    return re.findall(r"^\d+\. \*\*([^*]+)\*\*", text, re.MULTILINE)


def test_every_law_has_a_test_named_after_it() -> None:
    """Each law in docs/laws.md has a test called test_law_<name>."""
    laws = _laws((ROOT / "docs" / "laws.md").read_text())
    assert len(laws) == 11
    sources = "\n".join(path.read_text() for path in (ROOT / "tests").glob("test_*.py"))
    missing = [
        law
        for law in laws
        if not re.search(
            rf"def test_law_{law.lower().replace(' ', '_').replace('-', '_')}", sources
        )
    ]
    assert missing == []


def test_laws_match_the_design_contract() -> None:
    """docs/laws.md lists the same laws, in the same order, as the design contract."""
    design = ROOT.parent / "shared" / "DESIGN.md"
    if not design.exists():
        pytest.skip("the design contract is not beside this checkout")
    laws = design.read_text().split("## Laws", 1)[1]
    contract = re.findall(r"^\d+\. ([A-Z][\w -]+?):", laws, re.MULTILINE)
    assert contract == _laws((ROOT / "docs" / "laws.md").read_text())

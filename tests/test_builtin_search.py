"""The glob and grep tools: sorted, capped, honouring .gitignore, never leaving the Location."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from builtin_calls import call, failure, metadata, opened, text

import pegboard

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

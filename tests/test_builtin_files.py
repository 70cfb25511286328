"""The read, write and edit tools on a real folder."""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from builtin_calls import call, failure, metadata, opened, text
from hypothesis import given
from hypothesis import strategies as st

import pegboard
from pegboard.plugins_builtin._files import _skip_lines

pytestmark = pytest.mark.anyio


@pytest.fixture
async def location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> AsyncIterator[pegboard.Location]:
    async with opened(host, workspace, storage_dir) as opened_location:
        yield opened_location


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("the secret\n")
    return folder


def lines(count: int, width: int = 0) -> str:
    return "".join(f"line {n}{'x' * width}\n" for n in range(1, count + 1))


# read


async def test_read_numbers_lines_like_cat_n(location: pegboard.Location, workspace: Path) -> None:
    """Lines come numbered from 1, right-aligned, tab-separated, without line endings."""
    (workspace / "a.txt").write_text("alpha\r\nbeta\n\ngamma")
    outcome = await call(location, "read", path="a.txt")
    assert "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma" == text(outcome)
    assert {"path": "a.txt", "first_line": 1, "lines": 4} == metadata(outcome)


async def test_read_pages_by_offset_and_limit(location: pegboard.Location, workspace: Path) -> None:
    """offset is the first line shown, limit how many; the last line says where to go on."""
    (workspace / "a.txt").write_text(lines(10))
    outcome = await call(location, "read", path="a.txt", offset=4, limit=3)
    assert (
        "     4\tline 4\n     5\tline 5\n     6\tline 6\n(more lines follow; read on with offset=7)"
    ) == text(outcome)
    assert 7 == metadata(outcome)["next_offset"]
    last = await call(location, "read", path="a.txt", offset=7, limit=10)
    assert text(last).endswith("    10\tline 10")
    assert "next_offset" not in metadata(last)


async def test_read_defaults_to_2000_lines_within_the_output_limits(
    location: pegboard.Location, workspace: Path
) -> None:
    """A long file's first page fits the default bounds: no managed file, a next offset."""
    (workspace / "long.txt").write_text(lines(3000))
    outcome = await call(location, "read", path="long.txt", limit=5000)
    shown = text(outcome)
    assert "omitted; the full output is saved" not in shown
    assert 2000 == shown.count("\n") + 1
    assert shown.endswith("  1999\tline 1999\n(more lines follow; read on with offset=2000)")


async def test_read_pages_stop_at_about_50_kb(location: pegboard.Location, workspace: Path) -> None:
    """Wide lines end a page by size, not by count, and say so."""
    (workspace / "wide.txt").write_text(lines(100, width=1000))
    shown = text(await call(location, "read", path="wide.txt"))
    assert len(shown.encode()) <= 51_200
    assert shown.endswith(
        "x\n(more lines follow (pages stop at about 50 KB); read on with offset=50)"
    )
    assert "\n    49\tline 49x" in shown


async def test_read_cuts_overlong_lines(location: pegboard.Location, workspace: Path) -> None:
    """A line over 2,000 characters is cut with a note; the next line is intact."""
    (workspace / "min.js").write_text("a" * 5000 + "\nshort\n" + "b" * 100_000 + "\n")
    outcome = await call(location, "read", path="min.js")
    first, second, third = text(outcome).split("\n")
    assert first == "     1\t" + "a" * 2000 + "… [line cut to 2,000 characters of 5,000 characters]"
    assert "     2\tshort" == second
    assert third.endswith("… [line cut to 2,000 characters of 100,001 bytes]")
    assert 2 == metadata(outcome)["cut_lines"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"text\0more", "a NUL byte"), (b"caf\xe9 latin-1\n", "invalid UTF-8 at byte 3")],
)
async def test_read_refuses_binary_files(
    location: pegboard.Location, workspace: Path, data: bytes, reason: str
) -> None:
    """NUL bytes or invalid UTF-8 in the first 8 KiB make a file binary."""
    (workspace / "blob.bin").write_bytes(data)
    message = failure(await call(location, "read", path="blob.bin"))
    assert f"blob.bin looks like a binary file ({reason} in its first 8,192 bytes)" in message


async def test_read_accepts_a_character_cut_by_the_8_kib_sniff(
    location: pegboard.Location, workspace: Path
) -> None:
    """A multibyte character straddling byte 8,192 is text, not binary."""
    (workspace / "text.txt").write_text("a" * 8191 + "é\nend\n")
    assert text(await call(location, "read", path="text.txt")).endswith("     2\tend")


async def test_read_of_empty_and_short_files(location: pegboard.Location, workspace: Path) -> None:
    """An empty file says so; an offset past the end is a clear failure."""
    (workspace / "empty.txt").write_text("")
    (workspace / "two.txt").write_text("a\nb\n")
    assert "(empty.txt is empty)" == text(await call(location, "read", path="empty.txt"))
    message = failure(await call(location, "read", path="two.txt", offset=5))
    assert "offset 5 is past the end of two.txt, which has 2 lines" in message
    assert "counts lines from 1" in failure(await call(location, "read", path="two.txt", offset=0))
    assert "1 or more" in failure(await call(location, "read", path="two.txt", limit=0))


async def test_read_explains_missing_files_and_folders(
    location: pegboard.Location, workspace: Path
) -> None:
    """A missing file or a folder fails with what to do."""
    (workspace / "src").mkdir()
    missing = failure(await call(location, "read", path="nope.txt"))
    assert "'nope.txt' does not exist in the Location" in missing
    assert "is a directory" in failure(await call(location, "read", path="src"))


async def test_read_finds_a_page_deep_in_a_large_file(
    location: pegboard.Location, workspace: Path
) -> None:
    """Pages on either side of the 1 MiB counting blocks start at the right line."""
    (workspace / "big.txt").write_text(lines(300_000))  # 3.4 MB
    for offset in (92_000, 92_001, 183_000, 299_999):
        outcome = await call(location, "read", path="big.txt", offset=offset, limit=2)
        expected = [f"{n:6}\tline {n}" for n in range(offset, min(offset + 2, 300_001))]
        assert expected == text(outcome).split("\n")[: len(expected)]
    message = failure(await call(location, "read", path="big.txt", offset=300_002))
    assert "past the end of big.txt, which has 300,000 lines" in message


class _NoReadline(io.BytesIO):
    def readline(self, size: int | None = -1, /) -> bytes:
        raise AssertionError("lines before a page are counted in blocks, not read one by one")


@given(
    text=st.text(alphabet="ab\n", max_size=60),
    count=st.integers(min_value=0, max_value=70),
    block=st.integers(min_value=1, max_value=9),
    stretch=st.integers(min_value=1, max_value=5),
)
def test_skipping_lines_matches_reading_them(
    text: str, count: int, block: int, stretch: int
) -> None:
    """Skipping lands where reading ``count`` lines would, at any block and stretch size."""
    data = text.encode()
    expected = io.BytesIO(data)
    passed = sum(1 for _ in zip(range(count), iter(expected.readline, b""), strict=False))
    file = _NoReadline(data)
    assert passed == _skip_lines(file, count, block=block, stretch=stretch)
    assert expected.tell() == file.tell()


async def test_read_opens_managed_output(location: pegboard.Location, storage_dir: Path) -> None:
    """A result too long to show is saved; read pages through the saved file."""
    outcome = await call(location, "bash", command="seq 1 5000")
    saved = re.search(r"the full output is saved in (\S+) …", text(outcome))
    assert saved is not None
    path = Path(saved.group(1))
    assert location.storage.directory == path.parent
    assert storage_dir == path.parent.parent
    page = await call(location, "read", path=str(path), offset=4000, limit=2)
    assert "  4000\t4000\n  4001\t4001\n(more lines follow; read on with offset=4002)" == text(page)


@pytest.mark.parametrize("tool", ["read", "write", "edit"])
@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "{outside}/secret.txt", "etc-link/passwd", "sibling/secret.txt"],
)
async def test_file_tools_never_leave_the_location(
    location: pegboard.Location, workspace: Path, outside: Path, tool: str, path: str
) -> None:
    """'..', absolute paths, and symlinks to /etc or to a sibling folder are refused."""
    (workspace / "etc-link").symlink_to("/etc")
    (workspace / "sibling").symlink_to(outside)
    arguments = {
        "read": {},
        "write": {"content": "overwritten\n"},
        "edit": {"old_string": "secret", "new_string": "leaked"},
    }[tool]
    outcome = await call(location, tool, path=path.format(outside=outside), **arguments)
    assert "outside the Location" in failure(outcome)
    assert "the secret\n" == (outside / "secret.txt").read_text()
    assert "root:" not in text(outcome)


# write


async def test_write_creates_folders_and_reports(
    location: pegboard.Location, workspace: Path
) -> None:
    """Parents are made; the first write creates, the second replaces, exactly."""
    created = await call(location, "write", path="a/b/c.txt", content="one\ntwo")
    assert "Created a/b/c.txt (7 bytes, 2 lines)" == text(created)
    assert {"path": "a/b/c.txt", "bytes": 7, "created": True} == metadata(created)
    replaced = await call(location, "write", path="a/b/c.txt", content="é\n")
    assert "Replaced a/b/c.txt (3 bytes, 1 line)" == text(replaced)
    assert "é\n" == (workspace / "a" / "b" / "c.txt").read_text()
    assert ["c.txt"] == os.listdir(workspace / "a" / "b")


async def test_write_keeps_an_executable_executable(
    location: pegboard.Location, workspace: Path
) -> None:
    """Rewriting a script keeps its mode."""
    (workspace / "run.sh").write_text("#!/bin/sh\n")
    (workspace / "run.sh").chmod(0o755)
    await call(location, "write", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert 0o755 == stat.S_IMODE((workspace / "run.sh").stat().st_mode)


async def test_write_refuses_managed_output(location: pegboard.Location, storage_dir: Path) -> None:
    """Managed output is readable, never writable."""
    storage_dir.mkdir(exist_ok=True)
    (storage_dir / "tool-output-x.txt").write_text("kept\n")
    outcome = await call(location, "write", path=str(storage_dir / "tool-output-x.txt"), content="")
    assert "outside the Location" in failure(outcome)
    assert "kept\n" == (storage_dir / "tool-output-x.txt").read_text()


# edit


async def test_edit_replaces_exactly_one_occurrence(
    location: pegboard.Location, workspace: Path
) -> None:
    """The text is replaced once, and the result says where."""
    (workspace / "app.py").write_text("a = 1\nb = 2\nc = 3\n")
    outcome = await call(location, "edit", path="app.py", old_string="b = 2", new_string="b = 20")
    assert "Edited app.py: replaced 1 occurrence (the first at line 2)" == text(outcome)
    assert "a = 1\nb = 20\nc = 3\n" == (workspace / "app.py").read_text()


async def test_edit_refuses_a_missing_old_string(
    location: pegboard.Location, workspace: Path
) -> None:
    """Text that is not there fails, changing nothing."""
    (workspace / "app.py").write_text("a = 1\n")
    outcome = await call(location, "edit", path="app.py", old_string="a = 2", new_string="a = 3")
    assert "old_string was not found in app.py" in failure(outcome)
    assert "a = 1\n" == (workspace / "app.py").read_text()


async def test_edit_refuses_an_ambiguous_old_string(
    location: pegboard.Location, workspace: Path
) -> None:
    """Text found three times fails, saying how many times; replace_all replaces all."""
    (workspace / "app.py").write_text("x\nx\nx\n")
    outcome = await call(location, "edit", path="app.py", old_string="x", new_string="y")
    assert "old_string appears 3 times in app.py" in failure(outcome)
    assert "x\nx\nx\n" == (workspace / "app.py").read_text()
    every = await call(
        location, "edit", path="app.py", old_string="x", new_string="y", replace_all=True
    )
    assert "replaced 3 occurrences" in text(every)
    assert "y\ny\ny\n" == (workspace / "app.py").read_text()


async def test_edit_refuses_pointless_edits(location: pegboard.Location, workspace: Path) -> None:
    """An empty old_string or no change at all is refused."""
    (workspace / "app.py").write_text("a\n")
    assert "old_string is empty" in failure(
        await call(location, "edit", path="app.py", old_string="", new_string="b")
    )
    assert "the same" in failure(
        await call(location, "edit", path="app.py", old_string="a", new_string="a")
    )


async def test_edit_matches_what_read_showed_in_a_crlf_file(
    location: pegboard.Location, workspace: Path
) -> None:
    """read shows lines without '\\r'; edit finds them and keeps the file's line endings."""
    (workspace / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(location, "edit", path="win.txt", old_string="one\ntwo", new_string="1\n2")
    assert b"1\r\n2\r\nthree\r\n" == (workspace / "win.txt").read_bytes()


async def test_edit_refuses_files_that_are_not_utf8(
    location: pegboard.Location, workspace: Path
) -> None:
    """A file that is not UTF-8 is not edited as text."""
    (workspace / "latin.txt").write_bytes(b"caf\xe9\n")
    outcome = await call(location, "edit", path="latin.txt", old_string="caf", new_string="tea")
    assert "latin.txt is not UTF-8 text" in failure(outcome)
    assert b"caf\xe9\n" == (workspace / "latin.txt").read_bytes()


async def test_edit_of_a_missing_file_says_so(location: pegboard.Location) -> None:
    """Editing a file that does not exist fails clearly."""
    outcome = await call(location, "edit", path="nope.py", old_string="a", new_string="b")
    assert "'nope.py' does not exist" in failure(outcome)


@pytest.mark.parametrize("path", ["a" * 300, "q/" * 3000 + "x"], ids=["name", "path"])
async def test_write_to_a_name_too_long_for_the_system_is_a_failure(
    location: pegboard.Location, path: str
) -> None:
    """A file name or path longer than the system allows is the call's failure, not a
    defect."""
    assert failure(await call(location, "write", path=path, content="x")).endswith(
        ": File name too long"
    )

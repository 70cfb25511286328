"""The filesystem service: every path stays inside the Location's root."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from builtin_calls import call, opened

import pegboard


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A sibling of the workspace holding a secret."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("the secret\n")
    return folder


@pytest.fixture
def filesystem(workspace: Path, storage_dir: Path) -> pegboard.Filesystem:
    storage_dir.mkdir()
    (workspace / "sub").mkdir()
    (workspace / "sub" / "notes.txt").write_text("inside\n")
    return pegboard.Filesystem(workspace, readable=[storage_dir])


def test_relative_paths_resolve_against_the_root(
    filesystem: pegboard.Filesystem, workspace: Path
) -> None:
    """A relative path names a file below the root; an absolute one inside is kept."""
    assert workspace / "sub" / "notes.txt" == filesystem.resolve("sub/notes.txt")
    assert workspace / "sub" / "notes.txt" == filesystem.resolve(workspace / "sub/notes.txt")
    assert b"inside\n" == filesystem.read_bytes_sync("sub/../sub/notes.txt")
    assert "sub/notes.txt" == filesystem.relative(workspace / "sub" / "notes.txt")
    assert "." == filesystem.relative(workspace)


@pytest.mark.parametrize("path", ["../outside/secret.txt", "sub/../../outside/secret.txt"])
def test_dot_dot_cannot_leave_the_root(filesystem: pegboard.Filesystem, path: str) -> None:
    """'..' that climbs above the root is refused, for reading and for writing."""
    with pytest.raises(pegboard.OutsideLocationError, match="outside the Location"):
        filesystem.resolve(path)
    with pytest.raises(pegboard.OutsideLocationError):
        filesystem.read_bytes_sync(path)
    with pytest.raises(pegboard.OutsideLocationError):
        filesystem.write_bytes_sync(path, b"overwritten")


@pytest.mark.parametrize("path", ["\0", "notes\0.txt", "/\0"])
def test_a_nul_in_a_path_is_refused_with_a_reason(
    filesystem: pegboard.Filesystem, path: str
) -> None:
    """A NUL byte (which the OS would reject with a bare ValueError) is refused by name."""
    with pytest.raises(pegboard.OutsideLocationError, match="holds a NUL character"):
        filesystem.resolve(path)
    with pytest.raises(pegboard.OutsideLocationError):
        filesystem.write_bytes_sync(path, b"x")


def test_absolute_paths_elsewhere_are_refused(
    filesystem: pegboard.Filesystem, outside: Path
) -> None:
    """An absolute path outside the root is refused, naming what to do instead."""
    for path in ("/etc/passwd", outside / "secret.txt"):
        with pytest.raises(pegboard.OutsideLocationError, match="use a path inside it"):
            filesystem.read_bytes_sync(path)
    assert "the secret\n" == (outside / "secret.txt").read_text()


@pytest.mark.parametrize("target", ["/etc", "sibling"])
def test_symlinks_that_lead_outside_are_refused(
    filesystem: pegboard.Filesystem, workspace: Path, outside: Path, target: str
) -> None:
    """A symlink to /etc or to a sibling folder never lets a path out."""
    destination = Path("/etc") if target == "/etc" else outside
    (workspace / "link").symlink_to(destination, target_is_directory=True)
    name = "passwd" if target == "/etc" else "secret.txt"
    with pytest.raises(pegboard.OutsideLocationError, match="through a symlink"):
        filesystem.read_bytes_sync(f"link/{name}")
    with pytest.raises(pegboard.OutsideLocationError):
        filesystem.write_bytes_sync("link/planted.txt", b"x")
    with pytest.raises(pegboard.OutsideLocationError):
        filesystem.open_directory("link")
    assert not (destination / "planted.txt").exists()


def test_symlinks_inside_the_root_are_followed(
    filesystem: pegboard.Filesystem, workspace: Path
) -> None:
    """A symlink that stays inside resolves to its target."""
    (workspace / "alias").symlink_to(workspace / "sub")
    assert b"inside\n" == filesystem.read_bytes_sync("alias/notes.txt")


def _swap_after_resolving(
    monkeypatch: pytest.MonkeyPatch, swap: Path, destination: Path
) -> list[Path]:
    """Make the next resolve turn ``swap`` into a symlink to ``destination`` once it returns."""
    resolved: list[Path] = []
    resolve = pegboard.Filesystem.resolve

    def resolve_then_swap(
        self: pegboard.Filesystem, path: str | os.PathLike[str], *, write: bool = False
    ) -> Path:
        real = resolve(self, path, write=write)
        if not resolved:
            swap.rename(swap.with_name(swap.name + ".moved"))
            swap.symlink_to(destination)
        resolved.append(real)
        return real

    monkeypatch.setattr(pegboard.Filesystem, "resolve", resolve_then_swap)
    return resolved


def test_a_folder_swapped_for_a_symlink_after_the_check_is_refused(
    filesystem: pegboard.Filesystem, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between resolving and opening, 'sub' becomes a symlink to the outside: the open refuses."""
    (outside / "notes.txt").write_text("outside notes\n")
    resolved = _swap_after_resolving(monkeypatch, workspace / "sub", outside)
    with pytest.raises(pegboard.OutsideLocationError, match="changed while it was being opened"):
        filesystem.read_bytes_sync("sub/notes.txt")
    assert [workspace / "sub" / "notes.txt"] == resolved


def test_a_file_swapped_for_a_symlink_after_the_check_is_refused(
    filesystem: pegboard.Filesystem, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last component swapped for a symlink is refused too."""
    _swap_after_resolving(monkeypatch, workspace / "sub" / "notes.txt", outside / "secret.txt")
    with pytest.raises(pegboard.OutsideLocationError, match="changed while it was being opened"):
        filesystem.read_bytes_sync("sub/notes.txt")


def test_a_write_through_a_swapped_folder_is_refused(
    filesystem: pegboard.Filesystem, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write never lands outside through a folder swapped after the check."""
    _swap_after_resolving(monkeypatch, workspace / "sub", outside)
    with pytest.raises(pegboard.OutsideLocationError, match="changed while it was being opened"):
        filesystem.write_bytes_sync("sub/planted.txt", b"x")
    assert not (outside / "planted.txt").exists()


def test_a_directory_swapped_for_a_symlink_is_not_opened(
    filesystem: pegboard.Filesystem, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_directory, used for listing, refuses a folder swapped for a symlink."""
    _swap_after_resolving(monkeypatch, workspace / "sub", outside)
    with pytest.raises(pegboard.OutsideLocationError, match="changed while it was being opened"):
        filesystem.open_directory("sub")


def test_devices_and_fifos_are_refused(filesystem: pegboard.Filesystem, workspace: Path) -> None:
    """A FIFO inside the root is not a regular file: refused at once, without blocking."""
    os.mkfifo(workspace / "pipe")
    with pytest.raises(pegboard.OutsideLocationError, match="not a regular file"):
        filesystem.read_bytes_sync("pipe")


def test_missing_and_wrong_kinds_of_paths_say_so(filesystem: pegboard.Filesystem) -> None:
    """A missing folder is not mistaken for a swapped symlink; a folder is not a file."""
    with pytest.raises(FileNotFoundError):
        filesystem.read_bytes_sync("missing/notes.txt")
    with pytest.raises(IsADirectoryError):
        filesystem.read_bytes_sync("sub")
    with pytest.raises(NotADirectoryError):
        filesystem.open_directory("sub/notes.txt")
    with pytest.raises(NotADirectoryError):
        filesystem.read_bytes_sync("sub/notes.txt/more")


def test_managed_output_is_readable_but_never_writable(
    filesystem: pegboard.Filesystem, storage_dir: Path
) -> None:
    """Managed storage can be read through the service; writing there is refused."""
    (storage_dir / "tool-output-1.txt").write_text("retained\n")
    assert b"retained\n" == filesystem.read_bytes_sync(storage_dir / "tool-output-1.txt")
    with pytest.raises(pegboard.OutsideLocationError):
        filesystem.write_bytes_sync(storage_dir / "tool-output-1.txt", b"changed")
    assert "retained\n" == (storage_dir / "tool-output-1.txt").read_text()


def test_a_readable_folder_is_readable_only_while_its_context_is_open(
    filesystem: pegboard.Filesystem, outside: Path
) -> None:
    """readable() opens a folder for reading, never writing, until its context closes."""
    with filesystem.readable(outside):
        assert b"the secret\n" == filesystem.read_bytes_sync(outside / "secret.txt")
        with pytest.raises(pegboard.OutsideLocationError):
            filesystem.write_bytes_sync(outside / "secret.txt", b"changed")
    with pytest.raises(pegboard.OutsideLocationError):
        filesystem.read_bytes_sync(outside / "secret.txt")


def test_writes_create_folders_and_replace_atomically(
    filesystem: pegboard.Filesystem, workspace: Path
) -> None:
    """Missing parents are created; no temporary file is left behind."""
    filesystem.write_bytes_sync("new/deeper/file.txt", b"one")
    filesystem.write_bytes_sync("new/deeper/file.txt", b"two")
    assert b"two" == (workspace / "new" / "deeper" / "file.txt").read_bytes()
    assert ["file.txt"] == os.listdir(workspace / "new" / "deeper")


def test_replacing_a_file_keeps_its_mode(filesystem: pegboard.Filesystem, workspace: Path) -> None:
    """An executable script stays executable after it is rewritten."""
    script = workspace / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    filesystem.write_bytes_sync("run.sh", b"#!/bin/sh\necho hi\n")
    assert 0o750 == stat.S_IMODE(script.stat().st_mode)


def test_writing_over_a_folder_is_refused(filesystem: pegboard.Filesystem) -> None:
    """A path that names a folder cannot be replaced by a file."""
    with pytest.raises(pegboard.OutsideLocationError, match="not a regular file"):
        filesystem.write_bytes_sync("sub", b"x")


def test_open_directory_lists_a_folder(filesystem: pegboard.Filesystem) -> None:
    """open_directory gives a descriptor to list, for the root and a folder below it."""
    for path, expected in ((".", "sub"), ("sub", "notes.txt")):
        descriptor = filesystem.open_directory(path)
        try:
            assert expected in os.listdir(descriptor)
        finally:
            os.close(descriptor)


def test_a_write_is_on_disk_before_it_returns(
    filesystem: pegboard.Filesystem, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write_bytes fsyncs the whole new file before the rename, then the folder after it,
    so the built-in write and edit report success only for what survives a crash."""
    target = workspace / "sub" / "notes.txt"
    events: list[tuple[str, int, int]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor: int) -> None:
        info = os.fstat(descriptor)
        events.append(("fsync", info.st_ino, info.st_size))
        real_fsync(descriptor)

    def replace(*args: object, **kwargs: object) -> None:
        events.append(("replace", 0, 0))
        real_replace(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    filesystem.write_bytes_sync("sub/notes.txt", b"changed\n")
    file = ("fsync", target.stat().st_ino, len(b"changed\n"))
    folder = ("fsync", target.parent.stat().st_ino, target.parent.stat().st_size)
    assert [file, ("replace", 0, 0), folder] == events


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["write", "edit"])
async def test_the_builtin_write_and_edit_are_on_disk_before_they_succeed(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    tool: str,
) -> None:
    """write and edit report success only after the new content was fsynced."""
    (workspace / "notes.txt").write_text("draft\n")
    synced: list[tuple[int, int]] = []
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        info = os.fstat(descriptor)
        if stat.S_ISREG(info.st_mode):
            synced.append((info.st_ino, info.st_size))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)
    arguments = (
        {"path": "notes.txt", "content": "final\n"}
        if tool == "write"
        else {"path": "notes.txt", "old_string": "draft", "new_string": "final"}
    )
    async with opened(host, workspace, storage_dir) as location:
        read = await call(location, "read", path="notes.txt")
        assert isinstance(read, pegboard.Completed)
        outcome = await call(location, tool, **arguments)
    assert isinstance(outcome, pegboard.Completed), outcome
    written = workspace / "notes.txt"
    assert "final\n" == written.read_text()
    assert [(written.stat().st_ino, len(b"final\n"))] == synced

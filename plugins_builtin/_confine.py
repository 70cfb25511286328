"""What the sandbox masks for a command: the paths the rules deny for ``read`` and ``edit``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import attrs

import pegboard

from ._denied import may_deny, pruned_folders

__all__ = ("Masks", "masks")


@attrs.frozen
class Masks:
    """Paths a command must not read (``hidden``) or change (``read_only``)."""

    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


def masks(filesystem: pegboard.Filesystem, permissions: pegboard.Permissions) -> Masks:
    """Every existing path in the Location that the rules deny for ``read`` or ``edit``.

    Runs in a worker thread. A denied file's other hard links in the Location
    are masked too; a denied file with links elsewhere (where no mask can
    reach) is refused with a `pegboard.ToolFailure` naming it.
    """
    reads, edits = may_deny(permissions, "read"), may_deny(permissions, "edit")
    if not (reads or edits):
        return Masks()
    walk = _Walk(filesystem.root, permissions, reads=reads, edits=edits)
    walk.folder(filesystem.root, "")
    walk.absolute()
    return walk.result()


class _Walk:
    def __init__(
        self, root: Path, permissions: pegboard.Permissions, *, reads: bool, edits: bool
    ) -> None:
        self.root = root
        self.permissions = permissions
        self.reads, self.edits = reads, edits
        self.hidden_folders = set(pruned_folders(permissions, "read")) if reads else set()
        self.fixed_folders = set(pruned_folders(permissions, "edit")) if edits else set()
        self.hidden: dict[Path, os.stat_result] = {}
        self.read_only: dict[Path, os.stat_result] = {}
        #: Every name of each file with more than one link, by (device, inode).
        self.links: dict[tuple[int, int], list[Path]] = {}

    def denied(self, action: str, shown: str) -> bool:
        return self.permissions.evaluate(action, shown) == "deny"

    def folder(self, path: Path, shown: str, *, fixed: bool = False) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError:
            return  # unreadable here too: nothing to mask below it
        for entry in entries:
            name = f"{shown}/{entry.name}" if shown else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            target = Path(entry.path)
            is_folder = stat.S_ISDIR(info.st_mode)
            if self.reads and (
                self.denied("read", name) or (is_folder and name in self.hidden_folders)
            ):
                self.hidden[target] = info
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                self.links.setdefault((info.st_dev, info.st_ino), []).append(target)
            inside_fixed = fixed
            if (
                self.edits
                and not fixed
                and (self.denied("edit", name) or (is_folder and name in self.fixed_folders))
            ):
                self.read_only[target] = info
                inside_fixed = True
            if is_folder:
                self.folder(target, name, fixed=inside_fixed)

    def absolute(self) -> None:
        """Deny rules that name absolute paths outside the Location (``/etc/shadow``)."""
        for rule in getattr(self.permissions, "rules", ()):
            resource = rule.resource.removesuffix("/*")
            if rule.effect != "deny" or not resource.startswith("/") or "*" in resource:
                continue
            if "?" in resource or Path(resource).is_relative_to(self.root):
                continue
            path = Path(resource)
            try:
                info = path.lstat()
            except OSError:
                continue
            if self.reads and rule.matches("read", rule.resource):
                self.hidden.setdefault(path, info)
            elif self.edits and rule.matches("edit", rule.resource):
                self.read_only.setdefault(path, info)

    def result(self) -> Masks:
        for chosen in (self.hidden, self.read_only):
            for path, info in list(chosen.items()):
                if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
                    continue
                names = self.links.get((info.st_dev, info.st_ino), [])
                names = [*dict.fromkeys([path, *names])]
                if len(names) < info.st_nlink:
                    shown = _shown(self.root, path)
                    raise pegboard.ToolFailure(
                        f"{shown!r} is denied by this Location's rules and has "
                        f"{info.st_nlink} hard links, {info.st_nlink - len(names)} of them "
                        "outside the Location where the sandbox cannot mask them; the command "
                        "was not run. Remove the other links (find / -samefile "
                        f"{shown}) or ask the host to change the rule"
                    )
                for name in names:
                    chosen.setdefault(name, info)
        hidden = tuple(self.hidden)
        read_only = tuple(path for path in self.read_only if path not in self.hidden)
        return Masks(hidden, read_only)


def _shown(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)

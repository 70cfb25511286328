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
    walk = _Walk(str(filesystem.root), permissions, reads=reads, edits=edits)
    # Rules that deny editing the root itself (`*`, `.`) leave the whole Location read-only.
    fixed = bool(walk.deny["edit"]) and walk.denied("edit", ".")
    if fixed:
        walk.read_only.append(str(filesystem.root))
    walk.folder(str(filesystem.root), "", fixed=fixed)
    walk.absolute()
    return walk.result()


def _deny_rules(permissions: pegboard.Permissions, action: str) -> list[pegboard.PermissionRule]:
    rules = getattr(permissions, "rules", None)
    if rules is None:  # rules that cannot be read: every path is judged by the service
        return [pegboard.PermissionRule(action, "*", "deny")]
    return [rule for rule in rules if rule.effect == "deny" and rule.matches(action, rule.resource)]


class _Walk:
    """One pass over the Location: names and types from the directory alone, no stat."""

    def __init__(
        self, root: str, permissions: pegboard.Permissions, *, reads: bool, edits: bool
    ) -> None:
        self.root = root
        self.permissions = permissions
        # Only a deny rule can make a path denied: paths none of them matches are
        # settled without the full (last-match-wins) evaluation.
        self.deny = {
            action: _deny_rules(permissions, action) if wanted else []
            for action, wanted in (("read", reads), ("edit", edits))
        }
        self.hidden_folders = set(pruned_folders(permissions, "read")) if reads else set()
        self.fixed_folders = set(pruned_folders(permissions, "edit")) if edits else set()
        self.hidden: list[str] = []
        self.read_only: list[str] = []
        #: Inode numbers of every regular file seen, for denied files' other names.
        self.inodes: dict[int, list[str]] = {}

    def denied(self, action: str, shown: str) -> bool:
        rules = self.deny[action]
        if not any(rule.matches(action, shown) for rule in rules):
            return False
        return self.permissions.evaluate(action, shown) == "deny"

    def folder(self, path: str, shown: str, *, fixed: bool) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError:
            return  # unreadable here too: nothing to mask below it
        for entry in entries:
            name = f"{shown}/{entry.name}" if shown else entry.name
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
                is_file = not is_folder and entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if is_file:
                self.inodes.setdefault(entry.inode(), []).append(entry.path)
            if self.deny["read"] and (
                (is_folder and name in self.hidden_folders) or self.denied("read", name)
            ):
                self.hidden.append(entry.path)
                continue
            inside_fixed = fixed
            if (
                self.deny["edit"]
                and not fixed
                and ((is_folder and name in self.fixed_folders) or self.denied("edit", name))
            ):
                self.read_only.append(entry.path)
                inside_fixed = True
            if is_folder:
                self.folder(entry.path, name, fixed=inside_fixed)

    def absolute(self) -> None:
        """Deny rules that name absolute paths outside the Location (``/etc/shadow``)."""
        for action, chosen in (("read", self.hidden), ("edit", self.read_only)):
            for rule in self.deny[action]:
                resource = rule.resource.removesuffix("/*")
                if not resource.startswith("/") or "*" in resource or "?" in resource:
                    continue
                if resource == self.root or resource.startswith(self.root + "/"):
                    continue
                if os.path.lexists(resource) and resource not in chosen:
                    chosen.append(resource)

    def result(self) -> Masks:
        hidden = self.linked(self.hidden)
        read_only = [path for path in self.linked(self.read_only) if path not in set(hidden)]
        return Masks(tuple(map(Path, hidden)), tuple(map(Path, read_only)))

    def linked(self, chosen: list[str]) -> list[str]:
        """``chosen`` and every other name of its files with more than one link."""
        found = dict.fromkeys(chosen)
        for path in chosen:
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
                continue
            names = [path]
            for other in self.inodes.get(info.st_ino, []):
                try:
                    same = os.lstat(other)
                except OSError:
                    continue
                if (same.st_dev, same.st_ino) == (info.st_dev, info.st_ino) and other != path:
                    names.append(other)
            if len(names) < info.st_nlink:
                shown = _shown(self.root, path)
                raise pegboard.ToolFailure(
                    f"{shown!r} is denied by this Location's rules and has "
                    f"{info.st_nlink} hard links, {info.st_nlink - len(names)} of them "
                    "outside the Location where the sandbox cannot mask them; the command "
                    "was not run. Remove the other links (find / -samefile "
                    f"{shown}) or ask the host to change the rule"
                )
            found.update(dict.fromkeys(names))
        return list(found)


def _shown(root: str, path: str) -> str:
    if path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return path

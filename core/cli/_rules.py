"""``--allow``, ``--deny`` and ``--permissions``: the host's permission rules, in order."""

from __future__ import annotations

import argparse

from ._common import UsageError, path

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

    from pegboard import PermissionRule

__all__ = ("add_permission_options", "host_rules", "parse_rule")

#: Where the rules are kept on the namespace, as ``(option, value)`` pairs.
DEST = "permission_rules"


class _Ordered(argparse.Action):
    """Appends ``(option, value)`` to one shared list, so the rules keep their order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        kept = list(getattr(namespace, DEST, None) or [])
        kept.append((self.const, values))
        setattr(namespace, DEST, kept)


def add_permission_options(command: argparse.ArgumentParser) -> None:
    """The host's permission rules: ``--allow``, ``--deny``, ``--permissions``."""
    command.set_defaults(**{DEST: []})
    command.add_argument(
        "--allow", action=_Ordered, const="allow", metavar="RULE",
        help="allow ACTION or ACTION:RESOURCE without asking, e.g. read or "
        "'bash:git status *' (repeatable; later rules win)",
    )  # fmt: skip
    command.add_argument(
        "--deny", action=_Ordered, const="deny", metavar="RULE",
        help="deny ACTION or ACTION:RESOURCE, e.g. 'read:.env' (repeatable; later rules win)",
    )  # fmt: skip
    command.add_argument(
        "--permissions", action=_Ordered, const="file", metavar="FILE",
        help="read rules from FILE: TOML ([[permissions]] tables) or JSON (a list), "
        "each {action, resource, effect}",
    )  # fmt: skip


def parse_rule(text: str, effect: str) -> PermissionRule:
    """``ACTION`` or ``ACTION:RESOURCE`` as a rule; ``ACTION`` alone means resource ``*``.

    The action ends at the first colon (actions never contain one), so a
    resource may: ``bash:echo a:b``.
    """
    from pegboard import PermissionRule

    action, colon, resource = text.partition(":")
    option = f"--{effect} {text!r}"
    if not action.strip() or action != action.strip():
        raise UsageError(
            f"{option}: a rule is ACTION or ACTION:RESOURCE with an action such as read, "
            "edit or bash, e.g. --allow read or --allow 'bash:git status *'"
        )
    if colon and not resource:
        raise UsageError(
            f"{option}: nothing after the colon; give a resource pattern such as "
            f"'{action}:src/*', or {action!r} alone for every resource"
        )
    return PermissionRule(action, resource if colon else "*", effect)  # type: ignore[arg-type]


def host_rules(arguments: argparse.Namespace) -> list[PermissionRule]:
    """The rules the command line gives, in the order given."""
    rules: list[PermissionRule] = []
    for kind, value in getattr(arguments, DEST, None) or []:
        if kind == "file":
            rules.extend(_read_file(path(value)))
        else:
            rules.append(parse_rule(value, kind))
    return rules


def _read_file(path: Path) -> tuple[PermissionRule, ...]:
    import json
    import tomllib

    from pegboard import ConfigError, permission_rules

    source = f"--permissions {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{source}: cannot be read: {error}") from None
    entries: object
    if path.suffix == ".json":
        try:
            entries = json.loads(text)
        except ValueError as error:
            raise UsageError(f"{source}: not valid JSON: {error}") from None
        if isinstance(entries, dict) and set(entries) == {"permissions"}:
            entries = entries["permissions"]
    elif path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise UsageError(f"{source}: not valid TOML: {error}") from None
        if set(data) != {"permissions"}:
            raise UsageError(
                f"{source}: a rules file holds [[permissions]] tables only, "
                f"each with action, resource and effect; found {sorted(data)}"
            )
        entries = data["permissions"]
    else:
        raise UsageError(f"{source}: name it FILE.toml or FILE.json, so its format is known")
    try:
        return permission_rules(entries, source=source)
    except ConfigError as error:
        raise UsageError(str(error)) from None

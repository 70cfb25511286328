"""``pegboard permissions``: the sandbox in force and the approvals saved for a Location."""

from __future__ import annotations

import argparse

from ._common import Exit, UsageError, path
from ._sandbox import add_sandbox_options, sandbox_line, sandbox_settings

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pegboard import SavedApproval

__all__ = ("add",)


def add(commands: Any) -> None:
    permissions = commands.add_parser(
        "permissions",
        help='the sandbox and the "always" approvals saved for a Location',
        description="Say which sandbox confines a Location's commands, and list the "
        '"always" approvals saved for it, numbered, with the request each came from; '
        "--revoke forgets some of them.",
    )
    permissions.add_argument(
        "--location", "-l", type=path, default=".", metavar="DIR",
        help="the Location's root directory (default: the current directory)",
    )  # fmt: skip
    add_sandbox_options(permissions)
    revoke = permissions.add_mutually_exclusive_group()
    revoke.add_argument(
        "--revoke", type=int, action="append", default=[], metavar="N",
        help="forget approval number N as listed (repeatable)",
    )  # fmt: skip
    revoke.add_argument("--revoke-all", action="store_true", help="forget every saved approval")
    permissions.add_argument("--json", action="store_true", help="print JSON for scripts")
    permissions.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    import anyio  # deferred: `pegboard --help` imports nothing heavy

    status: int = anyio.run(_permissions, arguments)
    return status


async def _permissions(arguments: argparse.Namespace) -> int:
    from pegboard import Host

    sandbox = sandbox_settings(arguments)
    # No plugin runs: only the Location's permission service and sandbox are needed.
    async with Host().location(arguments.location, plugins=[], **sandbox) as location:
        service = location.permissions
        approvals = await service.approvals()
        chosen = _chosen(approvals, arguments.revoke, every=arguments.revoke_all)
        if chosen:
            await service.revoke(*chosen)
        if arguments.json:
            import json

            from ._words import in_cli_words

            rows = [_row(number, approval) for number, approval in enumerate(approvals, 1)]
            info = location.sandbox
            print(json.dumps({
                "sandbox": {"kind": info.kind, "reason": info.reason and in_cli_words(info.reason)},
                "approvals": rows,
                "revoked": [approvals.index(approval) + 1 for approval in chosen],
            }, indent=2, ensure_ascii=False))  # fmt: skip
            return Exit.COMPLETED
        if chosen:
            for approval in chosen:
                print(f"revoked: {approval.action} {approval.pattern}")
            return Exit.COMPLETED
        print(sandbox_line(location.sandbox))
        if not approvals:
            print(f"no saved approvals for {location.root}")
        for number, approval in enumerate(approvals, 1):
            print(_line(number, approval))
        return Exit.COMPLETED


def _chosen(
    approvals: Sequence[SavedApproval], numbers: Sequence[int], *, every: bool
) -> list[SavedApproval]:
    if every:
        return list(approvals)
    wrong = [number for number in numbers if not 1 <= number <= len(approvals)]
    if wrong:
        raise UsageError(
            f"--revoke {wrong[0]}: there are {len(approvals)} saved approvals, numbered from 1; "
            "run 'pegboard permissions' to see them"
        )
    return [approvals[number - 1] for number in dict.fromkeys(numbers)]


def _row(number: int, approval: SavedApproval) -> dict[str, Any]:
    return {
        "number": number,
        "action": approval.action,
        "pattern": approval.pattern,
        "resources": list(approval.resources),
        "command": approval.command,
        "at": approval.at,
    }


def _line(number: int, approval: SavedApproval) -> str:
    line = f"{number:>3}  {_shown(approval.action)}  {_shown(approval.pattern)}"
    if approval.at is None:
        return f"{line}\n     (saved before pegboard recorded where approvals come from)"
    source = _shown(approval.command or ", ".join(approval.resources))
    return f"{line}\n     approved {approval.at} for: {source}"


def _shown(text: str) -> str:
    # A saved file name or command must not drive the terminal: escape what is not printable.
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)

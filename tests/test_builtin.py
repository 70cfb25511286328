"""The built-in plugin: six tools on trusted services, each asking its own permission."""

from __future__ import annotations

import ast
import datetime
import time
from pathlib import Path
from typing import Any, Literal

import pytest
from builtin_calls import call, failure, metadata, opened, text

import pegboard

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ["bash", "edit", "glob", "grep", "read", "write"]

#: One harmless call per tool, with the action it asks permission for.
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "read": ("read", {"path": "notes.txt"}),
    "write": ("edit", {"path": "written.txt", "content": "new\n"}),
    "edit": ("edit", {"path": "notes.txt", "old_string": "first", "new_string": "edited"}),
    "glob": ("glob", {"pattern": "*.txt"}),
    "grep": ("grep", {"pattern": "first"}),
    "bash": ("bash", {"command": "echo ran > ran.txt"}),
}


@pytest.fixture
def folder(workspace: Path) -> Path:
    (workspace / "notes.txt").write_text("first line\nsecond line\n")
    return workspace


def untouched(folder: Path) -> bool:
    """Whether no call changed the folder."""
    return (
        "first line\nsecond line\n" == (folder / "notes.txt").read_text()
        and not (folder / "written.txt").exists()
        and not (folder / "ran.txt").exists()
    )


class Approver:
    """Answers every request the same way and records what it was asked."""

    def __init__(self, answer: Literal["once", "always"] | pegboard.Reject) -> None:
        self.answer = answer
        self.asked: list[pegboard.PermissionRequest] = []

    async def __call__(
        self, request: pegboard.PermissionRequest
    ) -> Literal["once", "always"] | pegboard.Reject:
        self.asked.append(request)
        return self.answer


async def test_the_default_plugins_give_exactly_the_six_tools(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """host.location(root) with no plugin list enables builtin alone: these six tools."""
    async with host.location(workspace, storage=storage_dir) as location:
        assert ("builtin",) == location.plugins
        assert TOOLS == [definition.name for definition in location.prepare().definitions]
        schemas = {d.name: d.input_schema for d in location.prepare().definitions}
    assert ["path", "offset", "limit"] == list(schemas["read"]["properties"])
    assert ["path", "content"] == list(schemas["write"]["properties"])
    assert ["path", "old_string", "new_string", "replace_all"] == list(
        schemas["edit"]["properties"]
    )
    assert ["pattern", "path"] == list(schemas["glob"]["properties"])
    assert ["pattern", "path", "include"] == list(schemas["grep"]["properties"])
    assert ["command", "timeout", "workdir", "network"] == list(schemas["bash"]["properties"])
    assert all(
        "description" in field
        for schema in schemas.values()
        for field in schema["properties"].values()
    )


async def test_each_tool_declares_its_title_and_hints(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Clients show the hints: what only looks, what destroys, what reaches outside."""
    async with host.location(workspace, storage=storage_dir) as location:
        found = {d.name: d for d in location.prepare().definitions}
    assert all(definition.title for definition in found.values())
    hints = {
        name: (d.annotations.read_only, d.annotations.destructive, d.annotations.open_world)
        for name, d in found.items()
        if d.annotations is not None
    }
    assert {
        "read": (True, None, False),
        "glob": (True, None, False),
        "grep": (True, None, False),
        "write": (False, True, False),
        "edit": (False, True, False),
        "bash": (False, True, True),
    } == hints


async def test_each_tool_works_on_a_real_folder(
    host: pegboard.Host, folder: Path, storage_dir: Path
) -> None:
    """Through location.prepare().execute, every tool does its job."""
    async with host.location(
        folder,
        storage=storage_dir,
        permissions=[{"action": "*", "resource": "*", "effect": "allow"}],
    ) as location:
        assert "     1\tfirst line\n     2\tsecond line" == text(
            await call(location, "read", path="notes.txt")
        )
        assert "Created" in text(
            await call(location, "write", path="src/app.py", content="x = 1\n")
        )
        edited = await call(location, "edit", path="src/app.py", old_string="1", new_string="2")
        assert "replaced 1 occurrence" in text(edited)
        assert "src/app.py" == text(await call(location, "glob", pattern="**/*.py"))
        assert "src/app.py:1: x = 2" == text(await call(location, "grep", pattern=r"x = \d"))
        ran = await call(location, "bash", command="cat src/app.py; echo done >&2")
        assert "x = 2\ndone\n\n(exit code 0)" == text(ran)
    assert "x = 2\n" == (folder / "src" / "app.py").read_text()


@pytest.mark.parametrize("tool", TOOLS)
async def test_a_deny_rule_stops_each_tool_before_it_acts(
    host: pegboard.Host, folder: Path, storage_dir: Path, tool: str
) -> None:
    """Every tool asks for its own action; a deny rule fails the call and changes nothing."""
    action, arguments = CALLS[tool]
    rules = [
        {"action": "*", "resource": "*", "effect": "allow"},
        {"action": action, "resource": "*", "effect": "deny"},
    ]
    async with opened(host, folder, storage_dir, permissions=rules) as location:
        message = failure(await call(location, tool, **arguments))
    assert message.startswith(f"permission denied: {action} on ")
    assert untouched(folder)


@pytest.mark.parametrize("tool", TOOLS)
async def test_ask_answered_once_runs_the_call(
    host: pegboard.Host, folder: Path, storage_dir: Path, tool: str
) -> None:
    """With no rule, the approver is asked, with the tool's action; 'once' lets it run."""
    action, arguments = CALLS[tool]
    approver = Approver("once")
    async with opened(host, folder, storage_dir, permissions=(), approver=approver) as location:
        assert isinstance(await call(location, tool, **arguments), pegboard.Completed)
        assert isinstance(await call(location, "glob", pattern="*"), pegboard.Completed)
    asked = [action, "edit"] if tool == "bash" else [action]  # `> ran.txt` is an edit too
    assert [*asked, "glob"] == [request.action for request in approver.asked]


async def test_ask_answered_always_is_not_asked_again(
    host: pegboard.Host, folder: Path, storage_dir: Path
) -> None:
    """'always' for reading a file approves its folder, here and in the next Location."""
    (folder / "docs").mkdir()
    (folder / "docs" / "a.md").write_text("a\n")
    (folder / "docs" / "b.md").write_text("b\n")
    approver = Approver("always")
    async with opened(host, folder, storage_dir, permissions=(), approver=approver) as location:
        await call(location, "read", path="docs/a.md")
        await call(location, "read", path="docs/b.md")
    async with opened(host, folder, storage_dir, permissions=(), approver=approver) as location:
        assert "b" in text(await call(location, "read", path="docs/b.md"))
        await call(location, "read", path="notes.txt")
    assert [("docs/a.md",), ("notes.txt",)] == [request.resources for request in approver.asked]
    assert ("docs", "docs/*") == approver.asked[0].always


async def test_ask_rejected_with_feedback_fails_the_call_with_it(
    host: pegboard.Host, folder: Path, storage_dir: Path
) -> None:
    """The user's message reaches the model; the file is unchanged."""
    approver = Approver(pegboard.Reject("do not touch notes"))
    async with opened(host, folder, storage_dir, permissions=(), approver=approver) as location:
        message = failure(await call(location, **_named("edit")))
    assert "do not touch notes" in message
    assert untouched(folder)


async def test_ask_rejected_without_feedback_stops_the_call(
    host: pegboard.Host, folder: Path, storage_dir: Path
) -> None:
    """A bare reject is operational: execute raises PermissionRejected, nothing runs."""
    approver = Approver(pegboard.Reject())
    async with opened(host, folder, storage_dir, permissions=(), approver=approver) as location:
        with pytest.raises(pegboard.PermissionRejected):
            await call(location, **_named("bash"))
    assert untouched(folder)


async def test_no_approver_rejects_what_needs_asking(
    host: pegboard.Host, folder: Path, storage_dir: Path
) -> None:
    """Without rules or an approver, a tool call is rejected and does nothing."""
    async with opened(host, folder, storage_dir, permissions=()) as location:
        with pytest.raises(pegboard.PermissionRejected, match="no approver"):
            await call(location, **_named("write"))
    assert untouched(folder)


def _named(tool: str) -> dict[str, Any]:
    return {"name": tool, **CALLS[tool][1]}


async def test_requests_name_what_each_tool_touches(
    host: pegboard.Host, folder: Path, storage_dir: Path
) -> None:
    """Paths are shown relative to the root; a chained command names each part."""
    approver = Approver("once")
    async with opened(host, folder, storage_dir, permissions=(), approver=approver) as location:
        await call(location, "read", path=str(folder / "notes.txt"))
        await call(location, "grep", pattern="x", path=".")
        await call(location, "bash", command="ls && NO_COLOR=1 rm -f nothing | wc -l")
    read, grep, bash, edit = approver.asked
    assert (("notes.txt",), ("notes.txt",)) == (read.resources, read.always)
    assert ((".",), (".",)) == (grep.resources, grep.always)
    assert ("ls", "rm -f nothing", "wc -l") == bash.resources
    assert ("ls *", "rm *", "wc *") == bash.always
    assert "ls && NO_COLOR=1 rm -f nothing | wc -l" == bash.metadata["command"]
    # What rm removes is a change to a file: asked as `edit` too.
    assert ("edit", ("nothing",)) == (edit.action, edit.resources)


async def test_a_deny_rule_catches_a_command_inside_a_chain(
    host: pegboard.Host, folder: Path, storage_dir: Path
) -> None:
    """'rm *' denied: 'ls && rm notes.txt' is refused, though it starts with ls."""
    rules = [
        {"action": "*", "resource": "*", "effect": "allow"},
        {"action": "bash", "resource": "rm *", "effect": "deny"},
    ]
    async with opened(host, folder, storage_dir, permissions=rules) as location:
        failure(await call(location, "bash", command="ls && rm notes.txt"))
    assert (folder / "notes.txt").exists()


async def test_an_untrusted_plugin_cannot_reach_the_filesystem(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A plugin the host does not trust gets ServiceDenied for the filesystem service."""
    refused: list[Exception] = []

    class Snoop:
        @pegboard.hookimpl
        def activate_location(self, services: pegboard.Services) -> None:
            try:
                services.filesystem.read_bytes_sync("/etc/passwd")
            except pegboard.ServiceDenied as error:
                refused.append(error)

    host.add_plugin("snoop", Snoop())
    async with host.location(workspace, plugins=["builtin", "snoop"], storage=storage_dir):
        pass
    [error] = refused
    assert "'snoop' is not trusted with the filesystem service" in str(error)


async def test_law_storage_encapsulation_bash_spools_are_kept_like_managed_output(
    host: pegboard.Host,
    workspace: Path,
    tmp_path: Path,
    storage_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spool named in a result is a managed file of the Location: readable after the
    Location closes and opens again, never from another Location, pruned with retention."""
    command = "yes spooled | head -c 3000000"
    async with opened(host, workspace, storage_dir) as location:
        shown = await call(location, "bash", command=command)
        spool = Path(metadata(shown)["spool"])
        assert f"all 3,000,000 bytes are saved in {spool}" in text(shown)
        assert location.storage.directory == spool.parent
    assert 3_000_000 == spool.stat().st_size
    async with opened(host, workspace, storage_dir) as again:
        assert "     1\tspooled" in text(await call(again, "read", path=str(spool), limit=1))
    other = tmp_path / "other"
    other.mkdir()
    async with opened(host, other, storage_dir) as elsewhere:
        refused = await call(elsewhere, "read", path=str(spool), limit=1)
        assert isinstance(refused, pegboard.Failed)
    # Retention counts from the name's timestamp, like every managed file's.
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 3600)
    short = pegboard.ManagedStorage(storage_dir, retention=datetime.timedelta(minutes=30))
    async with host.location(workspace, plugins=[], storage=short):
        assert not spool.exists()


def test_the_plugin_uses_only_the_public_api() -> None:
    """plugins_builtin imports nothing private from pegboard: it is an ordinary plugin."""
    problems = []
    for path in sorted((ROOT / "plugins_builtin").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                names = [f"{node.value.id}.{node.attr}"] if node.value.id == "pegboard" else []
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] != "pegboard" or len(parts) == 1:
                    continue
                if parts[1] not in pegboard.__all__ or any(p.startswith("_") for p in parts):
                    problems.append(f"{path.name}: {name}")
    assert [] == problems

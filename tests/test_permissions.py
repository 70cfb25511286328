"""The permission service: ordered rules, the host's approver and saved approvals."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Literal

import anyio
import pytest

import pegboard

pytestmark = pytest.mark.anyio

Answer = Literal["once", "always"] | pegboard.Reject


def rules(*triples: tuple[str, str, str]) -> list[dict[str, str]]:
    return [{"action": a, "resource": r, "effect": e} for a, r, e in triples]


def request(
    action: str, *resources: str, always: tuple[str, ...] = ()
) -> pegboard.PermissionRequest:
    return pegboard.PermissionRequest(action=action, resources=resources, always=always)


class Approver:
    """Answers from a script and records what it was asked."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list[pegboard.PermissionRequest] = []

    async def __call__(self, asked: pegboard.PermissionRequest) -> Answer:
        self.asked.append(asked)
        return self.answers.pop(0)


def test_the_last_matching_rule_wins() -> None:
    """Rules are read in order; a later match overrides an earlier one."""
    permissions = pegboard.Permissions(
        rules(("bash", "*", "allow"), ("bash", "rm *", "deny"), ("bash", "rm -i *", "ask"))
    )
    assert "allow" == permissions.evaluate("bash", "ls -la")
    assert "deny" == permissions.evaluate("bash", "rm -rf build")
    assert "ask" == permissions.evaluate("bash", "rm -i notes")


def test_no_matching_rule_means_ask() -> None:
    """A request no rule covers is asked about."""
    permissions = pegboard.Permissions(rules(("read", "*", "allow")))
    assert "ask" == permissions.evaluate("edit", "notes.txt")
    assert "ask" == pegboard.Permissions().evaluate("read", "notes.txt")


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("*", "anything at all", True),
        ("src/*", "src/deep/file.py", True),
        ("src/*", "docs/file.py", False),
        ("?.txt", "a.txt", True),
        ("?.txt", "ab.txt", False),
        ("file.[ch]", "file.[ch]", True),
        ("file.[ch]", "file.c", False),
        ("git *", "git status", True),
        ("git *", "git", True),
        ("git *", "gitk", False),
        ("git*", "gitk", True),
    ],
)
def test_wildcards(pattern: str, value: str, matches: bool) -> None:
    """'*' matches any run, '?' one character, other characters themselves;
    a trailing ' *' also matches the bare command."""
    rule = pegboard.PermissionRule("bash", pattern, "allow")
    assert matches == rule.matches("bash", value)


def test_actions_match_with_wildcards_too() -> None:
    """The action is a pattern as well."""
    rule = pegboard.PermissionRule("*", "secrets/*", "deny")
    assert rule.matches("read", "secrets/key")
    assert rule.matches("grep", "secrets/key")


def test_bad_rules_are_refused_by_position() -> None:
    """A rule that is not {action, resource, effect} or has a bad effect is a clear error."""
    with pytest.raises(ValueError, match=r"permissions\[1\] must be \{action, resource, effect\}"):
        pegboard.Permissions([*rules(("read", "*", "allow")), {"action": "read"}])
    with pytest.raises(ValueError, match="'allow', 'deny' or 'ask', not 'maybe'"):
        pegboard.Permissions(rules(("read", "*", "maybe")))


async def test_bad_rules_fail_the_location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """host.location reports bad rules as a ConfigError naming permissions=."""
    with pytest.raises(pegboard.ConfigError, match="permissions="):
        async with host.location(workspace, permissions=[{"action": "read"}], storage=storage_dir):
            pytest.fail("the Location must not open")


async def test_allow_needs_no_approver() -> None:
    """An allowed request returns without asking anyone."""
    approver = Approver()
    permissions = pegboard.Permissions(rules(("read", "*", "allow")), approver=approver)
    await permissions.ask(request("read", "a.txt"))
    assert [] == approver.asked


async def test_deny_is_a_tool_failure_naming_what_was_denied() -> None:
    """A deny rule fails the call with a model-visible message; nobody is asked."""
    approver = Approver("once")
    permissions = pegboard.Permissions(rules(("edit", ".env", "deny")), approver=approver)
    with pytest.raises(pegboard.ToolFailure, match=r"permission denied: edit on \.env"):
        await permissions.ask(request("edit", "notes.txt", ".env"))
    assert [] == approver.asked


async def test_ask_once_allows_this_request_only(tmp_path: Path) -> None:
    """'once' allows the request; the next one is asked again."""
    approver = Approver("once", "once")
    permissions = pegboard.Permissions(approver=approver, approvals_file=tmp_path / "a.json")
    await permissions.ask(request("read", "a.txt"))
    await permissions.ask(request("read", "a.txt"))
    assert 2 == len(approver.asked)
    assert not (tmp_path / "a.json").exists()


async def test_ask_always_saves_the_always_patterns(tmp_path: Path) -> None:
    """'always' saves the request's always patterns; matching requests are not asked again."""
    approver = Approver("always")
    permissions = pegboard.Permissions(approver=approver, approvals_file=tmp_path / "a.json")
    await permissions.ask(request("bash", "git status", always=("git *",)))
    await permissions.ask(request("bash", "git log"))
    await permissions.ask(request("bash", "git"))
    assert 1 == len(approver.asked)
    [saved] = json.loads((tmp_path / "a.json").read_text())["approvals"]
    assert ("bash", "git *", ["git status"]) == (
        saved["action"],
        saved["pattern"],
        saved["approved"]["resources"],
    )


async def test_always_without_patterns_saves_the_resources(tmp_path: Path) -> None:
    """Without always patterns, 'always' approves exactly the resources asked about."""
    approver = Approver("always", "once")
    permissions = pegboard.Permissions(approver=approver, approvals_file=tmp_path / "a.json")
    await permissions.ask(request("read", "a.txt"))
    await permissions.ask(request("read", "a.txt"))
    await permissions.ask(request("read", "b.txt"))
    assert ["a.txt", "b.txt"] == [asked.resources[0] for asked in approver.asked]


async def test_a_saved_approval_is_for_its_action_only(tmp_path: Path) -> None:
    """Approving 'read' always does not approve 'edit'."""
    approver = Approver("always", "once")
    permissions = pegboard.Permissions(approver=approver, approvals_file=tmp_path / "a.json")
    await permissions.ask(request("read", "a.txt"))
    await permissions.ask(request("edit", "a.txt"))
    assert ["read", "edit"] == [asked.action for asked in approver.asked]


async def test_deny_beats_a_saved_always(tmp_path: Path) -> None:
    """A resource approved 'always' earlier is still refused once a rule denies it."""
    file = tmp_path / "a.json"
    await pegboard.Permissions(approver=Approver("always"), approvals_file=file).ask(
        request("bash", "rm -rf build", always=("rm *",))
    )
    denying = pegboard.Permissions(rules(("bash", "rm *", "deny")), approvals_file=file)
    with pytest.raises(pegboard.ToolFailure, match="denied"):
        await denying.ask(request("bash", "rm -rf build"))


async def test_reject_with_a_message_is_a_tool_failure_carrying_it() -> None:
    """The user's feedback reaches the model as the failure's message."""
    permissions = pegboard.Permissions(approver=Approver(pegboard.Reject("use git mv instead")))
    with pytest.raises(pegboard.ToolFailure, match="rejected bash: use git mv instead"):
        await permissions.ask(request("bash", "mv a b"))


@pytest.mark.parametrize("reject", [pegboard.Reject(), pegboard.Reject("")])
async def test_reject_without_a_message_stops_the_call(reject: pegboard.Reject) -> None:
    """A bare reject is no model-visible failure: it raises PermissionRejected."""
    permissions = pegboard.Permissions(approver=Approver(reject))
    asked = request("bash", "mv a b")
    with pytest.raises(pegboard.PermissionRejected, match="rejected bash") as raised:
        await permissions.ask(asked)
    assert asked == raised.value.request


async def test_no_approver_and_ask_means_reject() -> None:
    """Without an approver, a request that needs asking is rejected operationally; the
    rejection carries the request, for the host to name the rule that would allow it."""
    asked = request("read", "a.txt")
    with pytest.raises(pegboard.PermissionRejected, match="no approver") as raised:
        await pegboard.Permissions().ask(asked)
    assert asked == raised.value.request


async def test_a_strange_answer_is_a_clear_error() -> None:
    """An approver must answer 'once', 'always' or Reject."""
    permissions = pegboard.Permissions(approver=Approver("yes"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"answer 'once', 'always' or pegboard\.Reject"):
        await permissions.ask(request("read", "a.txt"))


async def test_a_request_names_a_resource() -> None:
    """An empty request is a programming error, not a question for the user."""
    with pytest.raises(ValueError, match="at least one resource"):
        await pegboard.Permissions().ask(request("read"))


async def test_always_persists_across_locations_on_the_same_root(
    host: pegboard.Host, workspace: Path, storage_dir: Path, tmp_path: Path
) -> None:
    """An 'always' given in one Location holds in the next one on the same root, not elsewhere."""
    first = Approver("always")
    async with host.location(workspace, approver=first, storage=storage_dir) as location:
        await location.permissions.ask(request("bash", "make test", always=("make *",)))
    second = Approver()
    async with host.location(workspace, approver=second, storage=storage_dir) as location:
        await location.permissions.ask(request("bash", "make lint"))
    assert [] == second.asked
    other = tmp_path / "other"
    other.mkdir()
    third = Approver("once")
    async with host.location(other, approver=third, storage=storage_dir) as location:
        await location.permissions.ask(request("bash", "make lint"))
    assert 1 == len(third.asked)


async def test_approvals_saved_by_two_open_locations_are_both_kept(tmp_path: Path) -> None:
    """Two services on one file, each saving after the other loaded: neither save is lost."""
    file = tmp_path / "a.json"
    one = pegboard.Permissions(approver=Approver("always", "always"), approvals_file=file)
    two = pegboard.Permissions(approver=Approver("always"), approvals_file=file)
    await one.ask(request("read", "warm-up.txt", always=("docs/*",)))
    await two.ask(request("bash", "ls", always=("ls *",)))
    await one.ask(request("bash", "make", always=("make *",)))
    patterns = {item["pattern"] for item in json.loads(file.read_text())["approvals"]}
    assert {"docs/*", "ls *", "make *"} == patterns


async def test_unreadable_saved_approvals_are_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A corrupt approvals file grants nothing and is reported."""
    file = tmp_path / "a.json"
    file.write_text("{not json")
    approver = Approver("once")
    with caplog.at_level(logging.WARNING, logger="pegboard"):
        await pegboard.Permissions(approver=approver, approvals_file=file).ask(
            request("read", "a.txt")
        )
    assert 1 == len(approver.asked)
    assert "ignoring unreadable saved approvals" in caplog.text


async def test_the_approver_sees_the_whole_request() -> None:
    """Action, resources, always patterns and metadata reach the approver unchanged."""
    approver = Approver("once")
    asked = pegboard.PermissionRequest(
        action="edit", resources=["a.txt"], always=["*"], metadata={"diff": "+x"}
    )
    await pegboard.Permissions(approver=approver).ask(asked)
    assert [asked] == approver.asked
    assert ("a.txt",) == asked.resources


# Opaque and embedding resources.


async def test_allow_rules_never_cover_an_opaque_resource() -> None:
    """An opaque resource is asked even under `allow *`; saving nothing for it."""
    approver = Approver("once")
    permissions = pegboard.Permissions(rules(("*", "*", "allow")), approver=approver)
    await permissions.ask(
        pegboard.PermissionRequest(action="bash", resources=["eval x"], opaque=["eval x"])
    )
    assert 1 == len(approver.asked)
    assert "ask" == permissions.evaluate("bash", "eval x", opaque=True)
    assert "allow" == permissions.evaluate("bash", "eval x")


async def test_deny_and_ask_rules_still_apply_to_an_opaque_resource() -> None:
    """Only allow rules are set aside: a deny still refuses without asking."""
    approver = Approver("once")
    permissions = pegboard.Permissions(
        rules(("bash", "*", "allow"), ("bash", "eval *", "deny")), approver=approver
    )
    with pytest.raises(pegboard.ToolFailure, match="permission denied"):
        await permissions.ask(
            pegboard.PermissionRequest(action="bash", resources=["eval x"], opaque=["eval x"])
        )
    assert [] == approver.asked


async def test_saved_approvals_never_cover_opaque_or_embedding_resources(tmp_path: Path) -> None:
    """'always' saved a pattern matching them; they are asked again all the same."""
    approver = Approver("always", "once", "once")
    permissions = pegboard.Permissions(approver=approver, approvals_file=tmp_path / "a.json")
    await permissions.ask(request("bash", "echo hello", always=("echo *",)))
    await permissions.ask(request("bash", "echo hi"))
    embedding = "echo '$(rm -rf dir)'"
    await permissions.ask(
        pegboard.PermissionRequest(action="bash", resources=[embedding], embedding=[embedding])
    )
    await permissions.ask(
        pegboard.PermissionRequest(action="bash", resources=["echo $x"], opaque=["echo $x"])
    )
    assert ["echo hello", embedding, "echo $x"] == [a.resources[0] for a in approver.asked]


async def test_always_on_an_opaque_request_saves_nothing_for_it(tmp_path: Path) -> None:
    """Without always patterns, only the resources that may be saved are saved."""
    approver = Approver("always")
    permissions = pegboard.Permissions(approver=approver, approvals_file=tmp_path / "a.json")
    await permissions.ask(
        pegboard.PermissionRequest(
            action="bash", resources=["ls *", "eval *"], opaque=["eval *"], embedding=["ls *"]
        )
    )
    assert () == await permissions.approvals()


async def test_opaque_and_embedding_name_resources_of_the_request() -> None:
    with pytest.raises(ValueError, match="opaque and embedding name resources"):
        await pegboard.Permissions().ask(
            pegboard.PermissionRequest(action="bash", resources=["ls"], opaque=["rm"])
        )


async def test_law_host_authority_deny_beats_a_saved_approval(tmp_path: Path) -> None:
    """An approval saved as 'always' never widens what the host's rules deny."""
    file = tmp_path / "a.json"
    await pegboard.Permissions(approver=Approver("always"), approvals_file=file).ask(
        request("bash", "git push", always=("git *",))
    )
    approver = Approver("once")
    denying = pegboard.Permissions(
        rules(("bash", "*", "allow"), ("bash", "git push *", "deny")),
        approver=approver,
        approvals_file=file,
    )
    with pytest.raises(pegboard.ToolFailure, match="permission denied: bash on git push"):
        await denying.ask(request("bash", "git push"))
    assert [] == approver.asked


async def test_law_host_authority_deny_beats_a_saved_approval_in_a_location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Saved in one Location on the root, refused in the next one whose host denies it."""
    async with host.location(workspace, approver=Approver("always"), storage=storage_dir) as one:
        await one.permissions.ask(request("edit", ".env", always=("*",)))
    deny = rules(("edit", ".env", "deny"))
    async with host.location(workspace, permissions=deny, storage=storage_dir) as two:
        assert 1 == len(await two.permissions.approvals())
        with pytest.raises(pegboard.ToolFailure, match="denied"):
            await two.permissions.ask(request("edit", ".env"))


# Saved approvals: where they came from, listing, revoking, the file format.


async def test_saved_approvals_record_the_approved_request(tmp_path: Path) -> None:
    approver = Approver("always")
    permissions = pegboard.Permissions(approver=approver, approvals_file=tmp_path / "a.json")
    await permissions.ask(
        pegboard.PermissionRequest(
            action="bash",
            resources=["git status"],
            always=["git status *"],
            metadata={"command": "git status"},
        )
    )
    [saved] = await permissions.approvals()
    assert ("bash", "git status *", ("git status",), "git status") == (
        saved.action,
        saved.pattern,
        saved.resources,
        saved.command,
    )
    assert saved.at is not None
    assert saved.at.endswith("+00:00")


async def test_approvals_in_the_earlier_format_still_count(tmp_path: Path) -> None:
    """A file of bare {action, pattern} entries is read as before, and kept readable."""
    file = tmp_path / "a.json"
    file.write_text(json.dumps({"approvals": [{"action": "bash", "pattern": "make *"}]}))
    approver = Approver("always")
    permissions = pegboard.Permissions(approver=approver, approvals_file=file)
    await permissions.ask(request("bash", "make lint"))
    await permissions.ask(request("bash", "ls", always=("ls *",)))
    entries = json.loads(file.read_text())["approvals"]
    assert [{"action": "bash", "pattern": "make *"}] == entries[:1]
    assert {"action": "bash", "pattern": "ls *"} == {
        k: entries[1][k] for k in ("action", "pattern")
    }
    assert [None, "ls"] == [
        a.resources[0] if a.resources else None for a in await permissions.approvals()
    ]


async def test_revoked_approvals_are_asked_again(tmp_path: Path) -> None:
    file = tmp_path / "a.json"
    approver = Approver("always", "always", "once")
    permissions = pegboard.Permissions(approver=approver, approvals_file=file)
    await permissions.ask(request("bash", "make", always=("make *",)))
    await permissions.ask(request("bash", "ls", always=("ls *",)))
    first, _ = await permissions.approvals()
    assert 1 == await permissions.revoke(first)
    assert ["ls *"] == [a.pattern for a in await permissions.approvals()]
    await permissions.ask(request("bash", "make"))
    assert 3 == len(approver.asked)
    assert 0 == await permissions.revoke(first)


async def test_a_revoke_elsewhere_is_not_undone_by_a_later_save(tmp_path: Path) -> None:
    """Saving re-reads the file: an approval another service revoked stays revoked."""
    file = tmp_path / "a.json"
    one = pegboard.Permissions(approver=Approver("always", "always"), approvals_file=file)
    await one.ask(request("bash", "make", always=("make *",)))
    two = pegboard.Permissions(approvals_file=file)
    await two.revoke(*await two.approvals())
    await one.ask(request("bash", "ls", always=("ls *",)))
    assert ["ls *"] == [a.pattern for a in await two.approvals()]


# One question at a time, per question.


async def test_a_pending_question_never_blocks_an_unrelated_call() -> None:
    """An allowed read returns at once while a bash question waits for its answer."""
    asked = anyio.Event()

    async def slow(request: pegboard.PermissionRequest) -> Answer:
        asked.set()
        await anyio.sleep_forever()
        return "once"

    permissions = pegboard.Permissions(rules(("read", "*", "allow")), approver=slow)
    async with anyio.create_task_group() as group:
        group.start_soon(permissions.ask, request("bash", "make"))
        await asked.wait()
        with anyio.fail_after(1):
            await permissions.ask(request("read", "a.txt"))
        group.cancel_scope.cancel()


async def test_different_questions_are_asked_side_by_side() -> None:
    """A second, different question reaches the approver while the first is unanswered."""
    waiting: list[str] = []
    both = anyio.Event()

    async def approver(request: pegboard.PermissionRequest) -> Answer:
        waiting.append(request.resources[0])
        if len(waiting) == 2:
            both.set()
        await both.wait()
        return "once"

    permissions = pegboard.Permissions(approver=approver)
    with anyio.fail_after(2):
        async with anyio.create_task_group() as group:
            group.start_soon(permissions.ask, request("bash", "make"))
            group.start_soon(permissions.ask, request("read", "a.txt"))
    assert ["a.txt", "make"] == sorted(waiting)


async def test_identical_questions_at_once_share_one_answer() -> None:
    """Three calls asking the same thing meanwhile: the approver is asked once."""
    release = anyio.Event()
    calls: list[pegboard.PermissionRequest] = []

    async def approver(request: pegboard.PermissionRequest) -> Answer:
        calls.append(request)
        await release.wait()
        return pegboard.Reject("no")

    permissions = pegboard.Permissions(approver=approver)
    failures: list[str] = []

    async def ask() -> None:
        with pytest.raises(pegboard.ToolFailure) as raised:
            await permissions.ask(request("bash", "make"))
        failures.append(str(raised.value))

    with anyio.fail_after(2):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert 1 == len(calls)
    assert 3 * ["the user rejected bash: no"] == failures


async def test_a_cancelled_asker_hands_the_question_on() -> None:
    """If the call that asked is cancelled, one waiting on the same question asks itself."""
    calls = 0

    async def approver(request: pegboard.PermissionRequest) -> Answer:
        nonlocal calls
        calls += 1
        if calls == 1:
            await anyio.sleep_forever()
        return "once"

    permissions = pegboard.Permissions(approver=approver)
    with anyio.fail_after(2):
        async with anyio.create_task_group() as group:
            first = anyio.CancelScope()

            async def ask_first() -> None:
                with first:
                    await permissions.ask(request("bash", "make"))

            group.start_soon(ask_first)
            await anyio.wait_all_tasks_blocked()
            group.start_soon(permissions.ask, request("bash", "make"))
            await anyio.wait_all_tasks_blocked()
            first.cancel()
    assert 2 == calls


# `pegboard permissions`: list and revoke.


def cli(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    from pegboard.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["permissions", *arguments])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


async def save(host: pegboard.Host, root: Path, storage: Path, *patterns: str) -> None:
    answers = Approver(*["always"] * len(patterns))
    async with host.location(root, approver=answers, storage=storage, plugins=[]) as location:
        for pattern in patterns:
            await location.permissions.ask(
                pegboard.PermissionRequest(
                    action="bash",
                    resources=[pattern.removesuffix(" *")],
                    always=[pattern],
                    metadata={"command": f"{pattern.removesuffix(' *')} --now\nrm x\x1b[2K"},
                )
            )


def test_pegboard_permissions_lists_and_revokes(
    host: pegboard.Host, workspace: Path, storage_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Numbered approvals with where they came from; --revoke N forgets exactly those."""
    anyio.run(save, host, workspace, storage_dir, "git status *", "make *", "ls *")
    status, out, _ = cli(capsys, "-l", str(workspace))
    assert 0 == status
    assert "  1  bash  git status *\n     approved " in out
    assert "for: git status --now\\nrm x\\x1b[2K" in out
    assert "  3  bash  ls *" in out
    status, out, _ = cli(capsys, "-l", str(workspace), "--revoke", "1", "--revoke", "3")
    assert (0, "revoked: bash git status *\nrevoked: bash ls *\n") == (status, out)
    status, out, _ = cli(capsys, "-l", str(workspace), "--json")
    [row] = json.loads(out)["approvals"]
    assert ("make *", ["make"], 1) == (row["pattern"], row["resources"], row["number"])
    cli(capsys, "-l", str(workspace), "--revoke-all")
    assert "no saved approvals for" in cli(capsys, "-l", str(workspace))[1]


def test_pegboard_permissions_refuses_a_number_not_listed(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = cli(capsys, "-l", str(workspace), "--revoke", "4")
    assert 2 == status
    assert "--revoke 4: there are 0 saved approvals, numbered from 1" in err


async def test_questions_that_differ_in_metadata_are_asked_apart() -> None:
    """The same command in two folders is two questions."""
    release = anyio.Event()
    calls: list[pegboard.PermissionRequest] = []

    async def approver(asked: pegboard.PermissionRequest) -> Answer:
        calls.append(asked)
        await release.wait()
        return "once"

    permissions = pegboard.Permissions(approver=approver)
    with anyio.fail_after(2):
        async with anyio.create_task_group() as group:
            for workdir in ("src", "docs"):
                group.start_soon(
                    permissions.ask,
                    pegboard.PermissionRequest(
                        action="bash", resources=["make"], metadata={"workdir": workdir}
                    ),
                )
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert 2 == len(calls)

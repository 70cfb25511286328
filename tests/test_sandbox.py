"""The sandbox under every command: the host's choice, what it enforces, and its absence."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from builtin_calls import call, failure, metadata, opened, text

import pegboard
import pegboard.sandbox

pytestmark = pytest.mark.anyio

ALLOW_ALL = [{"action": "*", "resource": "*", "effect": "allow"}]
#: How a confined write is refused: a read-only mount (bubblewrap), or Landlock.
REFUSED = ("Read-only file system", "Permission denied")


async def yes(request: pegboard.PermissionRequest) -> str:
    return "once"


async def test_law_enforced_authority_the_default_sandbox_is_bubblewrap_here(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A plain host.location confines commands; the Location says with what."""
    async with host.location(workspace, storage=storage_dir) as location:
        assert pegboard.SandboxInfo(kind="bubblewrap") == location.sandbox
        assert "commands run in the bubblewrap sandbox" == location.sandbox.describe()


async def test_off_is_the_hosts_explicit_choice(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    async with host.location(workspace, storage=storage_dir, sandbox="off") as location:
        assert location.sandbox.kind is None
        assert "the host turned the sandbox off" in str(location.sandbox.reason)


async def test_a_bad_choice_is_a_clear_error(
    host: pegboard.Host, workspace: Path, storage_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(pegboard.ConfigError, match="'auto', 'required' or 'off', not 'maybe'"):
        async with host.location(workspace, storage=storage_dir, sandbox="maybe"):  # type: ignore[arg-type]
            pass
    with pytest.raises(pegboard.ConfigError, match=r"writable: .* is not a folder"):
        async with host.location(workspace, storage=storage_dir, writable=[tmp_path / "none"]):
            pass


async def test_law_host_authority_an_empty_writable_path_grants_no_folder(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """An empty path in writable= (an unset variable, say) would name the current folder:
    it is refused, never made writable to commands."""
    with pytest.raises(pegboard.ConfigError, match="writable: an empty path names no folder"):
        async with host.location(workspace, storage=storage_dir, writable=[""]):
            raise AssertionError("the Location opened")


async def test_law_host_authority_a_location_cannot_turn_the_sandbox_off(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Only the host chooses: a pegboard.toml that tries is refused, not obeyed."""
    (workspace / "pegboard.toml").write_text('sandbox = "off"\n')
    with pytest.raises(pegboard.ConfigError, match="sandbox"):
        async with host.location(workspace, storage=storage_dir):
            pass


async def test_law_enforced_authority_writable_folders_and_nothing_else(
    host: pegboard.Host, workspace: Path, storage_dir: Path, tmp_path: Path
) -> None:
    """A host's writable= folder takes writes; a folder beside it does not, approved or not."""
    granted, other = tmp_path / "granted", tmp_path / "other"
    granted.mkdir()
    other.mkdir()
    async with opened(host, workspace, storage_dir, approver=yes, writable=[granted]) as location:
        outcome = await call(
            location, "bash", command=f"echo a > {granted}/a; echo b > {other}/b; echo c > c"
        )
    # A folder outside is read-only, or not there at all where /tmp is the call's own.
    assert f"{other}/b: " in text(outcome)
    assert ["a"] == os.listdir(granted)
    assert [] == os.listdir(other)
    assert "c\n" == (workspace / "c").read_text()


async def test_law_enforced_authority_each_call_has_its_own_tmpdir(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """$TMPDIR is /tmp inside, writable, new for every call, and gone afterwards."""
    async with opened(host, workspace, storage_dir) as location:
        first = await call(location, "bash", command="echo $TMPDIR; echo x > /tmp/left; ls /tmp")
        second = await call(location, "bash", command="ls /tmp/left || echo absent")
    assert text(first).startswith("/tmp\n")
    assert "left" in text(first)
    assert "absent" in text(second)
    assert not [name for name in os.listdir("/tmp") if name == "left"]


async def test_law_enforced_authority_the_environment_is_an_allow_list(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host's variables stay out; those it passes with environment= come in."""
    monkeypatch.setenv("PEGBOARD_TEST_TOKEN", "hunter2-in-the-host")
    async with opened(host, workspace, storage_dir, environment={"PASSED_ON": "given"}) as location:
        outcome = await call(location, "bash", command="env; cat /proc/self/environ")
    assert "hunter2-in-the-host" not in text(outcome)
    assert "PASSED_ON=given" in text(outcome)
    assert "PATH=" in text(outcome)


async def test_law_enforced_authority_network_needs_a_host_rule(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """No `network`, no connection; with it and a host rule, one; a Location cannot allow it."""
    connections: list[object] = []

    async def accept(stream: Any) -> None:
        connections.append(stream)
        await stream.aclose()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    reach = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, accept)
        asked: list[pegboard.PermissionRequest] = []

        async def refuse(request: pegboard.PermissionRequest) -> str | pegboard.Reject:
            asked.append(request)
            return pegboard.Reject("no network") if request.action == "network" else "once"

        rules = [
            {"action": "bash", "resource": "*", "effect": "allow"},
            {"action": "edit", "resource": "*", "effect": "allow"},
        ]
        try:
            async with opened(
                host, workspace, storage_dir, permissions=rules, approver=refuse
            ) as location:
                without = await call(location, "bash", command=reach)
                refused = await call(location, "bash", command=reach, network=True)
            network = [*rules, {"action": "network", "resource": "*", "effect": "allow"}]
            async with opened(
                host, workspace, storage_dir, permissions=network, approver=refuse
            ) as location:
                granted = await call(location, "bash", command=reach, network=True)
        finally:
            group.cancel_scope.cancel()
    assert "connected" not in text(without)
    assert "the user rejected network: no network" == failure(refused)
    assert ["network"] == [request.action for request in asked if request.action == "network"]
    assert "connected" in text(granted)
    assert 1 == len(connections)
    (workspace / "pegboard.toml").write_text(
        '[[permissions]]\naction = "network"\nresource = "*"\neffect = "allow"\n'
    )
    with pytest.raises(pegboard.ConfigError, match="may only deny or ask"):
        async with host.location(workspace, storage=storage_dir):
            pass


async def test_law_enforced_authority_a_denied_file_linked_outside_is_refused(
    host: pegboard.Host, workspace: Path, storage_dir: Path, tmp_path: Path
) -> None:
    """A hard link outside the Location cannot be masked: the call is refused, saying why."""
    (workspace / ".env").write_text("TOKEN=abc\n")
    os.link(workspace / ".env", tmp_path / "elsewhere")
    rules = [*ALLOW_ALL, {"action": "read", "resource": ".env", "effect": "deny"}]
    async with opened(host, workspace, storage_dir, permissions=rules) as location:
        message = failure(await call(location, "bash", command="echo hi"))
    assert "'.env' is denied by this Location's rules and has 2 hard links" in message
    assert "1 of them outside the Location" in message


async def test_law_enforced_authority_the_status_is_the_commands_own_inside(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The subreaper is process 1 of the sandbox; a signal that kills the shell is still told."""
    async with opened(host, workspace, storage_dir) as location:
        killed = metadata(await call(location, "bash", command="kill -KILL $$"))
        code = metadata(await call(location, "bash", command="exit 7"))
    assert (None, "SIGKILL") == (killed["exit_code"], killed["signal"])
    assert 7 == code["exit_code"]


#: Opens a Location and runs one command under "auto" and under "required".
WITHOUT_A_SANDBOX = textwrap.dedent(
    """
    import json, sys, anyio, pegboard

    asked = []

    async def yes(request):
        asked.append(dict(request.metadata))
        return "once"

    async def main():
        seen = {}
        rules = [{"action": "*", "resource": "*", "effect": "allow"}]
        for mode in ("auto", "required"):
            async with pegboard.Host().location(
                sys.argv[1], plugins=["builtin"], sandbox=mode, permissions=rules,
                approver=yes, storage=sys.argv[2],
            ) as location:
                call = pegboard.ToolCall(
                    "bash", {"command": "echo ran"}, pegboard.ToolContext("s", "a", "m", "c")
                )
                outcome = await location.prepare().execute(call)
                seen[mode] = {
                    "kind": location.sandbox.kind,
                    "reason": location.sandbox.reason,
                    "failed": outcome.error.message if isinstance(outcome, pegboard.Failed)
                    else None,
                }
        seen["asked"] = asked
        print(json.dumps(seen))

    anyio.run(main)
    """
)

#: Runs a program with Landlock's system calls answering ENOSYS, as on a kernel without it.
WITHOUT_LANDLOCK = textwrap.dedent(
    """
    import ctypes, os, struct, sys

    def op(code, jt, jf, k):
        return struct.pack("=HBBI", code, jt, jf, k)

    program = b"".join([
        op(0x20, 0, 0, 0),  # the system call's number
        op(0x35, 0, 2, 444),  # below landlock_create_ruleset: allow
        op(0x35, 1, 0, 447),  # past landlock_restrict_self: allow
        op(0x06, 0, 0, 0x00050000 | 38),  # ENOSYS
        op(0x06, 0, 0, 0x7FFF0000),
    ])
    libc = ctypes.CDLL(None, use_errno=True)
    filters = ctypes.create_string_buffer(program, len(program))
    header = ctypes.create_string_buffer(
        struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(filters)), 16
    )
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
    assert libc.prctl(22, 2, header, 0, 0) == 0, ctypes.get_errno()
    os.execv(sys.argv[1], sys.argv[1:])
    """
)
LIMIT = "echo 0 > /proc/sys/user/max_user_namespaces"
needs_unshare = pytest.mark.skipif(
    shutil.which("unshare") is None, reason="needs util-linux's unshare"
)


def without_user_namespaces(*command: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a user namespace that can make no other: bwrap cannot start."""
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", f'{LIMIT} && exec "$@"', "sh",
         *command],
        capture_output=True, text=True, timeout=300, check=False, **options,
    )  # fmt: skip
    if done.returncode and "unshare:" in done.stderr:
        pytest.skip(f"this machine cannot make a user namespace either: {done.stderr.strip()}")
    return done


@needs_unshare
def test_law_enforced_authority_without_user_namespaces_landlock_holds_every_attack() -> None:
    """Where bwrap cannot make a namespace, Landlock confines commands, and the whole
    hostile corpus (tests/test_sandbox_attacks.py) holds against it."""
    root = Path(__file__).resolve().parent.parent
    done = without_user_namespaces(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        str(root / "tests" / "test_sandbox_attacks.py"),
        cwd=root, env={**os.environ, "PEGBOARD_TEST_SANDBOX": "landlock"},
    )  # fmt: skip
    assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
    assert "skipped" not in done.stdout.splitlines()[-1]


@needs_unshare
def test_without_any_sandbox_auto_asks_and_required_refuses(
    workspace: Path, storage_dir: Path, tmp_path: Path
) -> None:
    """With no user namespace and no Landlock, auto asks every command and says why
    (even under allow-all rules), and required refuses with the reason."""
    script, launcher = tmp_path / "without.py", tmp_path / "no_landlock.py"
    script.write_text(WITHOUT_A_SANDBOX)
    launcher.write_text(WITHOUT_LANDLOCK)
    done = without_user_namespaces(
        sys.executable, str(launcher), sys.executable, str(script), str(workspace),
        str(storage_dir),
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr
    seen = json.loads(done.stdout)
    for mode in ("auto", "required"):
        assert seen[mode]["kind"] is None
        assert "bubblewrap cannot confine a command here" in seen[mode]["reason"]
        assert "the kernel offers no Landlock" in seen[mode]["reason"]
    assert seen["auto"]["failed"] is None
    [question] = seen["asked"]
    assert question["sandbox"].startswith("no sandbox is available here: bubblewrap cannot")
    assert "the command would run with your full authority" in question["sandbox"]
    assert seen["required"]["failed"].startswith("the host requires a sandbox for every command")
    assert "the command was not run" in seen["required"]["failed"]


async def test_law_enforced_authority_socketpair_still_works_without_the_network(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The filter refuses new Unix sockets only: a socketpair (reaching nothing) works."""
    probe = (
        f'{sys.executable} -c \'import socket; socket.socketpair(); print("pair"); '
        "socket.socket(socket.AF_UNIX)'"
    )
    async with opened(host, workspace, storage_dir) as location:
        outcome = await call(location, "bash", command=probe)
    assert "\npair\n" in f"\n{text(outcome)}"
    assert "PermissionError: [Errno 1] Operation not permitted" in text(outcome)


async def test_law_enforced_authority_other_locations_retained_output_is_out_of_reach(
    host: pegboard.Host, tmp_path: Path
) -> None:
    """A command reads its own Location's retained output, not another's, and writes neither."""
    storage, mine, theirs = tmp_path / "storage", tmp_path / "mine", tmp_path / "theirs"
    mine.mkdir()
    theirs.mkdir()
    async with opened(host, theirs, storage) as other:
        elsewhere = await other.storage.save(b"another Location's output")
    async with opened(host, mine, storage) as location:
        own = await location.storage.save(b"this Location's output")
        outcome = await call(
            location, "bash", command=f"cat {own}; cat {elsewhere}; echo x >> {own}"
        )
    shown = text(outcome)
    assert "this Location's output" in shown
    assert "another Location's output" not in shown
    assert any(f"{own}: {refused}" in shown for refused in REFUSED), shown
    assert b"this Location's output" == own.read_bytes()


async def test_law_host_authority_a_command_cannot_save_approvals_for_itself(
    host: pegboard.Host, workspace: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even where pegboard's data folder lies inside the Location (a Location at $HOME),
    the saved approvals stay read-only to commands: none can approve itself."""
    data = workspace / ".local" / "share"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    from pegboard._permissions import default_approvals_file

    target = default_approvals_file(workspace)
    forged = json.dumps({"approvals": [{"action": "bash", "pattern": "*"}]})
    async with opened(host, workspace, storage_dir) as location:
        outcome = await call(
            location, "bash", command=f"mkdir -p {target.parent}; echo '{forged}' > {target}"
        )
        saved = await location.permissions.approvals()
    assert any(f"{target}: {refused}" in text(outcome) for refused in REFUSED)
    assert () == saved


async def test_law_enforced_authority_denying_every_edit_makes_the_location_read_only(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """`deny edit *` covers the root itself: no file changes and none is created."""
    (workspace / "kept.txt").write_text("as it was\n")
    rules = [*ALLOW_ALL, {"action": "edit", "resource": "*", "effect": "deny"}]
    async with opened(host, workspace, storage_dir, permissions=rules) as location:
        # Writes the analysis cannot see: only the kernel stands in their way.
        for name, mode in (("kept.txt", "a"), ("new.txt", "w")):
            program = f"open('{name}', '{mode}').write('x')"
            outcome = await call(location, "bash", command=f'{sys.executable} -c "{program}"')
            assert any(f"{refused}: '{name}'" in text(outcome) for refused in REFUSED)
    assert ["kept.txt"] == os.listdir(workspace)
    assert "as it was\n" == (workspace / "kept.txt").read_text()


#: Lines an allow-list of `git status *` and `ls *` once let run arbitrary code.
ALLOW_LIST_ESCAPES = (
    "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=touch pwned'\" git status",
    "PAGER='touch pwned' git status",
    "evil/ls -la",
    "./ls",
    "env GIT_EXTERNAL_DIFF='touch pwned' git status",
    "git -c core.fsmonitor='touch pwned' status",
    "ls $(touch pwned)",
    "ls `touch pwned`",
    "ls <(touch pwned)",
)


@pytest.mark.parametrize("line", ALLOW_LIST_ESCAPES)
async def test_law_host_authority_an_allow_list_runs_only_what_it_names(
    host: pegboard.Host, workspace: Path, storage_dir: Path, line: str
) -> None:
    """With `git status *` and `ls *` allowed and every question refused, none of these
    lines runs: each is asked (and refused) instead of matching the allow-list."""
    (workspace / "evil").mkdir()
    for script in (workspace / "evil" / "ls", workspace / "ls"):
        script.write_text("#!/bin/sh\ntouch pwned\n")
        script.chmod(0o755)
    rules = [
        {"action": "bash", "resource": "git status *", "effect": "allow"},
        {"action": "bash", "resource": "ls *", "effect": "allow"},
        {"action": "edit", "resource": "*", "effect": "allow"},
    ]
    asked: list[pegboard.PermissionRequest] = []

    async def refuse(request: pegboard.PermissionRequest) -> pegboard.Reject:
        asked.append(request)
        return pegboard.Reject("not on the allow-list")

    async with opened(host, workspace, storage_dir, permissions=rules, approver=refuse) as location:
        outcome = await call(location, "bash", command=line)
    assert "the user rejected bash: not on the allow-list" == failure(outcome)
    assert not (workspace / "pwned").exists()
    assert ["bash"] == [request.action for request in asked]


def test_law_enforced_authority_an_isolated_process_reads_only_what_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`isolated`: Python and its packages are readable; a home, other folders are not."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    shown = tmp_path / "shown"
    shown.mkdir()
    (shown / "note").write_text("readable")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    probe = textwrap.dedent(
        f"""
        import json, os, pegboard
        seen = {{}}
        for path in ({str(home / ".ssh" / "id_rsa")!r}, {str(shown / "note")!r}):
            try:
                seen[path] = open(path).read()
            except OSError as error:
                seen[path] = type(error).__name__
        for name, path in (("write", {str(tmp_path / "planted")!r}), ("prefix", {sys.prefix!r})):
            try:
                open(os.path.join(path, "planted") if name == "prefix" else path, "w")
                seen[name] = "written"
            except OSError as error:
                seen[name] = type(error).__name__
        open("/tmp/mine", "w").write("ok")
        seen["env"] = dict(os.environ)
        print(json.dumps(seen))
        """
    )
    readable = pegboard.sandbox.installation([shown])
    with pegboard.sandbox.isolated(readable=readable) as confinement:
        argv = confinement.command([sys.executable, "-I", "-c", probe], cwd=Path("/tmp"))
        done = subprocess.run(
            argv,
            env=confinement.environment,
            pass_fds=confinement.pass_fds,
            capture_output=True,
            text=True,
            check=True,
        )
        assert "ok" == (confinement.tmpdir / "mine").read_text()
    seen = json.loads(done.stdout)
    assert "FileNotFoundError" == seen[str(home / ".ssh" / "id_rsa")]
    assert "readable" == seen[str(shown / "note")]
    # The write lands in the private /tmp at most, never in the host's folder.
    assert not (tmp_path / "planted").exists()
    assert "OSError" == seen["prefix"]  # read-only: the installation cannot be changed
    assert "SECRET_TOKEN" not in seen["env"]
    assert "/tmp" == seen["env"]["HOME"]


@pytest.mark.parametrize(
    ("environment", "error"),
    [
        ({"A=B": "x"}, "is not a variable and a string"),
        ({"": "x"}, "is not a variable and a string"),
        ({"NAME": 5}, "is not a variable and a string"),
        ({3: "x"}, "is not a variable and a string"),
        ({"NAME": "x\0y"}, "holds a NUL character"),
        ({"NA\0ME": "x"}, "holds a NUL character"),
    ],
    ids=["equals sign", "empty name", "not a string", "name not a string", "NUL", "NUL name"],
)
async def test_what_the_host_passes_to_commands_is_checked(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    environment: dict[Any, Any],
    error: str,
) -> None:
    """environment= takes variables and strings only: anything else is a clear error when
    the Location opens, never a command started with a broken environment."""
    with pytest.raises(pegboard.ConfigError, match=error):
        async with host.location(workspace, storage=storage_dir, environment=environment):
            pass


def test_a_working_bubblewrap_is_remembered_until_what_it_depends_on_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe runs bwrap once per boot, kernel settings and binary; a failure every time."""
    from pegboard.sandbox import _bubblewrap

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    [real, *_] = _bubblewrap.find()
    monkeypatch.setattr(_bubblewrap, "find", lambda: [real])
    runs: list[list[str]] = []
    run = subprocess.run

    def counting(argv: list[str], **options: Any) -> Any:
        runs.append(argv)
        return run(argv, **options)

    monkeypatch.setattr(_bubblewrap.subprocess, "run", counting)
    for _ in range(2):
        _bubblewrap.probe.cache_clear()
        assert (real, None) == _bubblewrap.probe()
    assert 1 == len(runs)  # the second process would not run bwrap
    key = _bubblewrap._probe_key
    monkeypatch.setattr(_bubblewrap, "_probe_key", lambda found: f"{key(found)}\nrebooted")
    _bubblewrap.probe.cache_clear()
    assert (real, None) == _bubblewrap.probe()
    assert 2 == len(runs)
    # A bwrap that cannot confine is never remembered.
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(_bubblewrap, "find", lambda: [str(fake)])
    for expected_runs in (3, 4):
        _bubblewrap.probe.cache_clear()
        found, reason = _bubblewrap.probe()
        assert found is None
        assert "No permissions to create new namespace" in (reason or "")
        assert expected_runs == len(runs)
    # A planted record naming another program is never run as the sandbox.
    monkeypatch.setattr(_bubblewrap, "find", lambda: [real])
    planted = _bubblewrap._probe_key([real])
    assert planted is not None
    _bubblewrap._cache_file().write_text(f"{planted}\nworks=/bin/true", encoding="utf-8")
    _bubblewrap.probe.cache_clear()
    assert (real, None) == _bubblewrap.probe()
    assert expected_runs + 1 == len(runs)  # probed for real, the planted record ignored
    # What this process knows is the real bwrap again, as later tests expect.
    monkeypatch.undo()
    _bubblewrap.probe.cache_clear()
    assert _bubblewrap.probe()[0] is not None

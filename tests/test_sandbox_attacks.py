"""Law 11, enforced authority: what the rules deny, the kernel refuses, whatever was approved.

Every Location here allows everything first and approves every question, then denies
``rm``, reading ``.env`` and ``secrets/*`` and editing ``.env``: nothing but the sandbox
stands between a form of `sandbox_corpus` and the canary it aims at. Each test runs all the
forms of one promise in one Location and names every form that got through.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from builtin_calls import call, text
from sandbox_corpus import (
    ABSTRACT_SOCKETS,
    ENVIRONMENT,
    HELD,
    LEFT_BEHIND,
    NETWORK,
    READS,
    SIGNALS,
    UNIX_SOCKETS,
    WRITES,
    fill,
)

import pegboard
import pegboard.sandbox

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        pegboard.sandbox.detect("required").kind is None,
        reason="no sandbox confines commands on this machine",
    ),
]

#: The sandbox these attacks meet: bubblewrap, or Landlock where tests/test_sandbox.py
#: runs this file again in a user namespace that can make no other.
EXPECTED = os.environ.get("PEGBOARD_TEST_SANDBOX", "bubblewrap")
#: Landlock governs no file metadata (mode, owner, times): a command may chmod what the
#: user owns (docs/host-guide.md says so), and there only contents and names are kept.
METADATA_KEPT = EXPECTED == "bubblewrap"
ALLOW_ALL = {"action": "*", "resource": "*", "effect": "allow"}
RULES = (
    ALLOW_ALL,
    {"action": "bash", "resource": "rm *", "effect": "deny"},
    {"action": "read", "resource": ".env", "effect": "deny"},
    {"action": "read", "resource": "secrets/*", "effect": "deny"},
    {"action": "edit", "resource": ".env", "effect": "deny"},
)
CONFIG = "[tool_output]\nmax_lines = 2000\n"
#: /tmp is replaced inside the sandbox: grounds there would hide the outside folder
#: from every form, so they go where the sandbox shows the host's own folder.
SHARED_TEMPORARY = Path("/var/tmp")


async def approve(request: pegboard.PermissionRequest) -> str:
    """Say yes to everything: the kernel alone must hold."""
    return "always"


@attrs.frozen(kw_only=True)
class Grounds:
    """A Location with its canaries, next to a folder and a ``$HOME`` it must not touch."""

    base: Path
    root: Path
    outside: Path
    home: Path
    shared: Path
    dotenv: str
    key: str

    def values(self, **more: object) -> dict[str, object]:
        """The placeholder values of `sandbox_corpus.fill`."""
        payload = f"echo pwned > {self.outside}/from-base64\n"
        return {
            "outside": self.outside,
            "parent": self.base,
            "root": self.root,
            "home": self.home,
            "python": sys.executable,
            "payload": base64.b64encode(payload.encode()).decode(),
            "escaped": "".join(f"\\{ord(char):03o}" for char in str(self.outside)),
            **more,
        }

    def state(self) -> dict[str, object]:
        """Everything a write form must leave alone, as it is now."""
        kept = _tree(self.base, skip=(self.root, self.shared))
        for name in (".env", "pegboard.toml", "secrets/key"):
            kept[f"workspace/{name}"] = _entry(self.root / name)
        return kept

    def leaked(self, output: str) -> bool:
        """Whether ``output`` shows either denied file, plainly or encoded."""
        return _shows(output, self.dotenv) or _shows(output, self.key)


def _entry(path: Path) -> object:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if path.is_symlink():
        return ("link", os.readlink(path))
    mode = info.st_mode if METADATA_KEPT else None
    if path.is_dir():
        return ("folder", mode, info.st_uid)
    return ("file", mode, info.st_uid, info.st_ino, path.read_bytes())


def _tree(top: Path, skip: tuple[Path, ...]) -> dict[str, object]:
    found: dict[str, object] = {".": _entry(top)}
    for folder, names, files in os.walk(top):
        names[:] = [name for name in names if Path(folder, name) not in skip]
        for name in (*names, *files):
            path = Path(folder, name)
            found[path.relative_to(top).as_posix()] = _entry(path)
    return found


def _shows(output: str, token: str) -> bool:
    """Whether any run of ten characters of ``token``'s random part shows, plain,
    base64 or hex. A token is ``NAME-RANDOM``; NAME is left out, since the names of
    files and tests in other processes' command lines can hold it.
    """
    token = token.rpartition("-")[2]
    squeezed = "".join(output.split())
    encoded = base64.b64encode(token.encode()).decode()
    pieces = [token[at : at + 10] for at in range(0, len(token) - 9, 5)]
    pieces += [token.encode().hex()[at : at + 20] for at in range(0, 2 * len(token) - 19, 10)]
    pieces += [encoded[4:-4]]
    return any(piece in output or piece in squeezed for piece in pieces)


@pytest.fixture
def grounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grounds]:
    """The Location, with ``.env``, ``secrets/key``, ``pegboard.toml`` and a hard link to
    ``.env``; beside it a folder it must not touch, a ``$HOME`` and a writable folder."""
    if SHARED_TEMPORARY.is_dir() and os.access(SHARED_TEMPORARY, os.W_OK):
        base = Path(tempfile.mkdtemp(prefix="pegboard-attacks-", dir=SHARED_TEMPORARY))
    else:
        base = tmp_path / "grounds"
        base.mkdir()
    try:
        root, outside, home, shared = (
            base / name for name in ("workspace", "outside", "home", "shared")
        )
        for folder in (root, root / "secrets", outside, home, shared):
            folder.mkdir()
        made = Grounds(
            base=base,
            root=root,
            outside=outside,
            home=home,
            shared=shared,
            dotenv=f"dotenv-{secrets.token_hex(16)}",
            key=f"key-{secrets.token_hex(16)}",
        )
        (root / ".env").write_text(f"API_KEY={made.dotenv}\n")
        (root / "secrets" / "key").write_text(f"{made.key}\n")
        (root / "pegboard.toml").write_text(CONFIG)
        os.link(root / ".env", root / "innocent")
        (outside / "file").write_text("outside\n")
        (home / ".bashrc").write_text("# canary\n")
        monkeypatch.setenv("HOME", str(home))
        yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


@contextlib.asynccontextmanager
async def confined(
    host: pegboard.Host, grounds: Grounds, storage: Path, **options: Any
) -> AsyncIterator[pegboard.Location]:
    """The grounds' Location, allowing and approving everything the rules do not deny."""
    chosen: dict[str, Any] = {
        "permissions": RULES,
        "approver": approve,
        "sandbox": "required",
        "writable": [grounds.shared],
        **options,
    }
    async with host.location(
        grounds.root, plugins=["builtin"], storage=storage, **chosen
    ) as location:
        assert () == location.plugin_errors
        if chosen["sandbox"] != "off":
            assert pegboard.SandboxInfo(kind=EXPECTED) == location.sandbox
        yield location


async def run(location: pegboard.Location, command: str, **input: Any) -> str:
    """The output (or refusal) of one bash call."""
    input.setdefault("timeout", 20)
    return text(await call(location, "bash", command=command, **input))


# Promise 1: writes land only inside the Location, its TMPDIR and the writable folders.


def test_law_enforced_authority_corpus_covers_every_promise() -> None:
    """Each promise has forms, ids are unique within it, and there are at least 150."""
    groups = (
        WRITES,
        READS,
        NETWORK,
        UNIX_SOCKETS,
        ABSTRACT_SOCKETS,
        LEFT_BEHIND,
        HELD,
        SIGNALS,
        ENVIRONMENT,
    )
    assert all(groups)
    for group in groups:
        ids = [name for name, _ in group]
        assert len(set(ids)) == len(ids), ids
    assert sum(map(len, groups)) >= 150


async def test_law_enforced_authority_no_write_lands_outside(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """No form changes the outside folder, ``$HOME``, ``.env`` or ``pegboard.toml``."""
    before = grounds.state()
    changed = {}
    async with confined(host, grounds, storage_dir) as location:
        for name, form in WRITES:
            output = await run(location, fill(form, grounds.values()))
            after = grounds.state()
            if after != before:
                moved = sorted(k for k in {*before, *after} if before.get(k) != after.get(k))
                changed[name] = (moved, output[-300:])
            before = after
    assert {} == changed


async def test_law_enforced_authority_writes_land_where_the_host_allows(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """The Location, the call's TMPDIR and a ``writable`` folder take writes."""
    # Landlock cannot carve a hole in a folder: the root, holding the masked .env and
    # pegboard.toml, takes no new files there (docs/host-guide.md), a subfolder does.
    inside = "inside" if EXPECTED == "bubblewrap" else "src/inside"
    (grounds.root / "src").mkdir(exist_ok=True)
    # Under bubblewrap TMPDIR is /tmp; under Landlock the call's own folder elsewhere.
    tmp = "/tmp/t" if EXPECTED == "bubblewrap" else '"$TMPDIR/t"'
    async with confined(host, grounds, storage_dir) as location:
        output = await run(
            location,
            f"echo a > {inside} && echo b > {grounds.shared}/shared && "
            f'echo c > "$TMPDIR/t" && cat "$TMPDIR/t" {tmp}',
        )
    assert output.startswith("c\nc\n"), output
    assert "a\n" == (grounds.root / inside).read_text()
    assert "b\n" == (grounds.shared / "shared").read_text()


# Promise 2: what the rules deny for read never reaches the output.


async def test_law_enforced_authority_denied_files_stay_unread(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """No form shows ``.env`` or ``secrets/key``, through a hard link made before the
    Location opened, a link made in-line, a copy, an archive, /proc or a remount."""
    leaked = {}
    async with confined(host, grounds, storage_dir) as location:
        for name, form in READS:
            output = await run(location, fill(form, grounds.values()))
            if grounds.leaked(output):
                leaked[name] = output[-300:]
    assert {} == leaked


async def test_law_enforced_authority_a_denied_file_linked_outside_is_refused(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """A hard link outside the Location, where no mask reaches, refuses commands by name."""
    os.link(grounds.root / ".env", grounds.outside / "env-link")
    async with confined(host, grounds, storage_dir) as location:
        outcome = await call(location, "bash", command="cat ../outside/env-link", timeout=20)
    assert isinstance(outcome, pegboard.Failed), text(outcome)
    assert "'.env'" in text(outcome)
    assert "hard links" in text(outcome)
    assert not grounds.leaked(text(outcome))


# Promise 3: no network without the rule.


class Listener:
    """A TCP or Unix socket server on the host that counts the connections it accepts."""

    def __init__(self, family: socket.AddressFamily, address: object) -> None:
        self.server = socket.socket(family, socket.SOCK_STREAM)
        self.server.bind(address)
        self.server.listen(64)
        self.server.settimeout(0.05)
        self.address = self.server.getsockname()
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                peer, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            peer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


@contextlib.contextmanager
def listening(family: socket.AddressFamily, address: object) -> Iterator[Listener]:
    """A `Listener` for the length of the block."""
    listener = Listener(family, address)
    try:
        yield listener
    finally:
        listener.close()


def non_loopback_address() -> str | None:
    """An IPv4 address of this host other than loopback, or None."""
    for target in ("192.0.2.1", "10.255.255.255", "8.8.8.8"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((target, 9))
            except OSError:
                continue
            address = str(probe.getsockname()[0])
        if not address.startswith("127.") and address != "0.0.0.0":
            return address
    return None


async def reached(
    location: pegboard.Location,
    forms: tuple[tuple[str, str], ...],
    listener: Listener,
    values: Mapping[str, object],
    **input: Any,
) -> dict[str, str]:
    """The forms after which ``listener`` had accepted a connection, with their output."""
    through = {}
    for name, form in forms:
        seen = listener.accepted
        output = await run(location, fill(form, values), **input)
        await anyio.sleep(0.02)
        if listener.accepted != seen:
            through[name] = output[-200:]
    return through


async def test_law_enforced_authority_no_tcp_connection_without_the_rule(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """No form reaches a TCP listener on the host's loopback or other address."""
    addresses = ["127.0.0.1", *filter(None, [non_loopback_address()])]
    through = {}
    async with confined(host, grounds, storage_dir) as location:
        for address in addresses:
            with listening(socket.AF_INET, (address, 0)) as listener:
                values = grounds.values(host=address, port=listener.address[1])
                for name, output in (await reached(location, NETWORK, listener, values)).items():
                    through[f"{name} -> {address}"] = output
                await anyio.sleep(0.2)
                assert len(through) <= listener.accepted
                if listener.accepted and not through:
                    through[f"late connection -> {address}"] = str(listener.accepted)
    assert {} == through


async def test_law_enforced_authority_no_unix_socket_connection_without_the_rule(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """No form reaches a Unix socket the host listens on: in the Location, outside it, or
    abstract (named in the network namespace rather than the filesystem)."""
    through = {}
    async with confined(host, grounds, storage_dir) as location:
        for where in (grounds.root, grounds.outside):
            with listening(socket.AF_UNIX, str(where / "listener.sock")) as listener:
                values = grounds.values(socket=listener.address)
                for name, output in (
                    await reached(location, UNIX_SOCKETS, listener, values)
                ).items():
                    through[f"{name} -> {where.name}"] = output
        abstract = f"pegboard-attacks-{secrets.token_hex(8)}"
        with listening(socket.AF_UNIX, "\0" + abstract) as listener:
            values = grounds.values(abstract=abstract)
            through.update(await reached(location, ABSTRACT_SOCKETS, listener, values))
    assert {} == through


async def test_law_enforced_authority_network_true_without_the_rule_reaches_nothing(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """Asking for the network under a rule that denies it, approved or not, connects nowhere."""
    rules = (*RULES, {"action": "network", "resource": "*", "effect": "deny"})
    address = non_loopback_address() or "127.0.0.1"
    async with confined(host, grounds, storage_dir, permissions=rules) as location:
        with listening(socket.AF_INET, (address, 0)) as listener:
            values = grounds.values(host=address, port=listener.address[1])
            through = await reached(location, NETWORK[:6], listener, values, network=True)
            await anyio.sleep(0.2)
            assert 0 == listener.accepted, through


async def test_law_enforced_authority_the_network_rule_opens_the_network(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """With ``network=true`` and a host rule allowing it, the host's non-loopback address
    answers: the negative tests above would pass on a sandbox that broke every socket."""
    address = non_loopback_address()
    if address is None:
        pytest.skip("this host has no non-loopback IPv4 address to listen on")
    rules = (*RULES, {"action": "network", "resource": "*", "effect": "allow"})
    async with confined(host, grounds, storage_dir, permissions=rules) as location:
        with listening(socket.AF_INET, (address, 0)) as listener:
            form = dict(NETWORK)["python socket"]
            values = grounds.values(host=address, port=listener.address[1])
            output = await run(location, fill(form, values), network=True)
            for _ in range(100):
                if listener.accepted:
                    break
                await anyio.sleep(0.05)
    assert "(exit code 0)" in output, output
    assert listener.accepted >= 1


# Promise 4: nothing outlives its call; nothing reaches a process outside.


def command_lines() -> list[bytes]:
    """The command line of every process the host can see."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                found.append((entry / "cmdline").read_bytes())
    return found


async def survivors(tags: Mapping[str, str]) -> list[str]:
    """The forms (by tag) whose processes still run after about two seconds."""
    left: list[str] = []
    for _ in range(40):
        lines = command_lines()
        left = [name for name, tag in tags.items() if any(tag.encode() in line for line in lines)]
        if not left:
            break
        await anyio.sleep(0.05)
    return left


async def test_law_enforced_authority_nothing_outlives_its_call(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """No form leaves a process running after its call completes, times out or is
    cancelled: setsid, double forks, nohup, disown, killing or stopping the parent or
    process 1, ignoring TERM, exec -a."""
    salt = secrets.randbelow(10**8)
    tags: dict[str, str] = {}
    endings: dict[str, dict[str, Any]] = {}
    for index, (name, form) in enumerate(LEFT_BEHIND):
        tags[f"completed: {name}"] = f"{salt:08d}{index:03d}1"
        endings[f"completed: {name}"] = {"command": form, "timeout": 20}
    for index, (name, form) in enumerate(HELD):
        tags[f"timed out: {name}"] = f"{salt:08d}{index:03d}2"
        endings[f"timed out: {name}"] = {"command": form, "timeout": 1}
        tags[f"cancelled: {name}"] = f"{salt:08d}{index:03d}3"
        endings[f"cancelled: {name}"] = {"command": form, "timeout": 20, "cancel": 1.0}
    seen: set[str] = set()
    done = anyio.Event()

    async def end(name: str) -> None:
        chosen = dict(endings[name])
        cancel = chosen.pop("cancel", None)
        chosen["command"] = fill(chosen["command"], grounds.values(tag=tags[name]))
        if cancel is None:
            await call(location, "bash", **chosen)
            return
        async with anyio.create_task_group() as calling:
            calling.start_soon(lambda: call(location, "bash", **chosen))
            # Cancelled once what it started runs (or after 30 s: then `seen` fails).
            with anyio.move_on_after(30):
                while name not in seen:  # noqa: ASYNC110 - the watcher fills it
                    await anyio.sleep(0.05)
            await anyio.sleep(cancel)
            calling.cancel_scope.cancel()

    async def watch() -> None:
        # Proves the scan sees what a form starts: each held form's sleep shows here.
        while not done.is_set():
            for line in command_lines():
                if line.startswith((b"sleep\0", b"marker-")):
                    seen.update(name for name, tag in tags.items() if tag.encode() in line)
            await anyio.sleep(0.05)

    with anyio.fail_after(90):
        async with confined(host, grounds, storage_dir) as location:
            async with anyio.create_task_group() as watching:
                watching.start_soon(watch)
                async with anyio.create_task_group() as group:
                    for name in endings:
                        group.start_soon(end, name)
                done.set()
            left = await survivors(tags)
            assert [] == left, f"survivors: {left}"
    assert [] == sorted(
        name for name in tags if not name.startswith("completed") and name not in seen
    )


@contextlib.contextmanager
def sentinel(environment: Mapping[str, str]) -> Iterator[int]:
    """A host process outside any sandbox, started with ``environment``; its host PID."""
    process = subprocess.Popen(["sleep", "1000"], env={"PATH": os.environ["PATH"], **environment})
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def stopped_or_gone(pid: int) -> str | None:
    """Why the sentinel no longer runs freely, or None."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
    return None if state in ("S", "R", "D") else f"state {state}"


async def test_law_enforced_authority_no_process_outside_is_reached(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """No form signals, stops, traces or reads a process the host runs outside."""
    canary = f"sentinel-{secrets.token_hex(16)}"
    reached_it = {}
    with sentinel({"SENTINEL_CANARY": canary}) as pid:
        async with confined(host, grounds, storage_dir) as location:
            for name, form in SIGNALS:
                output = await run(location, fill(form, grounds.values(pid=pid)))
                why = stopped_or_gone(pid)
                if why is not None or _shows(output, canary):
                    reached_it[name] = (why, output[-300:])
                if why == "state T":
                    os.kill(pid, signal.SIGCONT)
    assert {} == reached_it


# Promise 5: the host's environment stays with the host.


async def test_law_enforced_authority_the_host_environment_stays_out(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No form shows a secret in the host's environment; what the host passes shows."""
    canaries = {
        name: f"{name.lower()}-{secrets.token_hex(16)}"
        for name in ("PEGBOARD_CANARY_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN")
    }
    for name, value in canaries.items():
        monkeypatch.setenv(name, value)
    passed = f"passed-{secrets.token_hex(8)}"
    shown = {}
    async with contextlib.AsyncExitStack() as stack:
        # /proc/PID/environ shows what a process started with, not what it set later:
        # a process started with the secrets gives the /proc forms something to find.
        stack.enter_context(sentinel(canaries))
        location = await stack.enter_async_context(
            confined(host, grounds, storage_dir, environment={"MY_VAR": passed})
        )
        assert passed in await run(location, 'echo "$MY_VAR"')
        for name, form in ENVIRONMENT:
            output = await run(location, fill(form, grounds.values()))
            if any(_shows(output, value) for value in canaries.values()):
                shown[name] = output[-300:]
    assert {} == shown


# The corpus can tell a sandbox from none.


async def test_law_enforced_authority_the_corpus_detects_a_missing_sandbox(
    host: pegboard.Host, grounds: Grounds, storage_dir: Path
) -> None:
    """With the sandbox off, a write form, a read form and an environment form get through.

    This test exists so the ones above cannot pass by accident: if the placeholders, the
    snapshots or the leak checks were wrong, every attack would look refused with or
    without a kernel in the way. Here nothing confines the commands, and the same checks
    must see each form succeed. The command's own environment is scrubbed with or without
    a sandbox, so the environment form that gets through is the one the PID namespace
    stops: reading another process's environment through /proc.
    """
    canary = f"canary-{secrets.token_hex(16)}"
    before = grounds.state()
    with sentinel({"PEGBOARD_CANARY_TOKEN": canary}):
        async with confined(host, grounds, storage_dir, sandbox="off") as location:
            assert location.sandbox.kind is None
            await run(location, fill(dict(WRITES)["python open"], grounds.values()))
            assert grounds.state() != before
            read = await run(location, fill(dict(READS)["python"], grounds.values()))
            assert grounds.leaked(read), read
            environment = await run(
                location, fill(dict(ENVIRONMENT)["proc every environ"], grounds.values())
            )
            assert _shows(environment, canary), environment

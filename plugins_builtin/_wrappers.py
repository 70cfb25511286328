"""Programs that run other programs: which are seen through, and which run code unseen."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

__all__ = (
    "SHELLS",
    "find_acts",
    "find_commands",
    "git_runs",
    "is_privileged",
    "is_python",
    "is_stdin",
    "program_index",
    "runs_unseen",
    "shell_program",
    "unwrap",
    "variable_reason",
    "wrapped_assignments",
)

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "yash"})
# Variables that change which program a name runs, or run code of their own.
LOADER_VARIABLES = frozenset(
    {
        "PATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "BASH_ENV",
        "ENV",
        "IFS",
        "SHELLOPTS",
        "PS4",
        "PS0",
        "PS1",
        "PROMPT_COMMAND",
    }
)
# Variables a command may be given without being asked as opaque. Any other may
# name a program or code the command runs (PAGER, GIT_CONFIG_PARAMETERS, LESSOPEN,
# EDITOR, *_OPTIONS…), so the list holds only locale, terminal and verbosity
# settings that programs read as plain values.
_SAFE_VARIABLES = frozenset({"LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR", "COLUMNS", "LINES",
                             "CI", "FORCE_COLOR", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
                             "RUST_BACKTRACE", "RUST_LOG", "DEBUG", "VERBOSE"})  # fmt: skip
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
# Where a program reads its input (or a descriptor bash opened) by name.
_STDIN = re.compile(r"/dev/stdin|/dev/fd/\d+|/proc/(?:self|thread-self|\d+)/fd/\d+")


def is_python(name: str) -> bool:
    """Whether the command ``name`` is a Python interpreter."""
    return _PYTHON.fullmatch(name) is not None


def is_privileged(name: str) -> bool:
    """Whether the command ``name`` runs another as someone else (``sudo``)."""
    return name in _PRIVILEGED


def is_stdin(path: str) -> bool:
    """Whether ``path`` names standard input or an open descriptor (``/dev/fd/3``)."""
    return _STDIN.fullmatch(path) is not None


def variable_reason(name: str) -> str | None:
    """Why giving a command the variable ``name`` makes it opaque, or None when it is safe."""
    if name in LOADER_VARIABLES:
        return f"it sets {name}, which decides what runs"
    if name in _SAFE_VARIABLES or name.startswith("LC_"):
        return None
    return f"it sets {name}, which the program may read as a command or code to run"


def wrapped_assignments(base: str, texts: list[str], start: int) -> Iterator[str]:
    """The names ``env NAME=value`` or ``sudo NAME=value`` sets before the command."""
    if base in ("env", "sudo"):
        for text in texts[1:start]:
            match = _ASSIGNMENT.match(text)
            if match is not None:
                yield match.group(1)


# Wrappers: how many words after the name are options (and their values), so
# the command they run starts after them.
_FLAG_VALUES = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user",
                       "--group", "--chdir", "--prompt", "--host", "--close-from"}),
    "doas": frozenset({"-u", "-C"}),
    "xargs": frozenset({"-I", "-L", "-n", "-P", "-d", "-E", "-s", "-a", "--arg-file",
                        "--delimiter", "--max-args", "--max-procs", "--max-lines", "-e"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "ionice": frozenset({"-c", "-n", "-t", "-p", "-P", "-u", "--class", "--classdata"}),
    "exec": frozenset({"-a"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "nohup": frozenset(),
    "setsid": frozenset(),
    "busybox": frozenset(),  # multi-call binaries: `busybox rm` is rm
    "toybox": frozenset(),
}  # fmt: skip
# Wrappers that take one operand before the command (timeout DURATION).
_OPERANDS = {"timeout": 1, "chroot": 1}
# Kept as a resource as well as the command they run: they change who runs it.
_PRIVILEGED = frozenset({"sudo", "doas", "chroot"})
# Programs that run their arguments (or what they read) as a command, in ways
# not read here: options of their own mixed with the command's, a command string,
# a debugger or scheduler. Asked as a whole.
_UNSEEN = frozenset({"chrt", "script", "setpriv", "unshare", "strace", "ltrace", "nsenter",
                     "watch", "taskset", "prlimit", "firejail", "systemd-run", "parallel", "at",
                     "batch", "expect", "faketime", "proot", "fakeroot", "valgrind", "gdb",
                     "perf", "caffeinate", "numactl", "cgexec", "runcon", "sg", "newgrp",
                     "dbus-launch", "xvfb-run", "unbuffer", "pkexec", "catchsegv",
                     "fakechroot", "torsocks", "proxychains", "proxychains4"})  # fmt: skip
_FLOCK_VALUES = frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"})


def runs_unseen(base: str, texts: list[str]) -> str | None:
    """Why ``texts`` runs code this analysis cannot read, or None."""
    options = texts[1:]
    if base in _UNSEEN:
        return f"{base} runs its arguments or its input as a command"
    if base == "flock":
        operands = _operands(options, _FLOCK_VALUES)
        if len(operands) > 1 or any(t in ("-c", "--command") for t in options):
            return "flock runs its arguments as a command"
    elif base == "env" and any(
        re.match(r"-[^-]*S", t) or t.startswith("--split-string") for t in options
    ):
        return "env -S splits a string into a command when it runs"
    elif base == "sudo" and any(t in ("-s", "-i", "--shell", "--login") for t in options):
        return "sudo -s and -i run the command through a shell"
    elif base == "printf" and any(re.match(r"-[^-]*v", t) for t in _leading(options)):
        return "printf -v assigns to a name whose subscript bash evaluates"
    elif base in ("compgen", "complete") and any(_short(t, "CF") for t in options):
        return f"{base} -C and -F run a command or function"
    elif base in ("mapfile", "readarray") and any(_short(t, "C") for t in options):
        return f"{base} -C runs a command for each line it reads"
    elif base in ("test", "[") and _tests_subscript(options):
        return "test -v evaluates the subscript of the name it tests"
    elif base == "eval":
        return "eval runs a string built when it runs"
    return None


def _short(text: str, letters: str) -> bool:
    return text.startswith("-") and not text.startswith("--") and any(c in text for c in letters)


def _leading(options: list[str]) -> list[str]:
    return options[: next((i for i, t in enumerate(options) if t[:1] != "-"), None)]


def _operands(options: list[str], values: frozenset[str]) -> list[str]:
    operands, skip = [], False
    for text in options:
        if skip:
            skip = False
        elif text.startswith("-") and text != "-":
            skip = text in values
        else:
            operands.append(text)
    return operands


def _tests_subscript(options: list[str]) -> bool:
    # An operand that is an expansion may hold a subscript too.
    return any(
        t == "-v" and ("[" in operand or "$" in operand)
        for t, operand in itertools.pairwise(options)
    )


def unwrap(base: str, texts: list[str]) -> tuple[int, bool] | None:
    """Where the command a wrapper runs starts, and whether to keep the wrapper too."""
    if base not in _FLAG_VALUES and base not in _OPERANDS:
        return None
    if base == "command" and any(t.startswith("-") and ("v" in t or "V" in t) for t in texts[1:2]):
        return None  # `command -v NAME` looks a name up, runs nothing
    if base == "sudo" and any(t in ("-e", "--edit") for t in texts[1:]):
        return None
    values = _FLAG_VALUES.get(base, frozenset())
    index = 1
    while index < len(texts):
        text = texts[index]
        if text == "--":
            index += 1
            break
        if base in ("env", "sudo") and _ASSIGNMENT.match(text):
            index += 1
            continue
        if not text.startswith("-") or text == "-":
            break
        index += 2 if text in values else 1
    index += _OPERANDS.get(base, 0)
    keep = is_privileged(base) or index >= len(texts)
    return index, keep


def shell_program(texts: list[str]) -> tuple[str, int]:
    """How a shell gets its program: ``("string", i)`` for ``-c``, ``("file", i)``, or
    ``("input", len)`` when it reads standard input."""
    command = stdin = False
    index = 1
    while index < len(texts):
        text = texts[index]
        if text in ("--", "-"):
            index += 1
            break
        if text.startswith("--"):
            index += 2 if text in ("--rcfile", "--init-file") else 1
            continue
        if len(text) < 2 or text[0] not in "-+":
            break
        letters = text[1:]
        if text[0] == "-":
            command = command or "c" in letters
            stdin = stdin or "s" in letters
        # `-o NAME` and `-O NAME` take a value each (`bash -o posix`).
        index += 1 + letters.count("o") + letters.count("O")
    if index >= len(texts) or (stdin and not command):
        return "input", len(texts)
    return ("string" if command else "file"), index


# Python, by the names it is installed under.
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?|pypy\d?")
_INTERPRETERS = frozenset({"perl", "ruby", "php", "lua", "node", "nodejs", "bun", "deno",
                           "Rscript", "osascript", "tclsh", "wish"})  # fmt: skip
_INLINE = frozenset({"-e", "-E", "--eval", "-p", "--print", "-r", "-c", "-m"})
_VERSION = frozenset({"--version", "-V", "--help", "-h"})
# Options whose value is the next word (`python3 -W ignore script.py`).
_VALUES = frozenset({"-W", "-X", "-I", "-C", "--require", "--import", "--loader"})


def program_index(base: str, texts: list[str]) -> int | None:
    """Where an interpreter's program file is in ``texts`` (``len(texts)`` for its input),
    or None when ``base`` is no interpreter or is given its code inline."""
    python = is_python(base)
    if base not in _INTERPRETERS and not python:
        return None
    index = 1
    while index < len(texts):
        text = texts[index]
        if text == "--":
            index += 1
            break
        if text == "-":
            return len(texts)
        if not text.startswith("-"):
            break
        if text in _VERSION or (text == "-v" and not python):
            return None
        if text in _INLINE or (python and re.match(r"-[bBdEiIOPqsSuvx]*[cm]", text)):
            return None
        index += 2 if text in _VALUES else 1
    return index


# git options whose value is a command git runs.
_GIT_PROGRAM_OPTIONS = ("--config-env=", "--exec-path", "--upload-pack", "--receive-pack",
                        "--exec=")  # fmt: skip


def git_runs(texts: list[str]) -> bool:
    """Whether a git option names a command for git to run (``-c``, ``--upload-pack``)."""
    if "clone" in texts and "-u" in texts:  # clone's -u is --upload-pack
        return True
    return any(t in ("-c", "--config-env") or t.startswith(_GIT_PROGRAM_OPTIONS) for t in texts[1:])


_FIND_ACTIONS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fls"})


def find_acts(texts: list[str]) -> bool:
    """Whether a ``find`` does more than search: deletes, runs or writes."""
    return any(text in _FIND_ACTIONS or text.startswith("-fprint") for text in texts)


def find_commands(texts: list[str]) -> Iterator[tuple[int, int]]:
    """Where each ``-exec``/``-execdir``/``-ok`` command of a ``find`` starts and ends."""
    for index, text in enumerate(texts):
        if text in ("-exec", "-execdir", "-ok", "-okdir") and index + 1 < len(texts):
            end = next(
                (i for i in range(index + 1, len(texts)) if texts[i] in (";", "+")), len(texts)
            )
            if end > index + 1:
                yield index + 1, end

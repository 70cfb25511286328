"""What a shell command runs that no rule may cover: the opaque forms and why."""

from __future__ import annotations

import pytest

from pegboard.plugins_builtin._commands import analyse


def texts(command: str) -> list[str]:
    """The resources a command line asks for, in order."""
    analysis = analyse(command)
    assert analysis.unreadable is None, analysis.unreadable
    return [item.text for item in analysis.commands]


def reasons(command: str) -> list[str]:
    """Why a command line's commands are opaque, for those that are."""
    return [item.opaque for item in analyse(command).commands if item.opaque is not None]


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=rm x'\" git status", "GIT_CONFIG_PARAMETERS"),
        ("PAGER=x git log", "PAGER"),
        ("LESSOPEN='|rm x %s' less f", "LESSOPEN"),
        ("LANG=C PAGER=x git log", "PAGER"),
        ("env PAGER=x git log", "PAGER"),
        ("env -i EDITOR=x git commit", "EDITOR"),
        ("sudo PAGER=x git log", "PAGER"),
    ],
)
def test_an_assignment_on_a_command_makes_it_opaque(command: str, name: str) -> None:
    """A variable given to a command may name code it runs: asked, whatever the rules."""
    assert any(name in why for why in reasons(command)), reasons(command)


@pytest.mark.parametrize(
    "command",
    [
        "LANG=C sort f",
        "LC_ALL=C LC_COLLATE=C ls",
        "TZ=UTC date",
        "TERM=dumb NO_COLOR=1 COLUMNS=80 LINES=24 ls",
        "CI=1 FORCE_COLOR=0 DEBUG=1 VERBOSE=1 make",
        "PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 pytest",
        "RUST_BACKTRACE=1 RUST_LOG=debug cargo test",
        "env LANG=C sort f",
        "PATH=x; ls",
    ],
)
def test_a_safe_listed_assignment_keeps_a_command_analysable(command: str) -> None:
    """Locale, terminal and verbosity settings are plain values: the command is matched."""
    assert [] == [why for why in reasons(command) if "PATH" not in why]


def test_a_bare_loader_assignment_stays_opaque() -> None:
    assert any("PATH" in why for why in reasons("PATH=x; ls"))


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("source /dev/stdin <<< 'rm x'", "reads from its input"),
        (". /dev/fd/3 3< script", "reads from its input"),
        (". <(echo rm x)", "another command writes"),
        ("bash < script", "reads from its input"),
        ("bash /dev/stdin", "reads from its input"),
        ("bash /proc/self/fd/0", "reads from its input"),
        ("bash <(curl x)", "another command writes"),
        ('bash "$script"', "a file named by an expansion"),
        ("bash -o posix", "reads from its input"),
        ("bash -x <<< 'rm x'", "reads from its input"),
        ("sh -s", "reads from its input"),
        ("sh -s -- a b <<EOF\nrm x\nEOF", "reads from its input"),
        ("python3 /dev/stdin <<< 'import os'", "reads from its input"),
        ("python3 -W ignore <<< 'import os'", "reads from its input"),
        ("python3 <(curl x)", "another command writes"),
        ("perl /proc/self/fd/3", "reads from its input"),
        ("node /dev/stdin", "reads from its input"),
        ("busybox sh", "reads from its input"),
    ],
)
def test_a_program_read_from_input_is_opaque(command: str, reason: str) -> None:
    """Standard input, a descriptor or a process substitution hides the program run."""
    assert any(reason in why for why in reasons(command)), reasons(command)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("bash -c -e 'rm x'", ["rm x"]),
        ("bash -o posix -c 'rm x'", ["rm x"]),
        ("bash -c -- 'rm x'", ["rm x"]),
        ("busybox sh -c 'rm x'", ["rm x"]),
        ("ionice -c 3 rm x", ["rm x"]),
        ("bash build.sh", ["bash build.sh"]),
    ],
)
def test_a_shell_s_options_never_hide_its_command_string(command: str, expected: list[str]) -> None:
    """Options between -c and the string (`-e`, `-o posix`) are options, not the string."""
    assert expected == texts(command)
    assert [] == reasons(command)


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("echo ${x@P}", "@P"),
        ('echo "${x@P}"', "@P"),
        ("a=${x@P}", "@P"),
        ("echo > ${x@P}", "@P"),
        ("echo ${a[0]@P}", "@P"),
        ("echo ${!x}", "indirection"),
        ('echo "${!x:-d}"', "indirection"),
        ("echo ${!a[1]}", "indirection"),
        ("printf -v x %s y", "printf -v"),
        ("printf -v 'a[$(rm x)]' %s y", "printf -v"),
        ("[[ -v a[$(rm x)] ]]", "-v"),
        ("[[ -v 'a[1]' ]]", "-v"),
        ("[ -v 'a[$(rm x)]' ]", "-v"),
        ('[[ -v "$x" ]]', "-v"),
        ("test -v 'a[$(rm x)]'", "-v"),
        ('test -v "$x"', "-v"),
        ("declare -n r=x", "nameref"),
        ("local -n r=x", "nameref"),
        ("typeset -n r", "nameref"),
        ("compgen -C 'rm x' y", "compgen -C"),
        ("compgen -F f y", "compgen -C and -F"),
        ("complete -C 'rm x' y", "complete -C"),
        ("complete -o default -F f y", "complete -C and -F"),
        ("mapfile -C 'rm x' -c 1 a", "mapfile -C"),
        ("readarray -t -C f a", "readarray -C"),
        ("eval ls", "eval"),
        ('trap "$x" EXIT', "built when it runs"),
        (". $f", "a file named by an expansion"),
    ],
)
def test_what_evaluates_data_as_code_is_opaque(command: str, reason: str) -> None:
    """Prompt expansion, indirection, subscripts bash evaluates, commands run by builtins."""
    assert any(reason in why for why in reasons(command)), reasons(command)


@pytest.mark.parametrize(
    "command",
    [
        'echo "${x@Q}" ${x@U} ${x@L} ${x@a}',
        "echo ${!a[@]} ${!a[*]} ${!pre*} ${!pre@} ${#x}",
        "printf '%s' x",
        "[[ -v x ]]",
        "test -v x",
        "declare -x a=1",
        "export -n a",
        "mapfile -t a",
        "complete -p",
    ],
)
def test_their_plain_forms_stay_analysable(command: str) -> None:
    """Quoting transformations, key listings and plain names evaluate nothing."""
    assert [] == reasons(command)


_UNSEEN = [
    "chrt 1 rm x", "script -qc 'rm x' /dev/null", "setpriv --reuid 1 rm x", "unshare -r rm x",
    "strace rm x", "ltrace rm x", "nsenter -t 1 rm x", "flock lock rm x",
    "flock -c 'rm x' lock", "watch rm x", "taskset -c 0 rm x", "prlimit --nofile=1 rm x",
    "firejail rm x", "systemd-run rm x", "parallel rm ::: x", "at now", "batch",
    "expect -c 'spawn rm x'", "faketime 2020-01-01 rm x", "proot rm x", "fakeroot rm x",
    "valgrind rm x", "gdb -batch -ex run --args rm x", "perf stat rm x", "caffeinate rm x",
    "numactl -N 0 rm x", "cgexec -g cpu:x rm x", "runcon -t x rm x", "sg grp -c 'rm x'",
    "newgrp grp", "dbus-launch rm x", "xvfb-run rm x", "unbuffer rm x", "sudo -s rm x",
    "env -S'rm x'", "env -iS 'rm x'",
]  # fmt: skip


@pytest.mark.parametrize("command", _UNSEEN)
def test_a_wrapper_not_seen_through_is_opaque(command: str) -> None:
    """Wrappers that run their arguments in ways not read here are asked as a whole."""
    assert reasons(command)


@pytest.mark.parametrize("command", ["flock -n 9", "flock -w 5 lock"])
def test_a_flock_that_runs_nothing_is_analysable(command: str) -> None:
    assert [] == reasons(command)


@pytest.mark.parametrize(
    ("command", "opaque"),
    [
        ("git clone -u 'rm x' url", True),
        ("git fetch --upload-pack='rm x' origin", True),
        ("git push --receive-pack='rm x' origin", True),
        ("git push -u origin main", False),
        ("git add -u", False),
    ],
)
def test_git_options_that_name_a_program_are_opaque(command: str, opaque: bool) -> None:
    """--upload-pack and clone's -u run a command; push's and add's -u do not."""
    assert opaque == bool(reasons(command))


def test_a_command_read_past_its_opacity_is_listed_once_as_opaque() -> None:
    """The opaque entry wins over the same words read again as a plain command."""
    assert [("rm x", True)] == [
        (item.text, item.opaque is not None) for item in analyse("PAGER=x rm x").commands
    ]

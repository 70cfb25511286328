"""Reading a shell command for its permission request: the tree-sitter-bash analysis."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pegboard.plugins_builtin._arity import approval_pattern, escape
from pegboard.plugins_builtin._commands import Command, analyse, visible


def texts(command: str) -> list[str]:
    """The resources a command line asks for, in order."""
    analysis = analyse(command)
    assert analysis.unreadable is None, analysis.unreadable
    return [item.text for item in analysis.commands]


def opaque(command: str) -> dict[str, str | None]:
    return {item.text: item.opaque for item in analyse(command).commands}


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls -la", ["ls -la"]),
        ("ls && rm -rf build", ["ls", "rm -rf build"]),
        ("git log | head -5; echo done &", ["git log", "head -5", "echo done"]),
        ("echo 'a; rm x' | wc", ["echo 'a; rm x'", "wc"]),
        ("ls\nrm x", ["ls", "rm x"]),
        ("echo a#b; rm x", ["echo a#b", "rm x"]),
        ("(rm x)", ["rm x"]),
        ("{ rm x; }", ["rm x"]),
        ("if true; then rm x; elif false; then rm y; else rm z; fi",
         ["true", "rm x", "false", "rm y", "rm z"]),
        ("for i in 1; do rm x; done", ["rm x"]),
        ("for ((i=0;i<1;i++)); do rm x; done", ["rm x"]),
        ("while true; do rm x; done", ["true", "rm x"]),
        ("until false; do rm x; done", ["false", "rm x"]),
        ("case a in a) rm x;; esac", ["rm x"]),
        ("f() { rm x; }", ["rm x"]),
        ("function f { rm x; }", ["rm x"]),
        ("! rm x", ["rm x"]),
        ("ls |& rm x", ["ls", "rm x"]),
        ("select v in a; do rm x; done", ["rm x"]),
    ],
)  # fmt: skip
def test_every_simple_command_in_every_construct(command: str, expected: list[str]) -> None:
    """Lists, pipelines, subshells, groups, bodies of if/for/while/case and functions."""
    assert expected == texts(command)


@pytest.mark.parametrize(
    "command",
    [
        "echo $(rm x)",
        'echo "$(rm x)"',
        "echo `rm x`",
        'echo "`rm x`"',
        "cat <(rm x)",
        "ls > >(rm x)",
        "a=$(rm x)",
        "export a=$(rm x)",
        "[[ $(rm x) ]]",
        "(( $(rm x) ))",
        "echo ${v:-$(rm x)}",
        "echo $((1 + $(rm x)))",
        "cat <<EOF\n$(rm x)\nEOF",
        "cat <<< $(rm x)",
        "case $(rm x) in a) ;; esac",
        "for i in $(rm x); do :; done",
        'echo "a$(rm x)b"',
    ],
)
def test_substitutions_anywhere_are_commands_of_their_own(command: str) -> None:
    """Command and process substitution, also inside double quotes, heredocs and expansions."""
    assert "rm x" in texts(command)


def test_a_command_holding_a_substitution_is_marked_as_embedding() -> None:
    embeds = {item.text: item.embeds for item in analyse('echo "$(rm x)" | wc').commands}
    assert {"rm x": False, "echo '$(rm x)'": True, "wc": False} == embeds


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("FOO=1 BAR=2 rm x", "rm x"),
        ("/bin/rm x", "rm x"),
        ("./bin/../rm x", "./bin/../rm x"),
        ("\\rm x", "rm x"),
        ("'rm' x", "rm x"),
        ('"r"m x', "rm x"),
        ("r''m x", "rm x"),
        ("$'\\x72m' x", "rm x"),
        ("$'\\162m' x", "rm x"),
        ("rm 'a b'", "rm 'a b'"),
        ('rm "a\\"b"', "rm 'a\"b'"),
    ],
)
def test_commands_are_normalized(command: str, expected: str) -> None:
    """Assignments dropped, quotes and backslashes resolved, the name as it resolves."""
    assert [expected] == texts(command)


@pytest.mark.parametrize(
    "command",
    [
        "env rm x",
        "env -i FOO=1 -u BAR rm x",
        "command rm x",
        "command -p rm x",
        "builtin rm x",
        "exec rm x",
        "exec -a name rm x",
        "nohup rm x",
        "nice rm x",
        "nice -n 5 rm x",
        "timeout 5 rm x",
        "timeout -s KILL -k 1 5 rm x",
        "time rm x",
        "time -p rm x",
        "stdbuf -o0 rm x",
        "setsid rm x",
        "busybox rm x",
        "coproc rm x",
        "sh -c 'rm x'",
        'bash -c "rm x"',
        "bash -ec 'rm x'",
        "bash -c 'sh -c \"rm x\"'",
        "nice env timeout 3 nohup rm x",
        "trap 'rm x' EXIT",
    ],
)
def test_wrappers_are_seen_through(command: str) -> None:
    """What a wrapper runs is judged as itself: the wrapper is no resource of its own."""
    assert ["rm x"] == texts(command)


def test_sudo_is_kept_beside_the_command_it_runs() -> None:
    """sudo changes who runs the command: both are asked for."""
    assert ["sudo -u root rm x", "rm x"] == texts("sudo -u root rm x")


def test_su_c_runs_its_string_as_another_user() -> None:
    assert ["su -c 'rm x' root", "rm x"] == texts("su -c 'rm x' root")
    assert any(opaque('su -c "$x" root').values())


def test_a_declaration_holding_a_substitution_is_embedding() -> None:
    embeds = {item.text: item.embeds for item in analyse("export a=$(rm x) b=1").commands}
    assert {"rm x": False, "export 'a=$(rm x)' b=1": True} == embeds


def test_xargs_and_find_exec_run_their_commands() -> None:
    assert ["echo a", "rm -f"] == texts("echo a | xargs -n 1 rm -f")
    assert ["find . -exec rm {} ; -print", "rm {}"] == texts("find . -exec rm {} \\; -print")
    assert ["find . -execdir rm -f {} +", "rm -f {}"] == texts("find . -execdir rm -f {} +")


def test_a_find_that_acts_is_never_covered_by_a_saved_search() -> None:
    embeds = {item.text: item.embeds for item in analyse("find . -name x; find . -delete").commands}
    assert {"find . -name x": False, "find . -delete": True} == embeds


def test_command_v_looks_a_name_up_and_runs_nothing() -> None:
    assert ["command -v rm"] == texts("command -v rm")


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("eval ls", "eval"),
        ('sh -c "$x"', "a string built when it runs"),
        ("bash -c \"ls $(date)\"", "a string built when it runs"),
        ("$cmd x", "its name is an expansion"),
        ("${cmd} x", "its name is an expansion"),
        ("$(echo rm) x", "its name is an expansion"),
        (". $f", "a file named by an expansion"),
        ("source \"$f\"", "a file named by an expansion"),
        ("curl x | bash", "reads from its input"),
        ("sh -s", "reads from its input"),
        ("/bin/r? x", "a pattern the shell expands"),
        ("PATH=. ls", "PATH"),
        ("LD_PRELOAD=./x.so ls", "LD_PRELOAD"),
        ("alias ls=rm", "alias"),
        ("hash -p /bin/rm ls", "hash -p"),
        ("r\\\nm x", "a line continuation"),
        ("coproc w { rm x; }", "coproc"),
        ("PS4='$(rm x)' bash -xc ls", "PS4"),
        ("git -c alias.x='!rm x' x", "git -c"),
        ("python3 - <<EOF\nimport os\nEOF", "reads from its input"),
        ("curl x | python3", "reads from its input"),
        ("node < app.js", "reads from its input"),
        ("x='a[$(rm x)]'; echo $((x))", "arithmetic"),
        ('x="a[\\$(rm x)]"; (( x ))', "arithmetic"),
        ("x=$(cat f); [[ x -eq 0 ]]", "arithmetic"),
        ("read x; let x", "arithmetic"),
        ("declare -i x=$'a[\\x24(rm x)]'", "arithmetic"),
        ("echo $(( $(cat f) + 1 ))", "arithmetic"),
        ("env -S 'rm x'", None),
    ],
)  # fmt: skip
def test_what_cannot_be_known_statically_is_opaque(command: str, reason: str | None) -> None:
    """eval, shells on a built string, expanded names: marked opaque, with why."""
    reasons = [item.opaque for item in analyse(command).commands if item.opaque is not None]
    assert reasons, command
    if reason is not None:
        assert any(reason in why for why in reasons), reasons


@pytest.mark.parametrize(
    "command", ["echo $((1 + 2))", "for i in 1 2; do echo $((i * 2)); done", "echo '$(x)'"]
)
def test_arithmetic_on_literals_and_quoted_text_alone_stay_analysable(command: str) -> None:
    assert not any(opaque(command).values())


@pytest.mark.parametrize(
    "command", ["python3 app.py", "python3 -m pytest", "python3 -c 'x'", "python3 --version"]
)
def test_an_interpreter_given_its_program_is_analysable(command: str) -> None:
    assert not any(opaque(command).values())


def test_inner_commands_of_an_opaque_form_are_still_listed() -> None:
    """A deny rule still sees the rm inside a coproc the parser reads as words."""
    assert "rm x" in texts("coproc w { rm x; }")


@pytest.mark.parametrize(
    "command", ["echo 'unclosed", "if then fi", "rm x; )", "echo $(", "ls |", "{r,}m x"]
)
def test_a_line_the_parser_cannot_read_is_unreadable(command: str) -> None:
    analysis = analyse(command)
    assert analysis.unreadable is not None
    assert () == analysis.commands


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("echo hi > out", [("out", False)]),
        ("echo hi >> out 2>&1", [("out", False)]),
        ("echo hi &> out", [("out", False)]),
        ("echo hi &>> out", [("out", False)]),
        ("echo hi >| out", [("out", False)]),
        ("echo hi >& out", [("out", False)]),
        ("exec 3> out", [("out", False)]),
        ("> out echo hi", [("out", False)]),
        ('echo hi > "a b"', [("a b", False)]),
        ("echo hi | tee -a one two", [("one", False), ("two", False)]),
        ("{ echo; } > out", [("out", False)]),
        ("echo > $f", [("$f", True)]),
        ('echo > "$(date)"', [("$(date)", True)]),
        ("sh -c 'echo > inner'", [("inner", False)]),
        ("echo hi > /dev/null 2>/dev/stderr; cat < in", []),
        ("echo hi 2>&1 >&2", []),
    ],
)
def test_output_redirections_and_tee_are_writes(
    command: str, writes: list[tuple[str, bool]]
) -> None:
    assert writes == [(write.path, write.dynamic) for write in analyse(command).writes]


def test_control_characters_are_made_visible() -> None:
    """A carriage return and an escape sequence cannot hide what runs."""
    hidden = "rm -rf ~ #\r\x1b[2Kls -la"
    assert "rm -rf ~ #\\r\\x1b[2Kls -la" == visible(hidden)
    assert "a\nb\\u202ec\\x00" == visible("a\nb\u202ec\x00")
    assert "a\\nb" == visible("a\nb", newlines=False)
    assert ["echo 'a\\rb\\x1b'"] == texts("echo $'a\\rb\\x1b'")


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("git status --short", "git status *"),
        ("git log -5", "git log *"),
        ("npm run test -- --watch", "npm run test *"),
        ("npm install left-pad", "npm install *"),
        ("docker compose up -d", "docker compose up *"),
        ("echo hello", "echo *"),
        ("ls -la src", "ls *"),
        ("make", "make"),
        ("make test", "make test"),
        ("python3 script.py --fast", "python3 script.py --fast"),
        ("python3 -m pytest -x", "python3 -m pytest -x"),
        ("python3 -c 'print(1)'", "python3 -c print(1)"),
        ("python3 -c 'print(2*3)'", "python3 -c print(2\\*3)"),
        ("node -e 'x'", "node -e x"),
        ("awk '{print $1}' f", "awk '{print $1}' f"),
        ("git -C elsewhere push", "git -C elsewhere push"),
        ("sudo rm x", "sudo rm x"),
    ],
)
def test_always_patterns_follow_the_command_arity(command: str, pattern: str) -> None:
    """A prefix by arity; code given inline, options in the prefix, privilege: exact."""
    assert pattern == approval_pattern(analyse(command).commands[0])


def test_nothing_is_saved_for_an_opaque_command() -> None:
    assert approval_pattern(Command(("eval", "ls"), opaque="eval")) is None


def test_escape_makes_a_pattern_match_exactly() -> None:
    from pegboard import PermissionRule

    rule = PermissionRule("bash", escape("python3 -c print(2*3)?"), "allow")
    assert rule.matches("bash", "python3 -c print(2*3)?")
    assert not rule.matches("bash", "python3 -c print(2+3)!")


_WRAPS = [
    "ls; {}", "{} && ls", "ls | {}", "({})", "{{ {}; }}", "if true; then {}; fi",
    "while true; do {}; break; done", "for i in 1; do {}; done", "case a in a) {};; esac",
    "f() {{ {}; }}", 'echo "$({})"', "echo $({})", "echo `{}`", "cat <({})", "! {}",
    "time {}", "env FOO=1 {}", "nohup {}", "timeout 5 {}", "sh -c '{}'", "bash -c \"{}\"",
    "x=$({})", "echo ${{v:-$({})}}", "[[ -n $({}) ]]", "{} &", "{} |& cat", "nice {}",
    "command {}", "exec {}", "xargs {}", "find . -exec {} \\;", "coproc {}", "sudo {}",
    "select v in a; do {}; break; done", "until false; do {}; done", "{} > out",
    "ls > >({})", "stdbuf -o0 {}", "setsid {}", "trap '{}' EXIT", "su -c '{}'",
    "function f {{ {}; }}", "cat <<EOF\n$({})\nEOF", "(( $({}) ))",
]  # fmt: skip


@given(
    st.recursive(
        st.sampled_from(["rm -rf target", "/bin/rm -rf target", "\\rm -rf target"]),
        lambda inner: (
            st.tuples(st.sampled_from(_WRAPS), inner)
            .filter(lambda t: not any(q in t[0] and q in t[1] for q in "'`"))  # these never nest
            .map(lambda t: t[0].format(t[1]))
        ),
        max_leaves=4,
    )
)
def test_rm_is_seen_however_it_is_wrapped(command: str) -> None:
    """Whatever constructs and wrappers surround it, `rm` is a resource of its own, or
    the line is asked as a whole: it never hides inside an allowed command."""
    analysis = analyse(command)
    if analysis.unreadable is not None:
        return
    resources = [item.text for item in analysis.commands]
    found = [text for text in resources if text.split(" ", 1)[0] == "rm"]
    assert found or any(item.opaque for item in analysis.commands), resources


def program(command: str, *, found: bool) -> list[str]:
    """The resources of ``command`` when every absolute name is (or is not) PATH's program."""
    return [item.text for item in analyse(command, resolves=lambda path: found).commands]


@pytest.mark.parametrize(
    ("command", "found", "expected"),
    [
        ("rm x", False, ["rm x"]),
        ("/bin/rm x", True, ["rm x"]),
        ("/usr/bin/git status", True, ["git status"]),
        ("/bin/rm x", False, ["/bin/rm x"]),
        ("evil/ls -la", True, ["evil/ls -la"]),
        ("./ls", True, ["./ls"]),
        ("../bin/ls", True, ["../bin/ls"]),
        ("evil/env rm x", True, ["evil/env rm x", "rm x"]),
        ("./bash -c 'rm x'", True, ["./bash -c 'rm x'", "rm x"]),
    ],
)
def test_a_command_is_matched_by_the_program_it_resolves_to(
    command: str, found: bool, expected: list[str]
) -> None:
    """A path is its base name only when it is the program PATH finds; else as written."""
    assert expected == program(command, found=found)


def test_a_program_in_the_location_never_matches_the_rule_for_its_name() -> None:
    from pegboard import PermissionRule

    rule = PermissionRule("bash", "ls *", "allow")
    assert [False, False] == [rule.matches("bash", text) for text in texts("evil/ls -la; ./ls -la")]


def test_the_path_s_own_program_resolves_to_its_name() -> None:
    import shutil

    from pegboard.plugins_builtin._commands import on_path

    sh = shutil.which("sh")
    assert sh is not None
    assert (True, False) == (on_path(sh), on_path("/nonexistent/sh"))


_CODE_RUNNERS = [
    "bash build.sh", "sh x.sh", "dash x.sh", "zsh x.sh", "python3 app.py", "python3.12 -m x",
    "pypy3 app.py", "perl x.pl", "node app.js", "ruby x.rb", "php x.php", "lua x.lua",
    "deno run x.ts", "bun run x", "ssh host ls", "scp a host:b", "rsync -a a b",
    "tar -xf a.tar", "zip -r a.zip d", "unzip a.zip", "make test", "make", "cmake -S .",
    "ninja all", "vim f", "vi f", "nvim f", "emacs f", "less f", "more f", "man ls",
    "find . -name x", "xargs", "env", "git -C elsewhere status",
    "git fetch --upload-pack=x origin", "git push --exec=x origin", "awk '{print}' f",
    "sed s/a/b/ f", "docker run alpine ls", "docker exec c ls", "podman run alpine ls",
    "npx cowsay", "npm exec cowsay", "pip install x", "pip3 install x", ".venv/bin/python app.py",
]  # fmt: skip


@pytest.mark.parametrize("command", _CODE_RUNNERS)
def test_always_saves_exactly_the_command_for_what_runs_code(command: str) -> None:
    """Shells, interpreters and programs running their arguments as code: no wider pattern."""
    item = Command(tuple(command.split()))
    assert escape(item.text) == approval_pattern(item)


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("sort -o out f", [("out", False)]),
        ("sort -oout f", [("out", False)]),
        ("sort --output out f", [("out", False)]),
        ("sort --output=out f", [("out", False)]),
        ("sort -k 2 -o $out f", [("$out", True)]),
        ("curl -sSLo out url", [("out", False)]),
        ("curl --output=out url", [("out", False)]),
        ("curl -H 'o: x' url", []),
        ("wget -O out url", [("out", False)]),
        ("gcc -o prog a.c", [("prog", False)]),
        ("cc -oprog -Wall a.c", [("prog", False)]),
        ("clang -fno-omit-frame-pointer a.c", []),
        ("tar -czf out.tgz d", [("out.tgz", False)]),
        ("tar czf out.tgz d", [("out.tgz", False)]),
        ("tar -C d -cf out.tar .", [("out.tar", False)]),
        ("tar --create --file=out.tar d", [("out.tar", False)]),
        ("tar -xf in.tar", []),
        ("git diff --output=p.diff", [("p.diff", False)]),
        ("cp a b", [("b", False)]),
        ("cp -r a b d", [("d/a", False), ("d/b", False)]),
        ("cp -t d a", [("d/a", False)]),
        ("cp --target-directory=d a", [("d/a", False)]),
        ("cp -T a b", [("b", False)]),
        ("cp /tmp/.env .", [("./.env", False)]),
        ("mv a b", [("a", False), ("b", False)]),
        ("ln -s a b", [("b", False)]),
        ("ln -s /etc/passwd", [("passwd", False)]),
        ("install -m 755 a b", [("b", False)]),
        ("rsync -a src/ dst/", [("dst/", False)]),
        ("rsync -a src/ host:dst", []),
        ("dd if=a of=b", [("b", False)]),
        ("truncate -s 0 f", [("f", False)]),
        ("touch -d now f g", [("f", False), ("g", False)]),
        ("rm -rf a b", [("a", False), ("b", False)]),
        ("rm .e*", [(".e*", True)]),
        ("unlink f", [("f", False)]),
        ("shred -n 3 f", [("f", False)]),
        ("chmod 644 f", [("f", False)]),
        ("chmod -x f", [("f", False)]),
        ("chmod --reference=r f", [("f", False)]),
        ("chown -R me d", [("d", False)]),
        ("sed -i s/a/b/ .env", [(".env", False)]),
        ("sed -ie s/a/b/ f", [("f", False)]),
        ("sed -i.bak -e s/a/b/ f g", [("f", False), ("g", False)]),
        ("sed --in-place s/a/b/ f", [("f", False)]),
        ("sed s/a/b/ f", []),
        ("sort f", []),
    ],
)
def test_output_options_and_changed_operands_are_writes(
    command: str, writes: list[tuple[str, bool]]
) -> None:
    """Files a program writes, moves, links, removes or changes are checked as edits."""
    assert writes == [(write.path, write.dynamic) for write in analyse(command).writes]

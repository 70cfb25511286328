"""Reading a shell command for a permission request: a bash syntax tree, not a hand split."""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = (
    "Analysis",
    "Command",
    "Write",
    "analyse",
    "is_privileged",
    "is_python",
    "shown",
    "visible",
)

# Past this many nested `sh -c '…'` strings a command is asked as a whole.
_MAX_DEPTH = 8
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "yash"})
# Variables that change which program a name runs, or run code of their own.
_LOADER_VARIABLES = frozenset(
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
# Reserved words the parser may take for a command name when it misreads a line
# (`! if …; fi`): bash would run the compound command, so the line is unreadable.
_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "case", "esac",
                       "while", "until", "for", "in", "select", "function", "{", "}", "!",
                       "[[", "]]"})  # fmt: skip
_ARITHMETIC = frozenset({"arithmetic_expansion", "c_style_for_statement", "test_command",
                         "subscript"})  # fmt: skip
# Commands that evaluate arithmetic, or bring data in from outside the line.
_ARITHMETIC_COMMANDS = frozenset({"let"})
_READERS = frozenset({"read", "mapfile", "readarray"})
_CODE_TEXT = re.compile(r"\$\(|`|\$\[")
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
# Unquoted characters that make bash expand a command name into something else.
_EXPANDING = re.compile(r"[*?\[{~]")


@attrs.frozen
class Command:
    """One simple command as it would run: wrappers seen through, quotes resolved."""

    #: The words, the name by its base name (``/bin/rm`` is ``rm``).
    words: tuple[str, ...]
    #: An argument runs another command (``$(…)``, ``<(…)``, backticks).
    embeds: bool = False
    #: Why the command cannot be known statically, or None when it can.
    opaque: str | None = None
    #: The words are source text shown as written (a whole line, an assignment).
    verbatim: bool = False

    @property
    def text(self) -> str:
        """The command as a permission resource: words joined by spaces, controls escaped."""
        if self.verbatim:
            return visible(" ".join(self.words), newlines=False)
        return visible(" ".join(shown(word) for word in self.words), newlines=False)


@attrs.frozen
class Write:
    """A file an output redirection or ``tee`` writes, as written in the command."""

    path: str
    #: The path is an expansion: where it points is known only when it runs.
    dynamic: bool = False


@attrs.frozen
class Analysis:
    """What a command line runs and writes."""

    commands: tuple[Command, ...]
    writes: tuple[Write, ...]
    #: Why the parser could not read the line, or None when it could.
    unreadable: str | None = None


def visible(text: str, *, newlines: bool = True) -> str:
    """``text`` with control and format characters shown as escapes (``\\r``, ``\\x1b``).

    A terminal then cannot be made to hide part of a command from the person
    approving it; ``newlines=False`` escapes line breaks too.
    """
    shown = []
    for char in text:
        if (char == "\n" and newlines) or char == "\t":
            shown.append(char)
        elif char in "\r\n":
            shown.append("\\r" if char == "\r" else "\\n")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp"):
            code = ord(char)
            shown.append(
                f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else
                f"\\U{code:08x}"
            )  # fmt: skip
        else:
            shown.append(char)
    return "".join(shown)


def shown(word: str) -> str:
    """``word`` as a resource shows it."""
    # Words holding blanks or quotes are quoted, so `a 'b c'` and `a b c` stay apart.
    if not word or any(char.isspace() or char in "'\"" for char in word):
        return shlex.quote(word)
    return word


@functools.cache
def _language() -> object:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


def _parser() -> Parser:
    import tree_sitter

    return tree_sitter.Parser(_language())  # type: ignore[arg-type]


def analyse(command: str) -> Analysis:
    """The simple commands ``command`` runs and the files it writes by redirection.

    Every simple command anywhere in the tree is listed, wrappers (``env``,
    ``sudo``, ``xargs``, ``sh -c '…'``, …) seen through. What cannot be known
    statically (``eval``, a name that is an expansion) is marked opaque; a line
    the parser cannot read is ``unreadable`` and lists nothing to match.
    """
    reader = _Reader(command.encode("utf-8", "surrogateescape"))
    try:
        reader.read_line(0)
    except _UnreadableError as error:
        return Analysis((), (), unreadable=str(error))
    if reader.arithmetic and reader.data:
        # Bash evaluates a subscript inside arithmetic, and runs any `$(…)` in it:
        # `x='a[$(rm -rf ~)]'; echo $((x))`. Data reaching arithmetic may be code.
        reader.commands.append(
            Command(
                (command,),
                opaque="arithmetic here may evaluate data (a substitution's "
                "output, a read, a quoted $(…)) as a command",
                verbatim=True,
            )
        )
    commands = tuple(dict.fromkeys(reader.commands))
    return Analysis(commands, tuple(dict.fromkeys(reader.writes)))


class _UnreadableError(Exception):
    pass


class _Word:
    """A word's resolved text and what it holds."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.dynamic = False  # holds an expansion: its value is known only at run time
        self.embeds = False  # holds a command or process substitution
        self.expanding = False  # holds unquoted glob, brace or tilde characters

    @property
    def text(self) -> str:
        return "".join(self.parts)


class _Reader:
    """Walks the syntax tree of one line (and of the shell strings inside it)."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.commands: list[Command] = []
        self.writes: list[Write] = []
        self.coproc = False  # a `coproc NAME { … }`, whose `}` the parser reads as a command
        self.arithmetic = False  # an arithmetic context: $((…)), ((…)), [[…]], a[i], let
        self.data = False  # data that may hold code: a substitution, a read, a quoted $(…)

    def read_line(self, depth: int) -> None:
        tree = _parser().parse(self.source)
        if tree.root_node.has_error:
            raise _UnreadableError(_error_at(tree.root_node, self.source))
        self._walk(tree.root_node, depth)

    def _text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")

    def _walk(self, node: Node, depth: int) -> None:
        kind = node.type
        if kind in _ARITHMETIC or (
            kind == "compound_statement" and self._text(node).startswith("((")
        ):
            self.arithmetic = True
        elif kind in ("command_substitution", "process_substitution"):
            self.data = True
        elif kind in ("word", "raw_string", "string_content", "ansi_c_string"):
            text = self._text(node)
            if kind == "ansi_c_string":
                text = _ansi_c(text[2:-1])
            if _CODE_TEXT.search(text):
                self.data = True  # a quoted `$(…)`: harmless unless arithmetic evaluates it
        if kind == "command":
            self._command(node, depth)
            return
        if kind == "file_redirect":
            self._redirect(node)
        elif kind in ("declaration_command", "unset_command"):
            self._declaration(node)
        elif kind == "variable_assignment":
            self._assignment(node)
        for child in node.named_children:
            self._walk(child, depth)

    def _assignment(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        if name is not None and self._text(name) in _LOADER_VARIABLES:
            self.commands.append(
                Command(
                    (self._text(node),),
                    opaque=f"it sets {self._text(name)}, which decides what runs",
                    verbatim=True,
                )
            )

    def _declaration(self, node: Node) -> None:
        words = tuple(self._text(child) for child in node.children)
        if any(word.startswith("-") and "i" in word for word in words[1:]):
            self.arithmetic = True  # `declare -i x=…` evaluates what it assigns
        self.commands.append(Command(words, embeds=_holds_substitution(node)))

    def _redirect(self, node: Node) -> None:
        operator = "".join(self._text(child) for child in node.children if not child.is_named)
        destination = node.child_by_field_name("destination")
        if ">" not in operator or destination is None:
            return  # input, or no file
        if destination.type in ("number", "process_substitution") or self._text(destination) == "-":
            return  # a descriptor copy (2>&1) or a command, walked on its own
        word = self._word(destination)
        self._write(word)

    def _write(self, word: _Word) -> None:
        if word.text in _HARMLESS_TARGETS or word.text.startswith("/dev/fd/"):
            return
        self.writes.append(Write(word.text, dynamic=word.dynamic or word.embeds))

    def _command(self, node: Node, depth: int) -> None:
        words: list[_Word] = []
        ends: list[int] = []
        split = False  # bash joins `r\<newline>m` into `rm`; the parser keeps two words
        loader: str | None = None
        for child in node.named_children:
            field = _field_of(node, child)
            if child.type == "variable_assignment":
                name = child.child_by_field_name("name")
                if name is not None and self._text(name) in _LOADER_VARIABLES:
                    loader = f"it sets {self._text(name)}, which decides what runs"
                self._walk(child, depth)  # a substitution in the value runs too
            elif child.type == "file_redirect" or child.type.endswith("_redirect"):
                self._walk(child, depth)
            elif field in ("name", "argument"):
                target = child.named_children[0] if child.type == "command_name" else child
                if field == "name" and target.type == "word":
                    self._keyword(self._text(target))
                gap = self.source[ends[-1] : child.start_byte] if ends else b""
                split = split or re.fullmatch(rb"(?:\\\n)+", gap) is not None
                ends.append(child.end_byte)
                words.append(self._word(target))
                self._walk(child, depth)
            else:  # whatever else the parser hung here (`nice (…)`) is read too
                self._walk(child, depth)
        if not words:
            return
        self._run(words, depth, opaque=loader, split=split)

    def _keyword(self, name: str) -> None:
        if name in _RESERVED and not (name == "}" and self.coproc):
            raise _UnreadableError(f"the parser took the keyword {name!r} for a command")

    def _run(
        self, words: list[_Word], depth: int, *, opaque: str | None = None, split: bool = False
    ) -> None:
        """Record the command ``words`` runs, seeing through wrappers."""
        name = words[0]
        texts = [word.text for word in words]
        embeds = any(word.embeds for word in words)
        if name.dynamic or name.embeds:
            self._add(texts, embeds, "its name is an expansion, known only when it runs")
            return
        if name.expanding:
            self._add(texts, embeds, "its name is a pattern the shell expands")
            return
        if opaque is None and split:
            opaque = "a line continuation joins two of its words"
        base = posixpath.basename(name.text) or name.text
        texts[0] = base
        if base in _ARITHMETIC_COMMANDS:
            self.arithmetic = True
        elif base in _READERS:
            self.data = True
        if base == "!" and len(words) > 1:  # `time ! cmd`: the parser leaves `!` a word
            self._run(words[1:], depth)
            return
        self._keyword(name.text)
        if opaque is not None:
            self._add(texts, embeds, opaque)
            return
        if base == "env" and any(t == "-S" or t.startswith("--split-string") for t in texts):
            self._add(texts, embeds, "env -S splits a string into a command when it runs")
            return
        inner = _unwrap(base, texts)
        if inner is not None:
            start, keep = inner
            if keep:
                self._add(texts, embeds, None)
            if start < len(words):
                self._run(words[start:], depth)
            return
        if base in ("eval",):
            self._add(texts, embeds, "eval runs a string built when it runs")
        elif base in ("source", "."):
            dynamic = len(words) < 2 or words[1].dynamic or words[1].embeds
            self._add(texts, embeds, "it runs a file named by an expansion" if dynamic else None)
        elif base == "git" and any(
            t in ("-c", "--config-env") or t.startswith(("--config-env=", "--exec-path"))
            for t in texts[1:]
        ):
            self._add(texts, embeds, "git -c can set a command git runs (an alias, a pager)")
        elif base in ("su", "runuser") and any(t in ("-c", "--command") for t in texts):
            index = next(i for i, t in enumerate(texts) if t in ("-c", "--command"))
            self._add(texts, embeds, None)  # another user: asked as well
            script = words[index + 1] if index + 1 < len(words) else None
            if script is None or script.dynamic or script.embeds:
                self._add(texts, embeds, "the command string is built when it runs")
            else:
                self._nested(script.text, depth)
        elif _reads_program(base, texts):
            self._add(texts, embeds, "it runs the program it reads from its input")
        elif base in _SHELLS or base == "trap":
            self._shell(base, words, texts, embeds, depth)
        elif base == "find":
            # Actions change what a find does: "always" on a search never covers them.
            acts = any(text in _FIND_ACTIONS or text.startswith("-fprint") for text in texts)
            self._add(texts, embeds or acts, None)
            for start, end in _find_commands(texts):
                self._run(words[start:end], depth)
        elif base == "coproc":
            # tree-sitter-bash reads `coproc NAME { …; }` as plain words: the
            # compound form is asked, and deny rules still see the commands in it.
            body = texts[2:] if texts[2:3] in (["{"], ["("]) else texts[1:]
            if body[:1] in (["{"], ["("]):
                self.coproc = True
                self._add(texts, embeds, "coproc runs a compound command")
                self._nested(" ".join(body[1:]), depth)
            elif len(words) > 1:
                self._run(words[1:], depth)
        elif base == "alias" and any("=" in text for text in texts[1:]):
            self._add(texts, embeds, "an alias changes what a later name runs")
        elif base == "hash" and "-p" in texts[1:]:
            self._add(texts, embeds, "hash -p changes what a name runs")
        elif base == "enable" and any(text.startswith("-") and "f" in text for text in texts[1:]):
            self._add(texts, embeds, "enable -f loads a builtin from a library")
        else:
            self._add(texts, embeds, None)
            if base == "tee":
                for word, text in zip(words[1:], texts[1:], strict=True):
                    if not text.startswith("-"):
                        self._write(word)

    def _shell(
        self, base: str, words: list[_Word], texts: list[str], embeds: bool, depth: int
    ) -> None:
        """``sh -c 'literal'`` and ``trap 'literal' SIG`` are read as the line they run."""
        if base == "trap":
            handler = next((i for i, t in enumerate(texts[1:], 1) if not t.startswith("-")), None)
            if handler is None or len(texts) < 3:
                self._add(texts, embeds, None)  # listing or resetting traps
                return
            script = words[handler]
        else:
            index = next(
                (
                    i
                    for i, text in enumerate(texts[1:], 1)
                    if text.startswith("-") and not text.startswith("--") and "c" in text
                ),
                None,
            )
            operands = [t for t in texts[1:] if not t.startswith("-")]
            if index is None:
                if not operands or texts[1:2] == ["-s"] or "-s" in texts:
                    self._add(texts, embeds, "the shell runs what it reads from its input")
                else:
                    self._add(texts, embeds, None)  # a script file: its contents are its own
                return
            if index + 1 < len(words) and texts[index + 1] == "--":
                index += 1
            if index + 1 >= len(words):
                self._add(texts, embeds, "the shell runs what it reads from its input")
                return
            script = words[index + 1]
        if script.dynamic or script.embeds:
            self._add(texts, embeds, "the shell runs a string built when it runs")
            return
        if depth >= _MAX_DEPTH:
            self._add(texts, embeds, "shell strings nested too deep to read")
            return
        self._nested(script.text, depth)

    def _nested(self, script: str, depth: int) -> None:
        reader = _Reader(script.encode("utf-8", "surrogateescape"))
        try:
            reader.read_line(depth + 1)
        except _UnreadableError as error:
            self._add(script.split() or [script], False, f"the shell string: {error}")
            return
        self.commands.extend(reader.commands)
        self.writes.extend(reader.writes)
        self.arithmetic = self.arithmetic or reader.arithmetic
        self.data = self.data or reader.data

    def _add(self, texts: list[str], embeds: bool, opaque: str | None) -> None:
        self.commands.append(Command(tuple(texts), embeds=embeds, opaque=opaque))

    def _word(self, node: Node) -> _Word:
        word = _Word()
        self._resolve(node, word, quoted=False)
        return word

    def _resolve(self, node: Node, word: _Word, *, quoted: bool) -> None:
        kind = node.type
        text = self._text(node)
        if kind in ("command_substitution", "process_substitution"):
            word.embeds = True
            word.parts.append(text)
        elif kind in ("simple_expansion", "expansion", "arithmetic_expansion"):
            word.dynamic = True
            word.embeds = word.embeds or _holds_substitution(node)
            word.parts.append(text)
        elif kind == "raw_string":
            word.parts.append(text[1:-1])
        elif kind == "ansi_c_string":
            word.parts.append(_ansi_c(text[2:-1]))
        elif kind in ("string", "translated_string"):
            inner = node.named_children
            if not inner:
                return
            start = node.named_children[0].start_byte
            # Text between the children (a bare "$" and the like) is kept as written.
            position = start
            for child in inner:
                if child.start_byte > position:
                    word.parts.append(self.source[position : child.start_byte].decode())
                self._resolve(child, word, quoted=True)
                position = child.end_byte
        elif kind == "string_content":
            word.parts.append(re.sub(r"\\([$`\"\\\n])", _unescape, text))
        elif kind == "concatenation":
            for child in node.children:
                self._resolve(child, word, quoted=quoted)
        elif kind in ("word", "number", "command_name", "special_variable_name"):
            if not quoted and _EXPANDING.search(re.sub(r"\\.", "", text)):
                word.expanding = True
            word.parts.append(re.sub(r"\\(.)", _unescape, text, flags=re.DOTALL))
        else:
            word.dynamic = True
            word.embeds = word.embeds or _holds_substitution(node)
            word.parts.append(text)


def _unescape(match: re.Match[str]) -> str:
    return "" if match.group(1) == "\n" else match.group(1)


def _holds_substitution(node: Node) -> bool:
    return any(
        child.type in ("command_substitution", "process_substitution") or _holds_substitution(child)
        for child in node.named_children
    )


def _field_of(parent: Node, child: Node) -> str | None:
    for index, candidate in enumerate(parent.children):
        if candidate.id == child.id:
            return parent.field_name_for_child(index)
    return None


def _error_at(root: Node, source: bytes) -> str:
    for node in _nodes(root):
        if node.is_error or node.is_missing:
            line, column = node.start_point
            what = "missing" if node.is_missing else "cannot read"
            return f"{what} at line {line + 1}, column {column + 1}"
    return "cannot read the command"


def _nodes(node: Node) -> Iterator[Node]:
    yield node
    for child in node.children:
        yield from _nodes(child)


_ANSI_C = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))",
    re.DOTALL,
)
_ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
                  "r": "\r", "t": "\t", "v": "\v"}  # fmt: skip


def _ansi_c(body: str) -> str:
    """Bash's ``$'…'`` escapes, decoded as bash decodes them."""

    def decode(match: re.Match[str]) -> str:
        hexa, short, long, octal, control, other = match.groups()
        if hexa or short or long:
            code = int(hexa or short or long, 16)
            return chr(code) if code < 0x110000 else ""
        if octal:
            return chr(int(octal, 8) & 0xFF)
        if control:
            return chr(ord(control.upper()) ^ 0x40)
        return _ANSI_C_SIMPLE.get(other, other)

    return _ANSI_C.sub(decode, body)


# Wrappers: how many words after the name are options (and their values), so
# the command they run starts after them. `keep` lists those kept as a resource too.
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
_OPERANDS = {"timeout": 1, "chroot": 1, "taskset": 1, "flock": 1}
# Kept as a resource as well as the command they run: they change who runs it.
_PRIVILEGED = frozenset({"sudo", "doas", "chroot"})


def is_python(name: str) -> bool:
    """Whether the command ``name`` is a Python interpreter."""
    return _PYTHON.fullmatch(name) is not None


def is_privileged(name: str) -> bool:
    """Whether the command ``name`` runs another as someone else (``sudo``)."""
    return name in _PRIVILEGED


def _unwrap(base: str, texts: list[str]) -> tuple[int, bool] | None:
    """Where the command a wrapper runs starts, and whether to keep the wrapper too."""
    if base not in _FLAG_VALUES and base not in _OPERANDS:
        return None
    if base == "command" and any(t.startswith("-") and ("v" in t or "V" in t) for t in texts[1:2]):
        return None  # `command -v NAME` looks a name up, runs nothing
    if base == "sudo" and any(t in ("-s", "-i", "-e", "--shell", "--login", "--edit")
                              for t in texts[1:]):  # fmt: skip
        return None
    values = _FLAG_VALUES.get(base, frozenset())
    index = 1
    while index < len(texts):
        text = texts[index]
        if text == "--":
            index += 1
            break
        if base in ("env", "sudo") and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", text):
            index += 1
            continue
        if not text.startswith("-") or text == "-":
            break
        index += 2 if text in values else 1
    index += _OPERANDS.get(base, 0)
    keep = is_privileged(base) or index >= len(texts)
    return index, keep


# Python, by the names it is installed under.
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?|pypy\d?")
_STDIN_INTERPRETERS = frozenset({"perl", "ruby", "php", "lua", "node", "nodejs", "bun", "deno",
                                 "Rscript", "osascript", "tclsh", "wish"})  # fmt: skip


def _reads_program(base: str, texts: list[str]) -> bool:
    """Whether an interpreter runs what it reads from its input (`python3 - <<EOF`)."""
    if base not in _STDIN_INTERPRETERS and not is_python(base):
        return False
    arguments = texts[1:]
    if any(text in ("--version", "-V", "--help", "-h", "-v") for text in arguments):
        return False
    return "-" in arguments or not any(not text.startswith("-") for text in arguments)


_FIND_ACTIONS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fls"})


def _find_commands(texts: list[str]) -> Iterator[tuple[int, int]]:
    """Where each ``-exec``/``-execdir``/``-ok`` command of a ``find`` starts and ends."""
    for index, text in enumerate(texts):
        if text in ("-exec", "-execdir", "-ok", "-okdir") and index + 1 < len(texts):
            end = next(
                (i for i in range(index + 1, len(texts)) if texts[i] in (";", "+")), len(texts)
            )
            if end > index + 1:
                yield index + 1, end

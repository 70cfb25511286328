"""Reading a shell command for a permission request: a bash syntax tree, not a hand split."""

from __future__ import annotations

import functools
import os
import posixpath
import re
import shutil
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import attrs

from ._escapes import ansi_c, shown, visible
from ._wrappers import (
    LOADER_VARIABLES,
    SHELLS,
    find_acts,
    find_commands,
    git_runs,
    is_stdin,
    program_index,
    runs_unseen,
    shell_program,
    unwrap,
    variable_reason,
    wrapped_assignments,
)
from ._writes import written

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = (
    "Analysis",
    "Command",
    "Write",
    "analyse",
    "on_path",
    "shown",
    "visible",
)

# Past this many nested `sh -c '…'` strings a command is asked as a whole.
_MAX_DEPTH = 8
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
# `${x@Q}` and these only quote or change case; `@P` (prompt expansion) runs the
# substitutions in the value, and a letter not listed here is not known to be safe.
_PLAIN_TRANSFORMS = frozenset("QEUuLaAKk")
# Unquoted characters that make bash expand a command name into something else.
_EXPANDING = re.compile(r"[*?\[{~]")


@attrs.frozen
class Command:
    """One simple command as it would run: wrappers seen through, quotes resolved."""

    #: The words, the name as it is matched: by its base name when it is the program
    #: PATH finds (``/bin/rm`` is ``rm``), else as written (``./ls``).
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
    """A file a redirection, an output option or an operand writes, as written in the command."""

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


@functools.cache
def _language() -> object:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


def _parser() -> Parser:
    import tree_sitter

    return tree_sitter.Parser(_language())  # type: ignore[arg-type]


def on_path(path: str) -> bool:
    """Whether the absolute name ``path`` is the program PATH finds for its base name."""
    found = shutil.which(posixpath.basename(path))
    try:
        return found is not None and os.path.samefile(found, path)
    except OSError:
        return False


def analyse(command: str, *, resolves: Callable[[str], bool] = on_path) -> Analysis:
    """The simple commands ``command`` runs and the files it writes.

    Every simple command anywhere in the tree is listed, wrappers (``env``,
    ``sudo``, ``xargs``, ``sh -c '…'``, …) seen through. What cannot be known
    statically (``eval``, a name that is an expansion) is marked opaque; a line
    the parser cannot read is ``unreadable`` and lists nothing to match. A name
    with a ``/`` is matched by its base name only when ``resolves`` says it is
    the program PATH finds (:func:`on_path`); else it is shown as written.
    """
    reader = _Reader(command.encode("utf-8", "surrogateescape"), resolves)
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
    # A command also read past its opacity (to list what it runs) is asked opaque once.
    hidden = {item.words for item in reader.commands if item.opaque is not None}
    commands = tuple(
        item
        for item in dict.fromkeys(reader.commands)
        if item.opaque is not None or item.words not in hidden
    )
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

    def __init__(self, source: bytes, resolves: Callable[[str], bool]) -> None:
        self.source = source
        self.resolves = resolves
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
                text = ansi_c(text[2:-1])
            if _CODE_TEXT.search(text):
                self.data = True  # a quoted `$(…)`: harmless unless arithmetic evaluates it
        if kind == "command":
            self._command(node, depth)
            return
        if kind == "file_redirect":
            self._redirect(node)
        elif kind == "expansion":
            self._expansion(node)
        elif kind == "unary_expression":
            self._test(node)
        elif kind in ("declaration_command", "unset_command"):
            self._declaration(node)
        elif kind == "variable_assignment":
            self._assignment(node)
        for child in node.named_children:
            self._walk(child, depth)

    def _assignment(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        if name is not None and self._text(name) in LOADER_VARIABLES:
            self._whole(node, f"it sets {self._text(name)}, which decides what runs")

    def _whole(self, node: Node, why: str) -> None:
        """Ask for the source text of ``node`` as an opaque command of its own."""
        self.commands.append(Command((self._text(node),), opaque=why, verbatim=True))

    def _expansion(self, node: Node) -> None:
        kinds = [child.type for child in node.children]
        if kinds[1:2] == ["!"] and len(kinds) > 3:
            # `${!x}` expands the variable x names, and `a[$(…)]` there runs the `$(…)`;
            # `${!prefix*}` and `${!a[@]}` only list names and keys.
            listing = kinds[3] in ("*", "@") and kinds[4:5] == ["}"]
            keys = self._text(node.children[2]).endswith(("[@]", "[*]"))
            if not (listing or keys):
                self._whole(node, "indirection (${!x}) expands a name held in data")
                return
        if "@" in kinds[1:]:
            letter = kinds[kinds.index("@", 1) + 1] if kinds[-1:] == ["}"] else ""
            if letter != "}" and letter not in _PLAIN_TRANSFORMS:
                self._whole(node, f"the @{letter} transformation may run the value as code")

    def _test(self, node: Node) -> None:
        operator = node.named_children[0] if node.named_children else None
        if operator is None or self._text(operator) != "-v" or len(node.named_children) < 2:
            return
        operand = self._word(node.named_children[1])
        if "[" in operand.text or operand.dynamic:
            self._whole(node, "-v evaluates the subscript of the name it tests")

    def _declaration(self, node: Node) -> None:
        words = tuple(self._text(child) for child in node.children)
        options = [word for word in words[1:] if word.startswith("-")]
        if any("i" in word for word in options):
            self.arithmetic = True  # `declare -i x=…` evaluates what it assigns
        if words[0] in ("declare", "typeset", "local") and any("n" in word for word in options):
            self.commands.append(
                Command(
                    words,
                    embeds=_holds_substitution(node),
                    opaque="a nameref (-n) names a variable whose subscript bash evaluates",
                )
            )
            return
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

    def _write(self, word: _Word, path: str | None = None, *, dynamic: bool = False) -> None:
        path = word.text if path is None else path
        if path in _HARMLESS_TARGETS or path.startswith("/dev/fd/"):
            return
        # A glob picks its files when it runs (`rm .e*`): where it writes is unknown.
        pattern = word.expanding and re.search(r"[*?\[{]", path) is not None
        dynamic = dynamic or word.dynamic or word.embeds or pattern
        self.writes.append(Write(path, dynamic=dynamic))

    def _command(self, node: Node, depth: int) -> None:
        words: list[_Word] = []
        ends: list[int] = []
        split = False  # bash joins `r\<newline>m` into `rm`; the parser keeps two words
        loader: str | None = None
        for child in node.named_children:
            field = _field_of(node, child)
            if child.type == "variable_assignment":
                name = child.child_by_field_name("name")
                if name is not None and loader is None:
                    loader = variable_reason(self._text(name))
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
        # What the name says it is decides how it is read; it is matched as the
        # program it resolves to, so `evil/ls` is never taken for `ls`.
        base = posixpath.basename(name.text) or name.text
        if "/" not in name.text or (name.text.startswith("/") and self.resolves(name.text)):
            texts[0] = base
        if base in _ARITHMETIC_COMMANDS:
            self.arithmetic = True
        elif base in _READERS:
            self.data = True
        if base == "!" and len(words) > 1:  # `time ! cmd`: the parser leaves `!` a word
            self._run(words[1:], depth)
            return
        self._keyword(name.text)
        for path, where in written(base, texts):
            self._write(words[where[0]], path, dynamic=any(words[i].dynamic for i in where))
        if texts[0] != base:
            self._add(texts, embeds, None)  # a program of its own, asked as written
        opaque = opaque or runs_unseen(base, texts)
        if opaque is not None:
            # Asked as a whole; what it runs is still read, for deny rules to see.
            self._add(texts, embeds, opaque)
        inner = unwrap(base, texts)
        if inner is not None:
            start, keep = inner
            if keep:
                self._add(texts, embeds, None)
            if start < len(words):
                reasons = map(variable_reason, wrapped_assignments(base, texts, start))
                self._run(words[start:], depth, opaque=next(filter(None, reasons), None))
            return
        if opaque is not None:
            return
        if base in ("source", "."):
            self._add(texts, embeds, _program_reason(words, 1))
        elif base == "git" and git_runs(texts):
            self._add(texts, embeds, "git -c and --upload-pack name a command git runs")
        elif base in ("su", "runuser") and any(t in ("-c", "--command") for t in texts):
            index = next(i for i, t in enumerate(texts) if t in ("-c", "--command"))
            self._add(texts, embeds, None)  # another user: asked as well
            script = words[index + 1] if index + 1 < len(words) else None
            if script is None or script.dynamic or script.embeds:
                self._add(texts, embeds, "the command string is built when it runs")
            else:
                self._nested(script.text, depth)
        elif (program := program_index(base, texts)) is not None:
            self._add(texts, embeds, _program_reason(words, program))
        elif base in SHELLS:
            self._shell(words, texts, embeds, depth)
        elif base == "trap":
            self._trap(words, texts, embeds, depth)
        elif base == "find":
            # Actions change what a find does: "always" on a search never covers them.
            self._add(texts, embeds or find_acts(texts), None)
            for start, end in find_commands(texts):
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

    def _shell(self, words: list[_Word], texts: list[str], embeds: bool, depth: int) -> None:
        """``sh -c 'literal'`` is read as the line it runs."""
        how, index = shell_program(texts)
        if how == "input":
            self._add(texts, embeds, "the shell runs what it reads from its input")
        elif how == "file":
            self._add(texts, embeds, _program_reason(words, index))
        else:
            self._script(words[index], texts, embeds, depth)

    def _trap(self, words: list[_Word], texts: list[str], embeds: bool, depth: int) -> None:
        """``trap 'literal' SIG`` is read as the line it runs."""
        handler = next((i for i, t in enumerate(texts[1:], 1) if not t.startswith("-")), None)
        if handler is None or len(texts) < 3:
            self._add(texts, embeds, None)  # listing or resetting traps
        else:
            self._script(words[handler], texts, embeds, depth)

    def _script(self, script: _Word, texts: list[str], embeds: bool, depth: int) -> None:
        if script.dynamic or script.embeds:
            self._add(texts, embeds, "the shell runs a string built when it runs")
        elif depth >= _MAX_DEPTH:
            self._add(texts, embeds, "shell strings nested too deep to read")
        else:
            self._nested(script.text, depth)

    def _nested(self, script: str, depth: int) -> None:
        reader = _Reader(script.encode("utf-8", "surrogateescape"), self.resolves)
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
            word.parts.append(ansi_c(text[2:-1]))
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


def _program_reason(words: list[_Word], index: int) -> str | None:
    """Why running the program file ``words[index]`` names is opaque, or None."""
    if index >= len(words) or words[index].text == "-" or is_stdin(words[index].text):
        return "it runs the program it reads from its input"
    if words[index].embeds:
        return "it runs a program another command writes (a substitution)"
    if words[index].dynamic:
        return "it runs a file named by an expansion"
    return None


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

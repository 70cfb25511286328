"""The files a program writes by its options and operands (``sort -o``, ``cp``'s target)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

import attrs

__all__ = ("written",)


@attrs.frozen(kw_only=True)
class _Options:
    """How a program's arguments name the files it writes."""

    #: Options whose value is a file the program writes (``-o``, ``--output``).
    outputs: frozenset[str] = frozenset()
    #: Other options that take the next word as their value.
    values: frozenset[str] = frozenset()
    #: Options whose value, if any, is attached (sed's `-i.bak`): the rest of the word.
    attached: frozenset[str] = frozenset()
    #: Which operands it writes: "all", "target" (the last, or -t DIR), "files" (after
    #: a mode or owner), or "" for none.
    operands: str = ""
    #: Single-letter options may be grouped (``-sSLo out``); gcc's may not.
    clusters: bool = True


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TARGET_VALUES = _set("-S --suffix -t --target-directory")
_OWNER_VALUES = _set("--from --reference")
_PROGRAMS = {
    "sort": _Options(outputs=_set("-o --output"),
                     values=_set("-k --key -t --field-separator -S --buffer-size -T "
                                 "--temporary-directory --parallel --batch-size")),
    "curl": _Options(outputs=_set("-o --output -D --dump-header -c --cookie-jar"),
                     values=_set("-H --header -d --data --data-raw --data-binary -X --request "
                                 "-u --user -A --user-agent -e --referer -b --cookie -F --form "
                                 "-x --proxy -m --max-time -w --write-out -T --upload-file "
                                 "-r --range -E --cert -K --config --connect-timeout --retry")),
    "wget": _Options(outputs=_set("-O --output-document -o --output-file -a --append-output"),
                     values=_set("-P --directory-prefix -U --user-agent -t --tries -T --timeout "
                                 "-e --execute --header")),
    "git": _Options(outputs=_set("--output"), values=_set("-C -c")),
    "tee": _Options(operands="all"),
    "truncate": _Options(values=_set("-s --size -r --reference"), operands="all"),
    "touch": _Options(values=_set("-d --date -t -r --reference"), operands="all"),
    "rm": _Options(operands="all"),
    "rmdir": _Options(operands="all"),
    "unlink": _Options(operands="all"),
    "shred": _Options(values=_set("-n --iterations -s --size"), operands="all"),
    "cp": _Options(values=_TARGET_VALUES, operands="target"),
    "mv": _Options(values=_TARGET_VALUES, operands="target"),
    "ln": _Options(values=_TARGET_VALUES, operands="target"),
    "install": _Options(values=_TARGET_VALUES | _set("-m --mode -o --owner -g --group"),
                        operands="target"),
    "rsync": _Options(outputs=_set("--log-file --write-batch"),
                      values=_set("-e --rsh -f --filter --exclude --include -T --temp-dir "
                                  "--exclude-from --include-from --files-from -B --block-size"),
                      operands="target"),
    "chmod": _Options(values=_OWNER_VALUES, operands="files"),
    "chown": _Options(values=_OWNER_VALUES, operands="files"),
    "chgrp": _Options(values=_OWNER_VALUES, operands="files"),
    "sed": _Options(values=_set("-e --expression -f --file -l --line-length"),
                    attached=_set("-i")),
}  # fmt: skip
_COMPILER = _Options(outputs=_set("-o -MF"), values=_set("-I -L -D -U -x -include -MT -MQ"),
                     clusters=False)  # fmt: skip
for _name in ("gcc", "cc", "c++", "g++", "clang", "clang++"):
    _PROGRAMS[_name] = _COMPILER
_TAR_VALUES = frozenset("fCTXbHKNgILV")
# A chmod mode may look like an option (`chmod -x file`); these letters are chmod's own.
_CHMOD_FLAGS = re.compile(r"-[cfvRHLP]+")


def written(base: str, texts: list[str]) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Each file the command ``texts`` writes, with the words its path comes from."""
    if base == "tar":
        yield from _tar(texts)
        return
    if base == "dd":
        for index, text in enumerate(texts[1:], 1):
            if text.startswith("of="):
                yield text[3:], (index,)
        return
    options = _PROGRAMS.get(base)
    if options is None:
        return
    parsed = _parse(base, options, texts)
    for option, value, where in parsed.values:
        if option in options.outputs:
            yield value, where
    operands = parsed.operands
    if base == "sed":
        # Without -e or -f the first operand is the script.
        script = not parsed.given & {"-e", "--expression", "-f", "--file"}
        if parsed.given & {"-i", "--in-place"}:
            yield from ((texts[i], (i,)) for i in operands[1 if script else 0 :])
    elif options.operands == "all":
        yield from ((texts[i], (i,)) for i in operands)
    elif options.operands == "files":  # after the mode or owner
        yield from ((texts[i], (i,)) for i in operands[0 if "--reference" in parsed.given else 1 :])
    elif options.operands == "target":
        yield from _targets(base, texts, parsed)


@attrs.define
class _Parsed:
    #: Every option given, by name (``-v``, ``--output``).
    given: set[str] = attrs.Factory(set)
    #: Each option with a value: its name, the value and the word the value is in.
    values: list[tuple[str, str, tuple[int, ...]]] = attrs.Factory(list)
    #: Where the operands are.
    operands: list[int] = attrs.Factory(list)


def _parse(base: str, options: _Options, texts: list[str]) -> _Parsed:
    parsed = _Parsed()
    takes = options.outputs | options.values
    index = 1
    while index < len(texts):
        text = texts[index]
        following = (index + 1,) if index + 1 < len(texts) else ()
        value = texts[index + 1] if following else ""
        index += 1
        if text == "--":
            parsed.operands.extend(range(index, len(texts)))
            break
        if (
            not text.startswith("-")
            or text == "-"
            or (base == "chmod" and not parsed.operands and not _CHMOD_FLAGS.fullmatch(text))
        ):  # a chmod mode such as `-x` is its first operand
            parsed.operands.append(index - 1)
        elif text.startswith("--") or not options.clusters:
            name, equals, attached = (
                text.partition("=") if text.startswith("--") else (text, "", "")
            )
            if not options.clusters and name not in takes and name[:2] in takes:
                name, equals, attached = name[:2], "=", name[2:]  # gcc's `-oout`
            parsed.given.add(name)
            if name in takes:
                if equals:
                    parsed.values.append((name, attached, (index - 1,)))
                elif following:
                    parsed.values.append((name, value, following))
                    index += 1
        else:
            for position, letter in enumerate(text[1:], 2):
                name = f"-{letter}"
                parsed.given.add(name)
                if name in options.attached:
                    break
                if name in takes:
                    rest = text[position:]
                    if rest:
                        parsed.values.append((name, rest, (index - 1,)))
                    elif following:
                        parsed.values.append((name, value, following))
                        index += 1
                    break
    return parsed


def _targets(base: str, texts: list[str], parsed: _Parsed) -> Iterator[tuple[str, tuple[int, ...]]]:
    """cp, mv, ln, install, rsync: the target, and the files it gets in a target folder."""
    operands = parsed.operands
    if base == "install" and "-d" in parsed.given:  # creates each folder named
        yield from ((texts[i], (i,)) for i in operands)
        return
    directory = next(
        ((value, where) for name, value, where in parsed.values
         if name in ("-t", "--target-directory")), None,
    )  # fmt: skip
    if base == "mv":  # what moves away is changed too
        yield from ((texts[i], (i,)) for i in (operands if directory else operands[:-1]))
    if directory is not None:
        (path, where), sources = directory, operands
    elif base == "ln" and len(operands) == 1:  # `ln -s x` links x into the working folder
        yield posixpath.basename(texts[operands[0]].rstrip("/")), (operands[0],)
        return
    elif len(operands) >= 2:
        path, where, sources = texts[operands[-1]], (operands[-1],), operands[:-1]
    else:
        return
    if base == "rsync" and re.match(r"[^/]*:", path):
        return  # a remote target: not a file here
    folder = directory is not None or len(sources) > 1 or path.endswith("/")
    folder = folder or posixpath.basename(path) in (".", "..")
    # rsync writes whatever the source holds under its target: the target is the write.
    if not folder or "-T" in parsed.given or base == "rsync":
        yield path, where
        return
    for source in sources:
        name = posixpath.basename(texts[source].rstrip("/"))
        yield posixpath.join(path, name), (*where, source)


def _tar(texts: list[str]) -> Iterator[tuple[str, tuple[int, ...]]]:
    """The archive ``tar`` creates (``-cf out.tar``, ``czf out.tgz``, ``--file=out.tar``)."""
    creates = False
    archive: tuple[str, tuple[int, ...]] | None = None
    index = 1
    pending = 0  # old-style `tar cvf out.tar …`: values follow the letters in order
    for position, text in enumerate(texts[1:], 1):
        if position < index:
            continue
        if text.startswith("--"):
            name, equals, value = text.partition("=")
            creates = creates or name in ("--create", "--append", "--update", "--concatenate")
            if name == "--file":
                archive = (value, (position,)) if equals else _next(texts, position)
            index = position + (1 if equals or name != "--file" else 2)
            continue
        old = position == 1 and not text.startswith("-")
        if not (text.startswith("-") or old):
            continue
        letters = text.lstrip("-")
        pending = position + 1
        for offset, letter in enumerate(letters):
            creates = creates or letter in "cruA"
            if letter not in _TAR_VALUES:
                continue
            rest = letters[offset + 1 :]
            if rest and not old:
                if letter == "f":
                    archive = (rest, (position,))
                break
            if letter == "f":
                archive = _next(texts, pending - 1)
            pending += 1
        index = max(pending, position + 1)
    if creates and archive is not None and archive[0] != "-":
        yield archive


def _next(texts: list[str], index: int) -> tuple[str, tuple[int, ...]] | None:
    return (texts[index + 1], (index + 1,)) if index + 1 < len(texts) else None

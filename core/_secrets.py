"""The host's secrets: values tools may need, never published or kept."""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, AnyStr

import attrs

from ._content import ContentItem, EmbeddedResource, ResourceLink, Text
from ._outcome import Completed, Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._tool import Progress

__all__ = ("MIN_SECRET_LENGTH", "Secrets", "redacting_logs")

#: Shorter values are refused: redacting them would rewrite ordinary text.
MIN_SECRET_LENGTH = 8

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: How much of a file is redacted at a time.
_BLOCK = 1 << 20


def _forms(value: str) -> Iterable[tuple[str, ...]]:
    """The value and the encodings of it a tool is likely to print: each a form to look
    for, then the longer forms it begins (replaced first where it is found)."""
    raw = value.encode("utf-8", "surrogatepass")
    yield (value,)
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        padded = encoded.decode("ascii")
        # Looked for without its padding, which a tool may strip.
        yield (padded.rstrip("="), padded)
    yield (urllib.parse.quote(value, safe=""),)
    yield (urllib.parse.quote(value),)
    yield (urllib.parse.quote_plus(value),)


def _redacted(
    text: AnyStr, forms: tuple[tuple[AnyStr, tuple[AnyStr, ...], AnyStr], ...], empty: AnyStr
) -> AnyStr:
    """``text`` with each of ``forms`` (a form to look for, what to replace, the mark)
    replaced: in place where one is there (the usual case), by stretches where several are.
    """
    present = [entry for entry in forms if entry[0] in text]
    if len(present) == 1:
        _, replaced, mark = present[0]
        for each in replaced:
            text = text.replace(each, mark)
        return text
    return _spans_redacted(text, present, empty) if present else text


def _spans_redacted(
    text: AnyStr, present: list[tuple[AnyStr, tuple[AnyStr, ...], AnyStr]], empty: AnyStr
) -> AnyStr:
    """``text`` with every occurrence of each form in ``present`` replaced by its mark.

    Where two values overlap (one ends with what the other begins with), the
    whole overlapping stretch goes, with both marks: replacing one value first
    would leave the rest of the other readable. A value held inside a longer
    one goes with it, under the longer one's mark.
    """
    spans: list[tuple[int, int, AnyStr]] = []
    for _, replaced, mark in present:
        for each in replaced:
            start = text.find(each)
            while start >= 0:
                spans.append((start, start + len(each), mark))
                start = text.find(each, start + 1)
    spans.sort(key=lambda span: (span[0], -span[1]))
    merged: list[tuple[int, int, list[AnyStr]]] = []
    for start, end, mark in spans:
        if merged and start < merged[-1][1]:
            begun, ended, joined = merged[-1]
            if end > ended:  # reaches past it: its mark joins (one held inside adds none)
                if mark not in joined:
                    joined.append(mark)
                merged[-1] = (begun, end, joined)
        else:
            merged.append((start, end, [mark]))
    parts: list[AnyStr] = []
    at = 0
    for stretch in merged:
        parts.append(text[at : stretch[0]])
        parts.extend(stretch[2])
        at = stretch[1]
    parts.append(text[at:])
    return empty.join(parts)


class Secrets:
    """Name to value, from the host only; every value is redacted as ``[secret NAME]``.

    Redaction covers the value itself and its base64 (standard and URL-safe,
    with and without padding) and URL encodings (``quote`` and
    ``quote_plus``) as whole strings. A value a tool splits, reverses or
    encodes otherwise is not recognized. An empty `Secrets` changes nothing.
    """

    __slots__ = ("_byte_forms", "_forms", "_values", "longest")

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise TypeError(
                f"secrets= takes a mapping of names to values, got {type(values).__name__}"
            )
        checked: dict[str, str] = {}
        for name, value in values.items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ValueError(
                    f"secrets=: {name!r} is not a valid name; use letters, digits and '_', "
                    "as for an environment variable"
                )
            if not isinstance(value, str):
                raise TypeError(
                    f"secrets=: the value of {name} is a {type(value).__name__}, not a str"
                )
            if "\0" in value:
                raise ValueError(
                    f"secrets=: the value of {name} holds a NUL character, which no "
                    "environment variable can carry to a command; pass the secret without it"
                )
            if len(value) < MIN_SECRET_LENGTH:
                raise ValueError(
                    f"secrets=: the value of {name} has {len(value)} characters, fewer than "
                    f"{MIN_SECRET_LENGTH}: redacting it would rewrite ordinary text; "
                    "pass the real secret, or leave it out"
                )
            checked[name] = value
        self._values = checked
        found: dict[str, tuple[tuple[str, ...], str]] = {}
        # Longer values first: a secret that holds another is redacted whole.
        for name, value in sorted(checked.items(), key=lambda item: -len(item[1])):
            for form in _forms(value):
                found.setdefault(form[0], (tuple(reversed(form)), f"[secret {name}]"))
        #: Each form to look for, the strings to replace where it is found, the mark.
        self._forms = tuple((form, *found[form]) for form in sorted(found, key=len, reverse=True))
        self._byte_forms = tuple(
            (
                form.encode("utf-8", "surrogatepass"),
                tuple(each.encode("utf-8", "surrogatepass") for each in replaced),
                mark.encode(),
            )
            for form, replaced, mark in self._forms
        )
        #: The length in bytes of the longest form redacted.
        self.longest = max(
            (len(each) for _, replaced, _ in self._byte_forms for each in replaced), default=0
        )

    @classmethod
    def of(cls, values: Secrets | Mapping[str, str] | None) -> Secrets:
        """``values`` as `Secrets` (a `Secrets` comes back as it is)."""
        return values if isinstance(values, Secrets) else cls(values)

    def __bool__(self) -> bool:
        return bool(self._values)

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the secrets, sorted."""
        return tuple(sorted(self._values))

    def value(self, name: str) -> str:
        """The value of secret ``name`` (``KeyError`` if there is none)."""
        return self._values[name]

    def redact(self, text: str) -> str:
        """``text`` with every value, and its encodings, replaced by ``[secret NAME]``."""
        return _redacted(text, self._forms, "")

    def redact_bytes(self, data: bytes) -> bytes:
        """`redact` on bytes (UTF-8)."""
        return _redacted(data, self._byte_forms, b"")

    def redact_json(self, value: Any) -> Any:
        """Plain JSON with every string in it redacted, keys too, at any depth.

        A number whose digits hold a value (an account number, say) becomes the
        redacted text of it, a string.
        """
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {self.redact(str(key)): self.redact_json(item) for key, item in value.items()}
        if isinstance(value, list | tuple):  # FrozenList too
            return [self.redact_json(item) for item in value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                digits = repr(value)
            except ValueError:  # an integer past Python's limit on digits to convert
                return value
            if len(digits) >= MIN_SECRET_LENGTH:
                shown = self.redact(digits)
                if shown != digits:
                    return shown
        return value

    def leaks(self, value: Any) -> bool:
        """Whether ``value`` (plain JSON) holds a form of a value anywhere."""
        return bool(self.redact_json(value) != value)

    def redact_content(self, content: tuple[ContentItem, ...]) -> tuple[ContentItem, ...]:
        """Content with the text of text items, resources and resource links redacted."""
        return tuple(self._item(item) for item in content)

    def _item(self, item: ContentItem) -> ContentItem:
        if type(item) is Text:
            text = self.redact(item.text)
            return item if text is item.text else attrs.evolve(item, text=text)
        if isinstance(item, EmbeddedResource):
            changes: dict[str, Any] = {"uri": self.redact(item.uri)}
            if item.text is not None:
                changes["text"] = self.redact(item.text)
            if item.data is not None:
                changes["data"] = self.redact_bytes(item.data)
            return attrs.evolve(item, **changes)
        if isinstance(item, ResourceLink):
            return attrs.evolve(
                item,
                uri=self.redact(item.uri),
                name=self.redact(item.name),
                title=None if item.title is None else self.redact(item.title),
                description=None if item.description is None else self.redact(item.description),
            )
        return item

    def redact_outcome(self, outcome: Outcome) -> Outcome:
        """``outcome`` with every text, output, metadata and provider state string
        redacted, and its name (a model may call a tool by any name)."""
        name = None if outcome.name is None else self.redact(outcome.name)
        if isinstance(outcome, Completed):
            return attrs.evolve(
                outcome,
                name=name,
                output=self.redact_json(outcome.output),
                content=self.redact_content(outcome.content),
                metadata=self.redact_json(outcome.metadata),
                # Sent to the provider and kept in the durable form like the rest.
                provider_state=self.redact_json(outcome.provider_state),
            )
        error = outcome.error
        error = attrs.evolve(
            error, message=self.redact(error.message), metadata=self.redact_json(error.metadata)
        )
        return attrs.evolve(
            outcome, name=name, error=error, partial=self.redact_content(outcome.partial)
        )

    def redact_progress(self, update: Progress) -> Progress:
        """A progress report with its message and content redacted."""
        message = None if update.message is None else self.redact(update.message)
        return attrs.evolve(update, message=message, content=self.redact_content(update.content))

    def redact_file(self, path: Path) -> None:
        """Rewrite the file at ``path`` redacted, a block at a time (blocks on the disk).

        A value that straddles two blocks is found too: each block keeps back
        the bytes that could begin one (a replacement read again stays as it is).
        """
        if not self._values:
            return
        keep = self.longest - 1
        redacted = path.with_name(path.name + ".redacting")
        descriptor = os.open(redacted, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as target, path.open("rb") as source:
                carried = b""
                while block := source.read(_BLOCK):
                    data = self.redact_bytes(carried + block)
                    cut = max(len(data) - keep, 0)
                    target.write(data[:cut])
                    carried = data[cut:]
                target.write(self.redact_bytes(carried))
            os.replace(redacted, path)
        except BaseException:
            redacted.unlink(missing_ok=True)
            raise

    def __repr__(self) -> str:
        return f"<Secrets {', '.join(self.names) or '(none)'}>"


class _RedactingFilter(logging.Filter):
    """Redacts the secrets of every open Location from pegboard's log records."""

    def __init__(self) -> None:
        super().__init__()
        self.live: list[Secrets] = []

    def filter(self, record: logging.LogRecord) -> bool:
        live = tuple(self.live)
        if not live:
            return True
        message = shown = record.getMessage()
        if record.exc_info is not None and record.exc_info[0] is not None:
            # The traceback is part of the message a handler writes.
            shown = f"{shown}\n{logging.Formatter().formatException(record.exc_info)}"
            record.exc_info = None
        for secrets in live:
            shown = secrets.redact(shown)
        if shown != message:
            record.msg, record.args, record.exc_text = shown, None, None
        return True


_FILTER = _RedactingFilter()

#: Every logger pegboard writes to. A logger's filter sees only the records logged
#: on that logger itself, not those its children pass up, so each has the filter.
LOGGERS = ("pegboard", "pegboard.mcp")


@contextlib.contextmanager
def redacting_logs(secrets: Secrets) -> Iterator[None]:
    """While open, the records of pegboard's loggers never hold a value of ``secrets``."""
    if not secrets:
        yield
        return
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    _FILTER.live.append(secrets)
    try:
        yield
    finally:
        _FILTER.live.remove(secrets)

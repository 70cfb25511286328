"""CSV tables: parsing, describing columns, filtering and sorting rows (no I/O)."""

from __future__ import annotations

import csv
import io
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ._models import Column, ColumnType, Filter

__all__ = (
    "Table",
    "TableError",
    "describe_columns",
    "matches",
    "number",
    "parse_table",
    "sort_rows",
)

_DELIMITERS = ",;\t|"
_BOOLEANS = frozenset({"true", "false"})
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class TableError(ValueError):
    """The data is not a table this plugin can read; the message says why."""


@attrs.frozen
class Table:
    """A parsed table: unique column names and rows padded to the header's width."""

    delimiter: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    irregular_rows: int

    def index(self, column: str) -> int:
        """The position of ``column``; `TableError` naming the columns if it has none."""
        try:
            return self.columns.index(column)
        except ValueError:
            raise TableError(
                f"there is no column {column!r}; the columns are {', '.join(self.columns)}"
            ) from None


def parse_table(data: bytes, delimiter: str | None = None) -> Table:
    """Parse CSV (or TSV, or other delimited) bytes whose first row is the header."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise TableError(f"the file is not UTF-8 text (byte {error.start} is not)") from None
    if delimiter is None:
        delimiter = _guess_delimiter(text[:8192])
    elif len(delimiter) != 1:
        raise TableError(f"a delimiter is one character, not {delimiter!r}")
    try:
        records = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    except csv.Error as error:
        raise TableError(f"the file is not valid CSV: {error}") from None
    records = [record for record in records if record]  # blank lines carry no row
    if not records:
        raise TableError("the file is empty; a table needs at least a header row")
    header, body = records[0], records[1:]
    width = len(header)
    rows = tuple(tuple(record[:width]) + ("",) * (width - len(record)) for record in body)
    irregular = sum(len(record) != width for record in body)
    return Table(delimiter, _unique(header), rows, irregular)


def _guess_delimiter(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        return ","


def _unique(header: Sequence[str]) -> tuple[str, ...]:
    names: list[str] = []
    for position, raw in enumerate(header, 1):
        name = raw.strip() or f"column_{position}"
        candidate, suffix = name, 2
        while candidate in names:
            candidate, suffix = f"{name}_{suffix}", suffix + 1
        names.append(candidate)
    return tuple(names)


def number(value: object) -> float | None:
    """``value`` as a finite number, or ``None`` (booleans are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = float(value)
    except ValueError:
        return None
    return parsed if math.isfinite(parsed) else None


def describe_columns(table: Table) -> list[Column]:
    """Each column's inferred type, blanks, distinct values and numeric range."""
    described = []
    for position, name in enumerate(table.columns):
        values = [row[position] for row in table.rows]
        filled = [value for value in values if value.strip()]
        kind = _infer(filled)
        numbers = (
            [n for n in map(number, filled) if n is not None]
            if kind in ("integer", "number")
            else []
        )
        described.append(
            Column(
                name=name,
                type=kind,
                empty=len(values) - len(filled),
                distinct=len(set(filled)),
                example=filled[0] if filled else None,
                minimum=min(numbers) if numbers else None,
                maximum=max(numbers) if numbers else None,
            )
        )
    return described


def _infer(values: Iterable[str]) -> ColumnType:
    values = list(values)
    if not values:
        return "empty"
    if all(value.strip().lower() in _BOOLEANS for value in values):
        return "boolean"
    numbers = [number(value) for value in values]
    if any(n is None for n in numbers):
        return "text"
    if all(value.strip().lstrip("+-").isdigit() for value in values):
        return "integer"
    return "number"


def matches(cell: str, test: Filter) -> bool:
    """Whether one cell passes one filter."""
    wanted = _text(test.value)
    if test.op == "contains":
        return wanted.casefold() in cell.casefold()
    if test.op == "startswith":
        return cell.casefold().startswith(wanted.casefold())
    left, right = number(cell), number(test.value)
    if left is not None and right is not None:
        return bool(_OPERATORS[test.op](left, right))
    if not cell.strip() and test.op not in ("=", "!="):
        return False  # a blank cell is neither smaller nor larger than anything
    return bool(_OPERATORS[test.op](cell.casefold(), wanted.casefold()))


def _text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def sort_rows(
    rows: Sequence[tuple[str, ...]], position: int, *, descending: bool
) -> list[tuple[str, ...]]:
    """Rows sorted by one column: numerically when every filled cell is a number.

    Blank cells go last either way.
    """
    filled = [row for row in rows if row[position].strip()]
    blank = [row for row in rows if not row[position].strip()]
    if all(number(row[position]) is not None for row in filled):
        filled.sort(key=lambda row: number(row[position]) or 0.0, reverse=descending)
    else:
        filled.sort(key=lambda row: row[position].casefold(), reverse=descending)
    return filled + blank

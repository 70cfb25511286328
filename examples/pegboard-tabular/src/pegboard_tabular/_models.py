"""The tools' inputs and outputs: attrs classes pegboard derives JSON Schemas from."""

from __future__ import annotations

from typing import Any, Literal

import attrs

__all__ = (
    "Column",
    "ColumnType",
    "CsvDescription",
    "CsvQuery",
    "CsvRows",
    "DataFile",
    "DataFiles",
    "DataKind",
    "DescribeCsv",
    "Filter",
    "JsonType",
    "JsonValue",
    "ListFiles",
    "Operator",
    "ReadJson",
)

ColumnType = Literal["integer", "number", "boolean", "text", "empty"]
DataKind = Literal["csv", "tsv", "json"]
JsonType = Literal["object", "array", "string", "number", "boolean", "null"]
Operator = Literal["=", "!=", "<", "<=", ">", ">=", "contains", "startswith"]


def _doc(text: str) -> dict[str, str]:
    # pegboard reads a field's description from its metadata.
    return {"description": text}


@attrs.frozen
class ListFiles:
    directory: str = attrs.field(
        default=".", metadata=_doc("Folder to search, inside the Location")
    )


@attrs.frozen
class DataFile:
    """One data file."""

    path: str
    kind: DataKind
    bytes: int


@attrs.frozen
class DataFiles:
    files: list[DataFile]
    truncated: bool = attrs.field(metadata=_doc("True when more files exist than are listed"))


@attrs.frozen
class DescribeCsv:
    path: str = attrs.field(metadata=_doc("The CSV or TSV file, relative to the Location"))
    delimiter: str | None = attrs.field(
        default=None, metadata=_doc("The field delimiter; guessed from the file when omitted")
    )


@attrs.frozen
class Column:
    """One column: its inferred type and what its values look like."""

    name: str
    type: ColumnType
    empty: int = attrs.field(metadata=_doc("How many cells are blank"))
    distinct: int = attrs.field(metadata=_doc("How many different non-blank values it holds"))
    example: str | None = None
    minimum: float | None = None
    maximum: float | None = None


@attrs.frozen
class CsvDescription:
    path: str
    delimiter: str
    rows: int
    columns: list[Column]
    irregular_rows: int = attrs.field(
        metadata=_doc("Rows with more or fewer cells than the header (padded or cut)")
    )


@attrs.frozen
class Filter:
    """Keep rows whose ``column`` compares to ``value`` by ``op``."""

    column: str
    op: Operator = attrs.field(
        metadata=_doc(
            "Numbers compare as numbers when both sides are numeric, text compares "
            "case-insensitively; contains and startswith always compare text"
        )
    )
    value: str | int | float | bool


@attrs.frozen
class CsvQuery:
    path: str = attrs.field(metadata=_doc("The CSV or TSV file, relative to the Location"))
    where: list[Filter] = attrs.field(factory=list, metadata=_doc("Filters; a row must pass all"))
    columns: list[str] | None = attrs.field(
        default=None, metadata=_doc("Columns to return, in order; all when omitted")
    )
    order_by: str | None = attrs.field(default=None, metadata=_doc("Column to sort by"))
    descending: bool = False
    limit: int = attrs.field(default=20, metadata=_doc("At most this many rows (at least 1)"))
    delimiter: str | None = attrs.field(
        default=None, metadata=_doc("The field delimiter; guessed from the file when omitted")
    )


@attrs.frozen
class CsvRows:
    path: str
    columns: list[str]
    rows: list[dict[str, str]]
    matched: int = attrs.field(metadata=_doc("How many rows passed the filters"))


@attrs.frozen
class ReadJson:
    path: str = attrs.field(metadata=_doc("The JSON file, relative to the Location"))
    pointer: str = attrs.field(
        default="",
        metadata=_doc("An RFC 6901 JSON Pointer such as /servers/0/host; '' is the whole file"),
    )


@attrs.frozen
class JsonValue:
    path: str
    pointer: str
    type: JsonType
    value: Any = attrs.field(default=None, metadata=_doc("The value, unless it is too large"))
    truncated: bool = attrs.field(
        default=False, metadata=_doc("True when the value was left out for its size")
    )
    length: int | None = attrs.field(
        default=None, metadata=_doc("Items in an array, keys in an object, characters in a string")
    )
    keys: list[str] | None = attrs.field(
        default=None, metadata=_doc("An object's first keys, to build a narrower pointer")
    )

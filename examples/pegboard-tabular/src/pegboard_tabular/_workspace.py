"""One Location's tabular tools, and the state they share there."""

from __future__ import annotations

import collections
import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

import pegboard

from ._models import (
    CsvDescription,
    CsvQuery,
    CsvRows,
    DataFile,
    DataFiles,
    DataKind,
    DescribeCsv,
    JsonValue,
    ListFiles,
    ReadJson,
)
from ._pointer import PointerError, parse_json, resolve, summarize
from ._tables import Table, TableError, describe_columns, matches, parse_table, sort_rows

__all__ = ("Workspace",)

#: Suffixes the files tool lists, and the kind each is.
_KINDS: dict[str, DataKind] = {".csv": "csv", ".tsv": "tsv", ".json": "json"}
#: Folders the files tool never descends into, besides hidden ones.
_SKIPPED = frozenset({"node_modules", "__pycache__", "venv"})
_MAX_LISTED = 500
#: How many parsed tables one Location keeps (most recently used first).
_CACHED_TABLES = 8
#: How often (in rows) a query reports progress.
_PROGRESS_EVERY = 10_000


class Workspace:
    """The tabular tools of one Location, over its trusted services.

    Made by ``activate_location`` for one Location and closed at its
    teardown; nothing here is shared with another Location.
    """

    def __init__(
        self,
        filesystem: pegboard.Filesystem,
        permissions: pegboard.Permissions,
        *,
        max_rows: int,
        max_file_bytes: int,
    ) -> None:
        self.filesystem = filesystem
        self.permissions = permissions
        self.max_rows = max_rows
        self.max_file_bytes = max_file_bytes
        self._tables: collections.OrderedDict[tuple[Path, str | None, int, int], Table] = (
            collections.OrderedDict()
        )

    def tools(self) -> dict[str, pegboard.Tool]:
        """The tools, under their authored names; the plugin adds the namespace."""
        return {
            "files": pegboard.tool(
                description="List the CSV, TSV and JSON data files in the workspace (or one "
                "folder of it), with their sizes. Start here to find data to read.",
                input=ListFiles,
                output=DataFiles,
                execute=self.files,
            ),
            "describe_csv": pegboard.tool(
                description="Describe a CSV or TSV file: its row count and, per column, the "
                "inferred type, blank cells, distinct values, an example and the numeric range.",
                input=DescribeCsv,
                output=CsvDescription,
                execute=self.describe_csv,
            ),
            "query_csv": pegboard.tool(
                description="Read rows of a CSV or TSV file: keep rows matching all filters, "
                "pick columns, sort by a column, and return at most `limit` rows.",
                input=CsvQuery,
                output=CsvRows,
                execute=self.query_csv,
            ),
            "json_value": pegboard.tool(
                description="Read the value at a JSON Pointer (like /servers/0/host) in a JSON "
                "file; large values come back as their type, size and keys instead.",
                input=ReadJson,
                output=JsonValue,
                execute=self.json_value,
            ),
        }

    def close(self) -> None:
        """Forget every cached table (the Location is closing)."""
        self._tables.clear()

    async def files(
        self, input: ListFiles, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[DataFiles]:
        folder = self._inside(input.directory, directory=True)
        await self._ask(folder)
        found, truncated = await anyio.to_thread.run_sync(self._walk, folder)
        listed = [DataFile(path, kind, size) for path, kind, size in found]
        lines = [f"{item.path} ({item.kind}, {item.bytes:,} bytes)" for item in listed]
        if truncated:
            lines.append(f"… only the first {_MAX_LISTED} files are listed; name a folder")
        return pegboard.ToolResponse(
            output=DataFiles(listed, truncated),
            content="\n".join(lines) or "no CSV, TSV or JSON files here",
        )

    def _walk(self, folder: Path) -> tuple[list[tuple[str, DataKind, int]], bool]:
        found: list[tuple[str, DataKind, int]] = []
        for top, folders, names in os.walk(folder):
            folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in _SKIPPED)
            for name in sorted(names):
                kind = _KINDS.get(Path(name).suffix.lower())
                path = Path(top, name)
                info = path.lstat()
                if kind is None or not stat.S_ISREG(info.st_mode):
                    continue  # symlinks are skipped: they may lead outside the Location
                if len(found) == _MAX_LISTED:
                    return found, True
                found.append((self.filesystem.relative(path), kind, info.st_size))
        return found, False

    async def describe_csv(
        self, input: DescribeCsv, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[CsvDescription]:
        path, table = await self._table(input.path, input.delimiter)
        columns = await anyio.to_thread.run_sync(describe_columns, table)
        described = CsvDescription(
            path, table.delimiter, len(table.rows), columns, table.irregular_rows
        )
        lines = [f"{path}: {len(table.rows):,} rows, {len(columns)} columns"]
        for column in columns:
            detail = f"{column.type}, {column.distinct:,} distinct, {column.empty:,} blank"
            if column.minimum is not None:
                detail += f", from {column.minimum:g} to {column.maximum:g}"
            elif column.example is not None:
                detail += f", e.g. {column.example!r}"
            lines.append(f"- {column.name}: {detail}")
        if table.irregular_rows:
            lines.append(f"{table.irregular_rows:,} rows had the wrong number of cells")
        return pegboard.ToolResponse(output=described, content="\n".join(lines))

    async def query_csv(
        self, input: CsvQuery, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[CsvRows]:
        if input.limit < 1:
            raise pegboard.ToolFailure(f"limit must be at least 1, not {input.limit}")
        path, table = await self._table(input.path, input.delimiter)
        try:
            tests = [(table.index(test.column), test) for test in input.where]
            chosen = [table.index(name) for name in (input.columns or table.columns)]
            order = None if input.order_by is None else table.index(input.order_by)
        except TableError as error:
            raise pegboard.ToolFailure(f"{path}: {error}") from None
        kept = []
        for number, row in enumerate(table.rows, 1):
            if all(matches(row[position], test) for position, test in tests):
                kept.append(row)
            if number % _PROGRESS_EVERY == 0:
                # Long scans report progress, which is also where they can be cancelled.
                await context.progress(
                    pegboard.Progress(
                        message=f"scanned {number:,} of {len(table.rows):,} rows",
                        current=number,
                        total=len(table.rows),
                    )
                )
        if order is not None:
            kept = sort_rows(kept, order, descending=input.descending)
        limit = min(input.limit, self.max_rows)
        names = [table.columns[position] for position in chosen]
        rows = [
            {name: row[p] for name, p in zip(names, chosen, strict=True)} for row in kept[:limit]
        ]
        return pegboard.ToolResponse(
            output=CsvRows(path, names, rows, len(kept)),
            content=_render(
                path, names, rows, len(kept), len(table.rows), capped=input.limit > limit
            ),
            metadata={"scanned_rows": len(table.rows)},
        )

    async def json_value(
        self, input: ReadJson, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[JsonValue]:
        path, data = await self._read(input.path)
        try:
            document = await anyio.to_thread.run_sync(parse_json, data)
            found = summarize(path, input.pointer, resolve(document, input.pointer))
        except PointerError as error:
            raise pegboard.ToolFailure(f"{path}: {error}") from None
        where = f"{path} at {input.pointer or 'the top'}"
        if found.truncated:
            content = (
                f"{where} is {found.type} with {found.length:,} entries, too large to return "
                f"whole; read a narrower pointer such as {input.pointer}/0"
            )
            if found.keys:
                content += f" (keys: {', '.join(found.keys[:20])})"
        else:
            content = (
                f"{where} ({found.type}):\n{json.dumps(found.value, indent=2, ensure_ascii=False)}"
            )
        return pegboard.ToolResponse(output=found, content=content)

    async def _table(self, path: str, delimiter: str | None) -> tuple[str, Table]:
        real, shown = await self._allowed(path)
        info = await self._stat(real, shown)
        key = (real, delimiter, info.st_mtime_ns, info.st_size)
        cached = self._tables.get(key)
        if cached is not None:
            self._tables.move_to_end(key)
            return shown, cached
        data = await self._load(real, shown)
        try:
            table = await anyio.to_thread.run_sync(parse_table, data, delimiter)
        except TableError as error:
            raise pegboard.ToolFailure(f"{shown}: {error}") from None
        self._tables[key] = table
        while len(self._tables) > _CACHED_TABLES:
            self._tables.popitem(last=False)
        return shown, table

    async def _read(self, path: str) -> tuple[str, bytes]:
        real, shown = await self._allowed(path)
        await self._stat(real, shown)
        return shown, await self._load(real, shown)

    async def _allowed(self, path: str) -> tuple[Path, str]:
        """The real path inside the Location, and its shown name, once reading is allowed."""
        real = self._inside(path)
        return real, await self._ask(real)

    async def _stat(self, real: Path, shown: str) -> os.stat_result:
        try:
            info = await anyio.Path(real).stat()
        except FileNotFoundError:
            raise pegboard.ToolFailure(
                f"{shown} does not exist; tabular_files lists the data files"
            ) from None
        if stat.S_ISDIR(info.st_mode):
            raise pegboard.ToolFailure(f"{shown} is a folder; name a file in it")
        if info.st_size > self.max_file_bytes:
            raise pegboard.ToolFailure(
                f"{shown} is {info.st_size:,} bytes, over this workspace's "
                f"{self.max_file_bytes:,}-byte limit for data files"
            )
        return info

    async def _load(self, real: Path, shown: str) -> bytes:
        try:
            # The filesystem service opens the file without following a symlink
            # swapped in since the path was checked.
            return await self.filesystem.read_bytes(real)
        except FileNotFoundError:
            raise pegboard.ToolFailure(f"{shown} was removed while being read") from None

    def _inside(self, path: str, *, directory: bool = False) -> Path:
        try:
            return self.filesystem.directory(path) if directory else self.filesystem.resolve(path)
        except (PermissionError, NotADirectoryError, FileNotFoundError) as error:
            # OutsideLocationError is a PermissionError; its message says what to do.
            raise pegboard.ToolFailure(str(error)) from None

    async def _ask(self, real: Path) -> str:
        shown = self.filesystem.relative(real)
        await self.permissions.ask(pegboard.PermissionRequest(action="read", resources=[shown]))
        return shown


def _render(
    path: str,
    names: list[str],
    rows: list[dict[str, Any]],
    matched: int,
    total: int,
    *,
    capped: bool,
) -> str:
    head = f"{path}: {matched:,} of {total:,} rows match; showing {len(rows):,}"
    if capped:
        head += " (this workspace returns at most that many rows per query)"
    lines = [head, " | ".join(names)]
    lines.extend(" | ".join(row[name] for name in names) for row in rows)
    return "\n".join(lines)

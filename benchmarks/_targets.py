"""What the benchmark scripts share to report their targets as JSON for bench_targets.py."""

from __future__ import annotations

import argparse
import json
import operator
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = (
    "KEYS",
    "UNITS",
    "Reading",
    "add_json_option",
    "command_line",
    "difference",
    "load",
    "paired",
    "quietest",
    "ratio",
    "within",
    "write",
)

#: The units a reading may have: a ratio, microseconds, milliseconds.
UNITS = ("x", "µs", "ms")

_text = attrs.validators.instance_of(str)
# JSON writes a whole float such as 10.0 back as 10.0, but a limit given as 10 as 10.
_number = attrs.validators.instance_of((int, float))


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that ran this script, as the readings quote it (without ``--json``)."""
    arguments = list(sys.argv if argv is None else argv)
    script, rest = Path(arguments[0]).name, arguments[1:]
    kept: list[str] = []
    skip = False
    for argument in rest:
        if skip:
            skip = False
        elif argument == "--json":
            skip = True
        elif not argument.startswith("--json="):
            kept.append(argument)
    return " ".join([f"benchmarks/{script}", *kept])


@attrs.frozen(kw_only=True)
class Reading:
    """One target of a benchmark: the figure measured, its limit and whether it was met.

    ``limit`` and ``met`` are None for a row shown for context, with no target.
    ``figure`` is the median; ``quietest`` the figure in the machine's quietest
    round, where the script has one.
    """

    quantity: str = attrs.field(validator=_text)
    figure: float = attrs.field(validator=_number)
    unit: str = attrs.field(validator=attrs.validators.in_(UNITS))
    quietest: float | None = attrs.field(default=None, validator=attrs.validators.optional(_number))
    limit: float | None = attrs.field(validator=attrs.validators.optional(_number))
    met: bool | None = attrs.field(
        validator=attrs.validators.optional(attrs.validators.instance_of(bool))
    )
    #: The command that measured it: by default, the one that ran this script.
    command: str = attrs.field(factory=command_line, validator=_text)


#: The keys of each reading's JSON object, in order.
KEYS = tuple(field.name for field in attrs.fields(Reading))


def within(value: float, limit: float | None, *, strict: bool = False) -> bool | None:
    """Whether ``value`` meets ``limit`` (``<``, or ``<=`` unless strict); None without one."""
    if limit is None:
        return None
    return value < limit if strict else value <= limit


def paired(
    ours: Sequence[float], theirs: Sequence[float], combine: Callable[[float, float], float]
) -> float:
    """The median over rounds of ``combine`` applied to figures timed in the same round."""
    return statistics.median(map(combine, ours, theirs))


def quietest(
    ours: Sequence[float], theirs: Sequence[float], combine: Callable[[float, float], float]
) -> float:
    """``combine`` in the round where both ran nearest their own best: the quietest moment."""
    best_ours, best_theirs = min(ours), min(theirs)
    quiet = min(range(len(ours)), key=lambda i: ours[i] / best_ours + theirs[i] / best_theirs)
    return combine(ours[quiet], theirs[quiet])


def ratio(
    quantity: str, ours: Sequence[float], theirs: Sequence[float], limit: float | None
) -> Reading:
    """The reading of ``ours / theirs``, paired within each round, against ``limit``."""
    figure = paired(ours, theirs, operator.truediv)
    return Reading(
        quantity=quantity,
        figure=figure,
        unit="x",
        quietest=quietest(ours, theirs, operator.truediv),
        limit=limit,
        met=within(figure, limit),
    )


def difference(
    quantity: str,
    ours: Sequence[float],
    theirs: Sequence[float],
    *,
    scale: float,
    unit: str,
    limit: float | None = None,
) -> Reading:
    """The reading of ``ours - theirs``, paired within each round, in ``unit`` (``scale``
    per second), against ``limit``."""
    figure = paired(ours, theirs, operator.sub) * scale
    return Reading(
        quantity=quantity,
        figure=figure,
        unit=unit,
        quietest=quietest(ours, theirs, operator.sub) * scale,
        limit=limit,
        met=within(figure, limit),
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", metavar="PATH", help="also write the targets here, as a JSON list of objects"
    )


def write(path: str | None, readings: Sequence[Reading]) -> None:
    """Write ``readings`` to ``path`` as a JSON list; nothing without a path."""
    if path is None:
        return
    rows = [attrs.asdict(reading) for reading in readings]
    Path(path).write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def load(path: Path) -> list[Reading]:
    """The readings a script wrote; ValueError saying what is wrong with a malformed file."""
    try:
        rows: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the targets in {path}: {error}") from None
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path} holds no targets: expected a non-empty JSON list of objects")
    readings = []
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != set(KEYS):
            shown = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise ValueError(f"{path}, target {index}: expected the keys {KEYS}, got {shown}")
        try:
            readings.append(Reading(**row))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}, target {index}: {error}") from None
    return readings

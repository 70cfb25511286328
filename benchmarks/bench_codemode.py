"""Code Mode costs: N tool calls through one ``execute`` call against N separate calls.

Run from the repository root (needs ``pip install -e '.[codemode]'``)::

    .venv/bin/python benchmarks/bench_codemode.py [--quick] [--backend trio]

For each N, in one process and one event loop, times:

- N separate ``request.execute(ToolCall("add", {...}))`` calls, one after another;
- one ``execute`` call whose program awaits ``add`` N times, one after another;
- one ``execute`` call whose program gathers the N calls;
- one ``execute`` call running an empty program (the fixed cost of a program).

and reports the per-call overhead of a call made from a program: (program time - empty
program) / N - (separate time / N).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from _add import ADD_TOOL  # beside this script on sys.path
from _timing import collector_paused

import pegboard
from pegboard.codemode import CodeModeLimits

CONTEXT = pegboard.ToolContext("s", "a", "m", "c")


def program(n: int, gathered: bool) -> str:
    if gathered:
        return (
            "import asyncio\n"
            f"results = await asyncio.gather(*[add(a=i, b=1) for i in range({n})])\n"
            "sum(r['sum'] for r in results)"
        )
    return f"total = 0\nfor i in range({n}):\n    total += (await add(a=i, b=1))['sum']\ntotal"


async def timed(run: Callable[[], Awaitable[None]], rounds: int) -> list[float]:
    await run()  # warm: the sandbox worker, caches
    samples = []
    for _ in range(rounds):
        with collector_paused():
            start = time.perf_counter()
            await run()
            samples.append(time.perf_counter() - start)
    return samples


async def main(quick: bool) -> None:
    rounds = 5 if quick else 9
    sizes = (10,) if quick else (1, 10, 100, 1000)
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        async with pegboard.Host().location(root, plugins=[], storage=root / "s") as location:
            location.tools.register({"add": ADD_TOOL})
            plain = location.prepare()
            coded = location.prepare(code_mode=CodeModeLimits(calls=max(sizes)))

            async def execute(code: str, expected: str) -> None:
                call = pegboard.ToolCall("execute", {"code": code}, CONTEXT)
                outcome = await coded.execute(call)
                assert isinstance(outcome, pegboard.Completed), outcome
                assert outcome.content[0].text == expected, outcome  # type: ignore[union-attr]

            empty = await timed(functools.partial(execute, "1", "1"), rounds)
            print("## Code Mode against separate calls\n")
            print(f"empty program (fixed cost)   median {statistics.median(empty) * 1e3:7.3f} ms")
            print(f"                             best   {min(empty) * 1e3:7.3f} ms\n")
            print(
                f"{'N':>5}  {'separate':>11}  {'program':>11}  {'gathered':>11}  "
                f"{'per call: separate':>18}  {'from a program':>14}  {'overhead':>9}"
            )
            for n in sizes:
                expected = str(sum(range(n)) + n)

                async def separate(n: int = n) -> None:
                    for i in range(n):
                        call = pegboard.ToolCall("add", {"a": i, "b": 1}, CONTEXT)
                        outcome = await plain.execute(call)
                        assert isinstance(outcome, pegboard.Completed)

                apart = statistics.median(await timed(separate, rounds))
                code, gathered = program(n, False), program(n, True)
                inside = statistics.median(
                    await timed(functools.partial(execute, code, expected), rounds)
                )
                together = statistics.median(
                    await timed(functools.partial(execute, gathered, expected), rounds)
                )
                per_apart = apart / n
                per_inside = (inside - statistics.median(empty)) / n
                print(
                    f"{n:>5}  {apart * 1e3:>8.3f} ms  {inside * 1e3:>8.3f} ms  "
                    f"{together * 1e3:>8.3f} ms  {per_apart * 1e6:>15.1f} µs  "
                    f"{per_inside * 1e6:>11.1f} µs  {(per_inside - per_apart) * 1e6:>6.1f} µs"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for smoke tests")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    arguments = parser.parse_args()
    anyio.run(main, arguments.quick, backend=arguments.backend)

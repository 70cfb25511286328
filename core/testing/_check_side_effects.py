"""The side effects check: what the plugin does to its process, seen from its worker."""

from __future__ import annotations

import anyio

from pegboard._confined import observing

from ._bench import Bench
from ._check_generated import exercise_every_tool
from ._report import Findings, NotJudged

__all__ = ("side_effects",)

#: Seconds the check waits after the last call, so progress reported late arrives.
_LATE = 0.2

#: What each kind of side effect means, and how to fix it.
_FIXES = {
    "write": (
        "write only where tempfile puts files (a confined plugin's own temporary folder); "
        "files of the Location go through the trusted filesystem service"
    ),
    "network": (
        "a confined plugin has no network unless the host grants it "
        "(host.location(network=[...])): say so in your documentation, or do without"
    ),
    "environment": (
        "a confined plugin sees only a short allow-list of environment variables (no API "
        "keys): take settings as options (options_schema) instead"
    ),
    "stdout": (
        "never print: standard output is the channel of `pegboard serve` over stdio; "
        "use the logging module, or report progress"
    ),
    "cwd": "never change the working directory: it is the host's; pass paths instead",
    "thread": "stop and join every thread you start, in teardown_location at the latest",
    "task": (
        "await or cancel every task you start; start background work with "
        "services.tasks, which pegboard stops at teardown"
    ),
    "fd": "close every file and socket you open (use `with`), in teardown_location at the latest",
    "progress": (
        "report progress only while the call runs: await every task that reports, "
        "before the tool returns"
    ),
}


async def side_effects(bench: Bench, findings: Findings) -> None:
    """Every tool called once and the Location closed, in a worker that watches."""
    if not bench.confined:
        raise NotJudged(
            f"side effects are watched in a confined plugin's worker, and the plugin ran "
            f"{bench.where}"
        )
    with observing():
        async with bench.open("side-effects") as opened:
            worker = bench.worker(opened.location)
            if worker is None:
                raise NotJudged("the plugin's worker is gone; see activation")
            await exercise_every_tool(bench, opened, opened.location.prepare())
            await anyio.sleep(_LATE)  # progress a call's stray task reports soon after
    seen: dict[str, list[str]] = {}
    for event in worker.observed:
        seen.setdefault(event["kind"], []).append(f"{event['what']} ({event['where']})")
    for call_id in worker.late_progress:
        seen.setdefault("progress", []).append(
            f"progress reported for call {call_id} after it settled"
        )
    for kind, repeated in seen.items():
        items = list(dict.fromkeys(repeated))  # the same thing seen in several calls: once
        shown = "; ".join(items[:5]) + (f"; and {len(items) - 5} more" if len(items) > 5 else "")
        findings.problem(shown, _FIXES.get(kind, "do not leave side effects behind"))

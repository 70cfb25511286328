"""The blocking check: a plugin never stalls the event loop, and imports quickly."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import anyio
import anyio.to_thread
import importlib_metadata

from .._plugins import BUILTIN_MODULES
from ._bench import Bench, Opened, describe_error
from ._check_generated import exercise_every_tool, exercise_once
from ._report import Findings
from ._watchdog import Watchdog, watching

__all__ = ("Watchdog", "blocking", "import_seconds", "watching")


async def blocking(bench: Bench, findings: Findings) -> None:
    """Import time; then activation, calls and teardown under the watchdog, which has
    watched every call of the checks that ran before this one as well.

    A confined plugin's event loop is in its worker: the watchdog pings it there
    during the calls and hooks (its activation and teardown hold only its worker).
    """
    if not bench.confined:
        await _import_time(bench, findings)
    # One unwatched round first: what runs once per process (the plugin's import,
    # pegboard's and the kit's own lazy imports) is measured by the import time.
    async with bench.open("blocking-warm-up") as opened:
        if bench.confined:
            _worker_import_time(bench, opened, findings)
        request = opened.location.prepare()
        for name, definition in sorted(opened.tools().items()):
            if name not in bench.subject.skip:
                await exercise_once(bench, opened, name, definition, request)
    threshold = bench.subject.blocking_threshold
    # The run's watchdog has watched every call the checks before this one made.
    watched = contextlib.nullcontext(bench.dog) if bench.dog else watching(threshold)
    async with watched as dog:
        bench.dog = dog
        async with bench.open("blocking") as opened:
            await exercise_every_tool(bench, opened, opened.location.prepare())
            with dog.activity(f"plugin {bench.name!r}'s prepare_request hook"):
                opened.location.prepare()
    blocked = dog.blocked()
    if dog.set_aside:
        findings.note(
            f"{dog.set_aside} stall(s) of the event loop were set aside: the whole process was "
            "held up at the time (a busy machine), not the loop by the plugin"
        )
    for label, seconds in blocked:
        findings.problem(
            f"{label} blocked the event loop for {seconds * 1000:,.0f} ms "
            f"(more than {threshold * 1000:,.0f} ms); no other call could run meanwhile",
            "never block in async code: await anyio.sleep instead of time.sleep, use async "
            "libraries for I/O, or move blocking work to anyio.to_thread.run_sync (a plain "
            "def tool runs in a worker thread by itself)",
        )


def _worker_import_time(bench: Bench, opened: Opened, findings: Findings) -> None:
    worker = bench.worker(opened.location)
    if worker is None or worker.import_seconds is None:
        findings.note("import time not measured: the plugin's worker did not report it")
        return
    module = _module_of(bench)
    label = f"plugin {bench.name!r}" if module is None else repr(module)
    _judge_import(bench, findings, label, worker.import_seconds)


async def _import_time(bench: Bench, findings: Findings) -> None:
    module = _module_of(bench)
    if module is None:
        findings.note("import time not measured: the plugin is an object, not an import")
        return
    try:
        seconds = await anyio.to_thread.run_sync(import_seconds, module)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        findings.note(f"import time of {module!r} not measured: {describe_error(error)}")
        return
    _judge_import(bench, findings, repr(module), seconds)


def _judge_import(bench: Bench, findings: Findings, module: str, seconds: float) -> None:
    limit = bench.subject.import_threshold
    findings.note(f"importing {module} takes {seconds * 1000:,.0f} ms")
    if seconds > limit:
        findings.problem(
            f"importing {module} takes {seconds:.2f} s (more than {limit:g} s); every host "
            "that enables the plugin waits for it",
            "keep import-time work small: import heavy libraries and open connections inside "
            "activate_location or the tool that needs them",
        )


def _module_of(bench: Bench) -> str | None:
    """The module a plugin given by name or reference imports, if it is one."""
    plugin = bench.subject.plugin
    if not isinstance(plugin, str):
        return None
    if plugin in BUILTIN_MODULES:
        return BUILTIN_MODULES[plugin]
    for point in importlib_metadata.entry_points(group="pegboard", name=plugin):
        return str(point.module)
    where = plugin.partition(":")[0]
    return None if where.endswith(".py") else where


def import_seconds(module: str) -> float:
    """Seconds a fresh interpreter takes to import ``module`` after pegboard itself."""
    code = (
        "import sys, time, importlib, pegboard\n"
        "start = time.perf_counter()\n"
        "importlib.import_module(sys.argv[1])\n"
        "print(time.perf_counter() - start)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, module],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"it does not import on its own: {last}")
    return float(done.stdout.strip().splitlines()[-1])

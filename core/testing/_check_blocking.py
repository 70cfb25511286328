"""The blocking check: a plugin never stalls the event loop, and imports quickly."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import anyio.to_thread
import attrs
import importlib_metadata

from pegboard._confined import Worker

from .._plugins import BUILTIN_MODULES
from ._bench import Bench, Opened, describe_error
from ._check_generated import exercise_once
from ._report import Findings

__all__ = ("Watchdog", "blocking", "import_seconds")

#: How often the watchdog's task asks to run; a later wake-up means the loop was held.
TICK = 0.005


@attrs.define
class _Activity:
    label: str
    start: float
    end: float | None = None


@attrs.define
class Watchdog:
    """Finds stalls of the event loop and names the activity that was running then.

    A task sleeps ``TICK`` seconds over and over; when it wakes up more than
    ``threshold`` seconds late, nothing else could run on the loop meanwhile.
    Activities are labelled spans of time (an activation, one call); a stall is
    blamed on the activity that overlaps it most (the watchdog notices a stall
    only when it wakes, after the next activity may have begun).

    A thread of its own ticks alongside: when it was late too, the whole
    process was held up (a busy machine), not the loop by the plugin, and the
    stall is set aside rather than blamed.
    """

    threshold: float
    activities: list[_Activity] = attrs.field(factory=list)
    stalls: list[tuple[float, float]] = attrs.field(factory=list)
    #: Lateness of the watchdog's own thread: ``(start, seconds)``.
    starved: list[tuple[float, float]] = attrs.field(factory=list)
    #: Stalls set aside because the whole process was held up.
    set_aside: int = 0

    def pulse(self, stop: threading.Event) -> None:
        """Tick in a thread until ``stop`` is set, noting when the process itself was late."""
        while not stop.is_set():
            before = time.monotonic()
            time.sleep(TICK)
            late = time.monotonic() - before - TICK
            if late > self.threshold / 2:
                self.starved.append((before + TICK, late))

    async def run(self) -> None:
        """Watch until cancelled."""
        while True:
            before = time.monotonic()
            await anyio.sleep(TICK)
            late = time.monotonic() - before - TICK
            if late > self.threshold:
                self.stalls.append((before + TICK, late))

    async def follow(self, worker: Worker) -> None:
        """Watch a confined plugin's event loop, from here, until cancelled or it is gone.

        Each ping is answered by the worker's event loop, so an answer later than
        ``threshold`` means the plugin held that loop. Nothing the plugin does in
        its process changes when the answer arrives here.
        """
        while True:
            before = time.monotonic()
            await anyio.sleep(TICK)
            if not await worker.ping():
                return
            late = time.monotonic() - before - TICK
            if late > self.threshold:
                self.stalls.append((before + TICK, late))

    @contextlib.contextmanager
    def activity(self, label: str) -> Iterator[None]:
        """Label what runs inside the block."""
        entry = _Activity(label, time.monotonic())
        self.activities.append(entry)
        try:
            yield
        finally:
            entry.end = time.monotonic()

    def blocked(self) -> list[tuple[str, float]]:
        """``(activity, seconds)`` for every stall, the worst first."""
        found: dict[str, float] = {}
        now = time.monotonic()
        self.set_aside = 0
        for start, late in self.stalls:
            end = start + late
            if any(begun < end and begun + slow > start for begun, slow in self.starved):
                self.set_aside += 1
                continue
            overlaps = {
                each.label: min(end, now if each.end is None else each.end) - max(start, each.start)
                for each in self.activities
            }
            label = max(overlaps, key=overlaps.__getitem__, default=None)
            if label is None or overlaps[label] <= 0:
                label = "the checks' own steps, between the plugin's activities"
            found[label] = max(found.get(label, 0.0), late)
        return sorted(found.items(), key=lambda item: -item[1])


@contextlib.asynccontextmanager
async def following(dog: Watchdog, worker: Worker | None) -> AsyncIterator[None]:
    """While the block runs, ``dog`` also watches ``worker``'s event loop (if any)."""
    if worker is None:
        yield
        return
    async with anyio.create_task_group() as group:
        group.start_soon(dog.follow, worker)
        try:
            yield
        finally:
            group.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def watching(threshold: float) -> AsyncIterator[Watchdog]:
    """A running `Watchdog`, stopped when the block ends."""
    dog = Watchdog(threshold)
    raised: Exception | None = None
    stop = threading.Event()
    thread = threading.Thread(target=dog.pulse, args=(stop,), name="pegboard-check-pulse")
    thread.start()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(dog.run)
            await anyio.sleep(TICK)  # the watchdog has started ticking
            try:
                yield dog
            except Exception as error:  # noqa: BLE001 - re-raised below, outside the group
                raised = error  # so the caller sees its own exception, not a group of one
            finally:
                group.cancel_scope.cancel()
    finally:
        stop.set()
        thread.join()
    if raised is not None:
        raise raised


async def blocking(bench: Bench, findings: Findings) -> None:
    """Import time; then activation, calls and teardown under the watchdog.

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
    async with watching(threshold) as dog:
        stack = contextlib.AsyncExitStack()
        with dog.activity(f"activating plugin {bench.name!r} (activate_location)"):
            opened = await stack.enter_async_context(bench.open("blocking"))
        try:
            await stack.enter_async_context(following(dog, bench.worker(opened.location)))
            request = opened.location.prepare()
            for name, definition in sorted(opened.tools().items()):
                if name in bench.subject.skip:
                    continue
                with dog.activity(f"a call of tool {name!r} (its execute, or a hook)"):
                    for example in bench.subject.examples:
                        if example.tool == name:
                            await bench.call(opened, name, example.input, request=request)
                    await exercise_once(bench, opened, name, definition, request)
            with dog.activity(f"plugin {bench.name!r}'s prepare_request hook"):
                opened.location.prepare()
        finally:
            with dog.activity(f"closing the Location (plugin {bench.name!r}'s teardown)"):
                await stack.aclose()
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

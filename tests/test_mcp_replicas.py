"""Three pegboard serve --http replicas behind a round-robin balancer answer any client,
and losing one of them mid-run loses only the calls that were running on it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import h11
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import httpx2 as httpx
from distributions import install_plugin
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

# uvicorn serves the replicas; the balancer and the clients run on asyncio.
pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

TOKEN = "replica-token"
CLIENTS = 20
CALLS = 50
#: Seconds one call may take under the whole suite's load.
CALL_TIMEOUT = 20
ERAS = {"2026-07-28": "auto", "2025-11-25": "legacy"}
#: Seconds a backend that refused a connection is passed over.
DOWN_FOR = 1.0
#: Headers about one hop only, which the balancer does not pass on.
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"upgrade"})
PLUGIN = """
    import pegboard

    async def add(input, context):
        return str(input["a"] + input["b"])

    @pegboard.hookimpl
    def activate_location(tools):
        schema = {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }
        tools.register(
            {"add": pegboard.tool(description="Add two integers.", execute=add, input=schema)}
        )
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def call_of(body: bytes) -> tuple[int, int] | None:
    """The (client, call) a tools/call request body stands for; None for anything else."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    arguments = message["params"]["arguments"]
    return int(arguments["a"]), int(arguments["b"])


@dataclass(eq=False)
class Exchange:
    """One request the balancer handed to a backend, and whether its answer came back."""

    port: int
    call: tuple[int, int] | None
    answered: bool = False


async def receive(connection: h11.Connection, reader: asyncio.StreamReader) -> object:
    """The next HTTP event on ``connection``, reading from ``reader`` as needed."""
    while (event := connection.next_event()) is h11.NEED_DATA:
        connection.receive_data(await reader.read(65536))
    return event


class Balancer:
    """An HTTP/1.1 round-robin load balancer: each request goes to the next live backend.

    It behaves as haproxy with ``option redispatch`` and ``retries``: a backend
    that refuses a connection is passed over for DOWN_FOR seconds, and the
    request, which reached no server, goes to the next backend. A request that
    reached a backend that died before answering gets ``502 Bad Gateway`` (its
    connection is cut if the answer had begun); with ``cut=True`` its connection
    is cut in every case, as a TCP (layer 4) balancer's would be. It opens a connection to the
    backend per request, so one client's consecutive requests reach different
    replicas even over one kept-alive connection.

    ``pending[port]`` holds the requests sent to that backend and not answered
    yet: what is in flight on it.
    """

    def __init__(self, ports: list[int], *, cut: bool = False) -> None:
        self.ports = ports
        self.cut = cut
        self.pending: dict[int, set[Exchange]] = {port: set() for port in ports}
        #: Connections refused by a backend, whose request went to another.
        self.refused = 0
        self._turn = 0
        self._down_until: dict[int, float] = {}
        self._handlers: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        """Stop every connection still open."""
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    def _order(self) -> list[int]:
        """The backends from this request's turn on, the ones passed over last."""
        start = self._turn
        self._turn = (self._turn + 1) % len(self.ports)
        order = self.ports[start:] + self.ports[:start]
        now = time.monotonic()
        return sorted(order, key=lambda port: self._down_until.get(port, 0.0) > now)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        downstream = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await receive(downstream, reader)
                if not isinstance(request, h11.Request):
                    return
                body = b""
                while not isinstance(part := await receive(downstream, reader), h11.EndOfMessage):
                    if not isinstance(part, h11.Data):
                        return
                    body += part.data
                await self._forward(request, body, downstream, writer)
                if downstream.our_state is not h11.DONE:
                    return
                downstream.start_next_cycle()
        except (OSError, h11.ProtocolError):
            return  # the client left, or the answer was cut: the connection ends
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _forward(
        self,
        request: h11.Request,
        body: bytes,
        downstream: h11.Connection,
        writer: asyncio.StreamWriter,
    ) -> None:
        call = call_of(body)
        for port in self._order():
            # In flight on the backend from the moment it is chosen: a connection
            # the kernel has accepted for it may be cut before this task resumes.
            exchange = Exchange(port, call)
            self.pending[port].add(exchange)
            try:
                backend_reader, backend_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                self.pending[port].discard(exchange)
                self.refused += 1
                self._down_until[port] = time.monotonic() + DOWN_FOR
                continue
            break
        else:
            await self._answer(downstream, writer, 503)
            return
        upstream = h11.Connection(h11.CLIENT)
        headers = [(name, value) for name, value in request.headers if name not in HOP_BY_HOP]
        begun = False
        try:
            backend_writer.write(
                upstream.send(
                    h11.Request(
                        method=request.method,
                        target=request.target,
                        headers=[*headers, (b"connection", b"close")],
                    )
                )
            )
            backend_writer.write(upstream.send(h11.Data(data=body)))
            backend_writer.write(upstream.send(h11.EndOfMessage()))
            await backend_writer.drain()
            while True:
                event = await receive(upstream, backend_reader)
                if isinstance(event, h11.Response):
                    begun = True
                    kept = [(k, v) for k, v in event.headers if k not in HOP_BY_HOP]
                    response = h11.Response(
                        status_code=event.status_code, headers=kept, reason=event.reason
                    )
                    writer.write(downstream.send(response))
                elif isinstance(event, h11.Data):
                    writer.write(downstream.send(h11.Data(data=event.data)))
                elif isinstance(event, h11.EndOfMessage):
                    exchange.answered = True
                    self.pending[port].discard(exchange)
                    writer.write(downstream.send(h11.EndOfMessage()))
                    await writer.drain()
                    return
                elif isinstance(event, h11.ConnectionClosed):
                    raise ConnectionResetError("the backend closed before answering")
                await writer.drain()
        except (OSError, h11.ProtocolError):
            if begun or self.cut:
                raise
            await self._answer(downstream, writer, 502)
        finally:
            self.pending[port].discard(exchange)
            backend_writer.close()

    @staticmethod
    async def _answer(
        downstream: h11.Connection, writer: asyncio.StreamWriter, status: int
    ) -> None:
        text = f"{status} from the balancer\n".encode()
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(text))]
        writer.write(downstream.send(h11.Response(status_code=status, headers=headers)))
        writer.write(downstream.send(h11.Data(data=text)))
        writer.write(downstream.send(h11.EndOfMessage()))
        await writer.drain()


class Replicas:
    """Three pegboard serve --http processes sharing one token and one session key."""

    def __init__(self, directory: Path) -> None:
        site, root = directory / "site", directory / "location"
        site.mkdir()
        root.mkdir()
        install_plugin(site, "replica", PLUGIN)
        (root / "pegboard.toml").write_text('plugins = ["replica"]\n')
        token = directory / "token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o600)
        command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
        assert command is not None
        self._command = [command, "serve", "-l", str(root), "--http", "--token-file", str(token)]
        self._command += ["--session-key-file", str(directory / "session.key")]
        self._environment = {
            **os.environ,
            "PYTHONPATH": str(site),
            "XDG_DATA_HOME": str(directory / "data"),
        }
        self.ports = [free_port() for _ in range(3)]
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * 3

    def start(self) -> None:
        """Start every replica that is not running, and wait until each listens."""
        for index, port in enumerate(self.ports):
            process = self.processes[index]
            if process is None or process.poll() is not None:
                self.processes[index] = subprocess.Popen(
                    [*self._command, f"--port={port}"],
                    env=self._environment,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
        deadline = time.monotonic() + 60
        for port in self.ports:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "a replica did not start"
                    time.sleep(0.1)

    def kill(self, index: int) -> None:
        """SIGKILL one replica and wait until it is gone (its port refuses).

        The wait blocks the event loop on purpose: no request can be handed to
        the dying replica between the caller's look at what is in flight on it
        and its end.
        """
        process = self.processes[index]
        assert process is not None
        process.kill()
        process.wait(timeout=10)

    def stop(self) -> None:
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            if process is None:
                continue
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """The module's three replicas, shared by its tests."""
    group = Replicas(tmp_path_factory.mktemp("replicas"))
    try:
        yield group
    finally:
        group.stop()


@pytest.fixture
def live(replicas: Replicas) -> Replicas:
    """The three replicas, each running (one a test killed is started again)."""
    replicas.start()
    return replicas


@pytest.fixture
async def balancer(
    live: Replicas, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Balancer, str]]:
    """A round-robin balancer over the replicas, and the MCP URL through it; a
    test parametrized with ``failed="cut"`` gets one that cuts a failed request's
    connection instead of answering 502."""
    failed = request.node.callspec.params.get("failed", "502")
    balancer = Balancer(live.ports, cut=failed == "cut")
    server = await asyncio.start_server(balancer.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield balancer, f"http://127.0.0.1:{port}/mcp"
        server.close()
        await balancer.close()


def connect(url: str, mode: str, http: httpx.AsyncClient) -> Client:
    return Client(streamable_http_client(url, http_client=http), mode=mode)


async def one_client(url: str, mode: str, client: int) -> int:
    """CALLS calls in order through the balancer; how many were answered right."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answered = 0
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        connect(url, mode, http) as mcp,
    ):
        for call in range(CALLS):
            with anyio.fail_after(CALL_TIMEOUT):
                result = await mcp.call_tool("add", {"a": client, "b": call})
            assert not result.is_error, result
            assert str(client + call) == result.content[0].text  # type: ignore[union-attr]
            answered += 1
    return answered


@pytest.mark.parametrize("era", list(ERAS))
async def test_every_call_succeeds_through_three_replicas(
    balancer: tuple[Balancer, str], era: str
) -> None:
    """20 clients x 50 calls, each request to the next replica: 0 errors on both protocols."""
    with anyio.fail_after(50):
        answered = await asyncio.gather(
            *(one_client(balancer[1], ERAS[era], n) for n in range(CLIENTS))
        )
    assert [CALLS] * CLIENTS == answered


@dataclass
class Tally:
    """What the clients of one run saw, call by call: (client, call) pairs."""

    answered: set[tuple[int, int]] = field(default_factory=set)
    lost: set[tuple[int, int]] = field(default_factory=set)
    wrong: list[object] = field(default_factory=list)
    #: Clients whose transport died and that connected again.
    reconnected: int = 0
    #: Called on every answer from a third of the calls on, until it returns True.
    after_a_third: Callable[[], bool] = lambda: True
    _done: bool = False

    def answer(self, key: tuple[int, int]) -> None:
        self.answered.add(key)
        if not self._done and len(self.answered) >= CLIENTS * CALLS // 3:
            self._done = self.after_a_third()


async def steady_client(url: str, mode: str, client: int, tally: Tally) -> None:
    """CALLS calls in order, as a host would make them: a call that fails is
    lost (the model is told), not retried, and the next call goes on; a client
    whose transport died connects again.
    """
    headers = {"Authorization": f"Bearer {TOKEN}"}
    call = 0
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        for _attempt in range(5):
            try:
                async with connect(url, mode, http) as mcp:
                    while call < CALLS:
                        key = (client, call)
                        call += 1
                        try:
                            with anyio.fail_after(CALL_TIMEOUT):
                                result = await mcp.call_tool("add", {"a": client, "b": key[1]})
                        except MCPError:
                            tally.lost.add(key)
                            continue
                        if result.is_error or result.content[0].text != str(sum(key)):  # type: ignore[union-attr]
                            tally.wrong.append(result)
                        tally.answer(key)
                    return
            except* (httpx.TransportError, MCPError):
                # The SDK's client ends its whole transport when one request's
                # connection is cut; the call it was making is lost.
                if 0 < call and (client, call - 1) not in tally.answered:
                    tally.lost.add((client, call - 1))
                tally.reconnected += 1
    raise AssertionError(f"client {client} could not connect again five times")


@pytest.mark.parametrize(
    ("era", "failed"), [("2026-07-28", "502"), ("2025-11-25", "502"), ("2025-11-25", "cut")]
)
async def test_a_killed_replica_loses_only_the_calls_in_flight_on_it(
    balancer: tuple[Balancer, str], live: Replicas, era: str, failed: str
) -> None:
    """SIGKILL one replica after a third of 20 x 50 calls: every call that was not in
    flight on it succeeds, and every client goes on to its last call. Behind a
    balancer that cuts the connection of a request its backend dropped, the SDK's
    client loses its whole transport when no answer had begun, and connects again."""
    proxy, url = balancer
    victim = 1
    in_flight: set[Exchange] = set()

    def kill() -> bool:
        """Kill the victim once a call is in flight on it."""
        pending = proxy.pending[live.ports[victim]]
        if not any(exchange.call for exchange in pending):
            return False
        # No await between the look and the kill: nothing reaches the victim in between.
        in_flight.update(pending)
        live.kill(victim)
        return True

    tally = Tally(after_a_third=kill)
    with anyio.fail_after(60):
        await asyncio.gather(*(steady_client(url, ERAS[era], n, tally) for n in range(CLIENTS)))
    calls_in_flight = {exchange.call for exchange in in_flight if exchange.call is not None}
    print(
        f"\n{era}, {failed}: in flight on the killed replica: {len(in_flight)} requests, "
        f"{len(calls_in_flight)} of them calls; lost {len(tally.lost)} calls, "
        f"answered {len(tally.answered)} of {CLIENTS * CALLS}; "
        f"{proxy.refused} connections refused and sent on; "
        f"{tally.reconnected} clients connected again"
    )
    assert [] == tally.wrong
    assert set() == tally.answered & tally.lost
    everything = {(client, call) for client in range(CLIENTS) for call in range(CALLS)}
    assert everything == tally.answered | tally.lost
    assert calls_in_flight, "the victim was never killed"
    assert set() == tally.lost - calls_in_flight, "a call not in flight on the killed replica"
    assert len(tally.lost) <= len(in_flight)
    assert all((client, CALLS - 1) in tally.answered for client in range(CLIENTS))
    # The killed replica was passed over, not just idle.
    assert proxy.refused > 0
    assert live.processes[victim] is not None
    assert live.processes[victim].poll() is not None  # type: ignore[union-attr]


async def test_the_balancer_sends_refused_requests_on_and_answers_502_for_dropped_ones() -> None:
    """The balancer the tests rely on: a refused connection goes to the next backend,
    which is then passed over; a request its backend drops gets 502 and was in flight
    on that backend until then."""
    received = asyncio.Event()
    drop = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def hold_then_drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        received.set()
        await drop.wait()
        writer.close()

    dead = free_port()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": "add", "arguments": {"a": 3, "b": 4}}
    async with (
        await asyncio.start_server(answer, "127.0.0.1", 0) as live,
        await asyncio.start_server(hold_then_drop, "127.0.0.1", 0) as dropping,
    ):
        live_port = live.sockets[0].getsockname()[1]
        dropping_port = dropping.sockets[0].getsockname()[1]
        for ports, expected in (([dead, live_port], 200), ([dropping_port], 502)):
            balancer = Balancer(ports)
            server = await asyncio.start_server(balancer.handle, "127.0.0.1", 0)
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
            async with server, httpx.AsyncClient(timeout=10) as http:
                if expected == 200:
                    statuses = [(await http.post(url, json=body)).status_code for _ in range(3)]
                    # The dead port was tried once, then passed over on its next turn.
                    assert ([200] * 3, 1) == (statuses, balancer.refused)
                else:
                    request = asyncio.ensure_future(http.post(url, json=body))
                    await received.wait()
                    pending = balancer.pending[dropping_port]
                    assert [(3, 4)] == [exchange.call for exchange in pending]
                    drop.set()
                    response = await request
                    assert (502, set()) == (response.status_code, pending)
                server.close()
                await balancer.close()

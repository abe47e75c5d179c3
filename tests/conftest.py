"""Fixtures shared by the whole suite: the bus backends and unique names."""

from __future__ import annotations

import asyncio
import compileall
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import toolmesh
from tests.pulsar_broker import PulsarLite
from tests.rabbit import (
    RABBITMQ_URL,
    close_connection_from_broker,
    delete_test_entities,
)
from tests.rewrite_once import rewrite_test_modules
from toolmesh import Bus, connect
from toolmesh.bus.memory import new_memory_url

#: every queue and exchange a test run creates on a shared broker carries this marker
RUN_MARKER = f"tmtest{uuid.uuid4().hex[:8]}"

#: marks of tests that use a server every test process shares (a broker, a database): they run
#: one after another (tests/e2e restarts RabbitMQ; some tests count its connections)
SHARED_SERVERS = ("rabbitmq", "postgres")

# The quick loop, `python -m pytest -m "not slow"` (docs/testing.md), leaves out the tests
# marked `slow`: those that need more than Python and the test extra, and those that take
# seconds each. This hook marks a test slow when it
#   - carries one of SLOW_MARKS (a broker or the database; pulsar: a pulsar-lite the tests start),
#   - asks for one of SLOW_FIXTURES (a browser, trustgraph-cli's venv, server-everything from
#     npm, a broker by name), or
#   - lives in one of SLOW_FOLDERS (the real model).
# Modules and tests that start a third-party server themselves (the MCP Inspector,
# oidc-provider, Prometheus) carry `pytest.mark.slow` with a comment saying which; so do the
# tests measured at 2.5 s or more on an idle 2-core machine (`--durations`, docs/testing.md:
# mostly real `toolmesh serve` processes driven end to end), "seconds, measured".
SLOW_MARKS = (*SHARED_SERVERS, "pulsar")
SLOW_FIXTURES = ("page", "browser", "tg_bin", "everything", "pulsar_broker", *SHARED_SERVERS)
SLOW_FOLDERS = ("local_model",)


def _is_slow(item: pytest.Item, folder: str) -> bool:
    fixtures = getattr(item, "fixturenames", ())
    return (folder in SLOW_FOLDERS
            or any(item.get_closest_marker(m) for m in SLOW_MARKS)
            or any(f in fixtures for f in SLOW_FIXTURES))


def pytest_configure(config: pytest.Config) -> None:
    """Compile toolmesh's and the tests' modules to bytecode once, before any test starts.

    The suite starts well over a thousand Python processes (``toolmesh serve``, its parts, the
    CLI, the MCP test servers). Where ``PYTHONDONTWRITEBYTECODE`` is set, as on the CI machine,
    none of them writes the bytecode it compiles, so in a fresh clone each would compile every
    module it imports from source again: about 0.35 s of CPU more for each ``toolmesh serve``
    to be ready (0.8 s instead of 0.45 s), a third of the suite's CPU time. The flag keeps
    processes from writing; it does not keep them from reading what is compiled here.

    With pytest-xdist, the test modules' asserts are rewritten here too, for the same reason
    (tests/rewrite_once.py).
    """
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it already
        return
    root = Path(__file__).resolve().parent.parent
    package = Path(toolmesh.__file__).resolve().parent
    for folder in {package, root / "tests", root / "bench", root / "examples"}:
        if folder.is_dir():  # an installed (not editable) toolmesh: pip compiled it already
            compileall.compile_dir(folder, quiet=2, workers=0)
    if (config.getoption("numprocesses", None) or 0) > 0:  # workers will collect: for them
        rewrite_test_modules(config, root / "tests")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tests (above); and with ``-n N --dist loadgroup``, run the tests that share
    a server one after another on one worker, the real-model tests on another, the others
    spread over the rest. Without xdist the groups do nothing."""
    for item in items:
        folder = item.path.relative_to(Path(__file__).parent).parts[0]
        if _is_slow(item, folder):
            item.add_marker(pytest.mark.slow)
        if folder == "local_model":  # one model server at a time: they share the CPU
            item.add_marker(pytest.mark.xdist_group("local-model"))
        elif (any(item.get_closest_marker(m) for m in SHARED_SERVERS)
              # a test that asks for a server's fixture by name shares it too
              or any(f in getattr(item, "fixturenames", ()) for f in SHARED_SERVERS)):
            item.add_marker(pytest.mark.xdist_group("shared-servers"))
        elif not item.get_closest_marker("xdist_group") and _uses_a_module_fixture(item):
            # set up once: the module's tests on one worker
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test asks for a module- or package-scoped fixture (a served toolmesh,
    say): spread over workers, each would set it up again."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        defs and defs[-1].scope in ("module", "package") for defs in info.name2fixturedefs.values())


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` handing out the real-model group first, then the shared-servers
    group: each runs for minutes on one worker, so each must start at once, not behind groups
    that merely have more tests, or it would end the run alone."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class LongestFirst(LoadGroupScheduling):
        _ordered = False

        def _assign_work_unit(self, node: object) -> None:
            if not self._ordered:  # the first assignment: the queue is complete
                self._ordered = True
                units = sorted(self.workqueue.items(), key=lambda u: (
                    u[0] != "local-model", u[0] != "shared-servers"))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)  # type: ignore[arg-type]

    return LongestFirst(config, log)  # type: ignore[arg-type]


@dataclass
class Backend:
    """One bus backend under test: connect to it (as separate processes would) and break it."""

    name: str
    url: str
    buses: list[Bus] = field(default_factory=list)
    #: make the broker drop these buses' connections (None: the backend has no connection)
    break_connections: Callable[[Sequence[Bus]], Awaitable[None]] | None = None
    #: whether a non-persistent (request) queue keeps messages while no consumer is
    #: connected; Pulsar's non-persistent topics do not, its persistent (flow) ones do
    keeps_unconsumed_requests: bool = True

    async def connect(self) -> Bus:
        bus = await connect(self.connection_url(len(self.buses)))
        self.buses.append(bus)
        return bus

    def connection_url(self, index: int) -> str:
        """The URL for the ``index``-th connection of a test (or process)."""
        if self.name != "pulsar":
            return self.url
        # pulsar-lite keys Shared-subscription consumers by consumer id alone, so two
        # connections must not number their consumers alike (see PulsarBus._skip_consumer_ids).
        return f"{self.url}?consumer_id_offset={(index % 16) * 32}"

    def topic(self, base: str = "t") -> str:
        """A topic name no other test uses."""
        return f"{RUN_MARKER}-{base}-{uuid.uuid4().hex[:8]}"


async def _break_rabbitmq(buses: Sequence[Bus]) -> None:
    await close_connection_from_broker(
        *(bus.connection_name for bus in buses))  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def pulsar_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarLite]:
    """A pulsar-lite broker process for the whole run."""
    broker = PulsarLite(Path(tmp_path_factory.mktemp("pulsar-lite")))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def _rabbitmq_cleanup() -> Iterator[None]:
    yield
    asyncio.run(delete_test_entities(RUN_MARKER))


def _make_backend(name: str, request: pytest.FixtureRequest) -> Backend:
    if name == "memory":
        return Backend("memory", new_memory_url())
    if name == "pulsar":
        broker: PulsarLite = request.getfixturevalue("pulsar_broker")

        async def restart_broker(buses: Sequence[Bus]) -> None:
            # Every client loses its connection at once, as in a real broker restart.
            await asyncio.to_thread(broker.restart)

        return Backend("pulsar", broker.url, break_connections=restart_broker,
                       keeps_unconsumed_requests=False)
    request.getfixturevalue("_rabbitmq_cleanup")
    return Backend("rabbitmq", RABBITMQ_URL, break_connections=_break_rabbitmq)


@pytest.fixture(params=["memory", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
                        pytest.param("pulsar", marks=pytest.mark.pulsar)])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """Each test using this fixture runs once per bus backend."""
    b = _make_backend(request.param, request)
    yield b
    for bus in b.buses:
        await bus.close()


@pytest.fixture
async def rabbitmq(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """The RabbitMQ backend only (for tests of its topology)."""
    b = _make_backend("rabbitmq", request)
    yield b
    for bus in b.buses:
        await bus.close()


@pytest.fixture
async def bus(backend: Backend) -> Bus:
    """One connection to the backend under test."""
    return await backend.connect()


@pytest.fixture
async def memory() -> AsyncIterator[Backend]:
    """The memory bus only: for tests about what runs on a bus, not about the bus."""
    backend = Backend("memory", new_memory_url())
    yield backend
    for bus in backend.buses:
        await bus.close()

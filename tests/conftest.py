"""Shared fixtures."""

from __future__ import annotations

import hashlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from progressived.testing.broker import Mosquitto
from tests import subsets
from tests.budget import examples

# Tests send SIGINT to the commands they start and expect Ctrl-C's one line and status 130.
# A shell without job control (a CI runner's, a script's `cmd &`) starts a background job
# with SIGINT ignored, an ignored signal stays ignored across exec, and Python then installs
# no KeyboardInterrupt at all: the commands would ignore the tests' Ctrl-C (found when the
# suite ran in the background). The suite gives its children the terminal's default back.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Nothing in the suite judges a timing (docs/performance.md): Hypothesis's per-example
# deadline and its "generation is slow" health check would, and fail on a loaded machine
# (parallel workers, other suites) for no fault of the code. Tests' own settings inherit this.
# A property without a count of its own draws Hypothesis's default 100 at the thorough
# count (tests/budget.py: a fifth of it in the default suite).
settings.register_profile(
    "suite",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=examples(100),
)
settings.load_profile("suite")

ROOT = Path(__file__).resolve().parent.parent
PAYTABLES = ROOT / "config" / "paytables"
RULES = ROOT.parent / "shared" / "rules"


@pytest.fixture
def paytables_dir() -> Path:
    return PAYTABLES


@pytest.fixture
def mosquitto() -> Iterator[Mosquitto]:
    """A real Mosquitto on a free loopback port, stopped after the test."""
    with Mosquitto() as broker:
        yield broker


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """One real PostgreSQL server for the session (progressived/testing/postgres.py), on a
    free loopback port, stopped and removed at the end; each test takes a database of its
    own from it (``postgres_url``)."""
    from progressived.testing.postgres import server

    with server() as srv:
        yield srv


@pytest.fixture
def postgres_url(postgres_server: object) -> str:
    """A new empty database on the session's server: its URL (password from a passfile)."""
    from progressived.testing.postgres import Server

    assert isinstance(postgres_server, Server)
    return postgres_server.database()


@pytest.fixture(autouse=True)
def no_leftover_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test if a process it started still runs after its teardown (killed then).

    Autouse and function-scoped, it is set up before the test's other function fixtures and
    torn down after them: what a fixture stops in its teardown is stopped by then. Processes
    of wider-scoped fixtures (the session's PostgreSQL) exist before and are not counted."""
    from tests.processes import descendants, leftovers

    if request.node.get_closest_marker("processes_outlive") is not None:
        yield  # a wider fixture's processes restarted by this test's fixtures (HA rig)
        return
    before = set(descendants())
    yield
    left = leftovers(before)
    if left:
        pytest.fail("processes left running by this test (killed):\n" + "\n".join(left))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    subsets.mark(items)  # `-m pure`: the tests that need pip alone (tests/subsets.py)


@pytest.fixture(autouse=True)
def pure_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``pure`` test that starts a process fails, naming it (tests/subsets.py)."""
    if request.node.get_closest_marker("pure") is not None:
        subsets.refuse_processes(monkeypatch, request.node.nodeid)


# A test's id is in its node id, which pytest also puts in every child's environment
# (PYTEST_CURRENT_TEST): the 200,000 brackets of a hostile payload spelled out there made a
# session fixture's teardown fail with E2BIG ("Argument list too long") when it started
# pg_ctl right after that test. A long text or bytes parameter is named by its head, its
# length and a short digest instead.
LONGEST_SHOWN = 48


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    if not isinstance(val, str | bytes) or len(val) <= LONGEST_SHOWN:
        return None
    raw = val if isinstance(val, bytes) else val.encode()
    digest = hashlib.blake2s(raw, digest_size=3).hexdigest()
    head = raw[:24].decode("ascii", "backslashreplace")
    return f"{head}...{len(val)}-{digest}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A process that outlived every fixture (a module- or session-scoped one that did not
    stop it) fails the run."""
    from tests.processes import leftovers

    left = leftovers(())
    if left:
        session.config.stash[LEFTOVERS] = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    left = terminalreporter.config.stash.get(LEFTOVERS, [])
    if left:
        terminalreporter.write_line(
            "processes left running at the end of the session (killed):\n" + "\n".join(left),
            red=True,
        )


LEFTOVERS = pytest.StashKey[list[str]]()

"""The suite's own plumbing: a module that names an xdist_group runs on one worker, and no
test's id is long enough to break the commands a test starts.

`.ci/test` runs with `--dist loadgroup` so that a module whose module-scoped fixture is
costly (the install root, the long ledgers, the hold'em counts) builds it once. pytest 9.2
silently undid that grouping (pytest-dev/pytest-xdist#1386: the group travels in the node
id, which pytest 9.2 no longer lets a plugin rewrite), and the install root was then built
on every worker, two minutes of CPU each time. This fails if the grouping is lost again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.budget import PROPERTY_MODULES

pytestmark = pytest.mark.xdist_group("suite-groups")


def test_a_grouped_test_is_scheduled_as_its_group(request: pytest.FixtureRequest) -> None:
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("not run with --dist loadgroup (.ci/test runs with it)")
    assert request.node.nodeid.endswith("@suite-groups"), request.node.nodeid


def test_no_node_id_is_long_enough_to_break_a_childs_environment(
    request: pytest.FixtureRequest,
) -> None:
    """pytest puts the running test's node id in every child's environment
    (PYTEST_CURRENT_TEST); Linux refuses a single variable over 128 KiB (E2BIG). Ids of long
    parameters are shortened (tests/conftest.py); a few hundred characters is plenty."""
    longest = max(request.session.items, key=lambda item: len(item.nodeid))
    assert len(longest.nodeid) <= 400, longest.nodeid[:200]


def test_every_property_module_is_run_again_at_its_full_counts() -> None:
    """A module with Hypothesis properties draws a fifth of its examples here; it must be
    in the list `.ci/reliability` runs at the full counts, or nothing ever draws them."""
    tests = Path(__file__).parent
    using = {
        f"tests/{path.name}"
        for path in tests.glob("test_*.py")
        if re.search(r"^from hypothesis import", path.read_text(), re.MULTILINE)
    }
    assert using == set(PROPERTY_MODULES)
    assert (
        "tests.budget import PROPERTY_MODULES" in (tests.parent / ".ci" / "reliability").read_text()
    )

"""How many examples a Hypothesis property draws, by suite.

The default suite is run many times a day; a property there draws a fifth of its examples
(at least 25), which still finds what a changed decoder or rule breaks on its first run. The
reliability suite (`.ci/reliability`, CI's short run included) runs the same property
modules again with ``PROGRESSIVED_THOROUGH=1``: every property at its full count. A count
is written once, as the thorough one, beside the test it belongs to.
"""

from __future__ import annotations

import os

THOROUGH = os.environ.get("PROGRESSIVED_THOROUGH", "") not in ("", "0")

# The modules whose properties `.ci/reliability` runs again at their full counts.
PROPERTY_MODULES = (
    "tests/test_engine_shortcuts.py",
    "tests/test_engine_stateful.py",
    "tests/test_ledger_event_text.py",
    "tests/test_link_book.py",
    "tests/test_link_messages.py",
    "tests/test_outside_decoders.py",
    "tests/test_protocol.py",
    "tests/test_wirejson.py",
)


def examples(thorough: int) -> int:
    """The number of examples to draw: ``thorough`` in the reliability suite, a fifth of it
    (at least 25, never more than ``thorough``) in the default one."""
    if THOROUGH:
        return thorough
    return min(thorough, max(25, thorough // 5))

"""Finding a board driver plugin by the name the ``[board]`` section gives.

Drivers register a factory (:class:`progressived.board.driver.DriverFactory`) under the
``progressived.drivers`` entry-point group; listing them imports nothing, and loading one
imports only its entry point's module, so ``progressived`` never imports a driver it was not
configured with. This reads the installed distributions' metadata, which is why it lives
with the configuration loaders and not in the pure ``board`` package.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from progressived.board.driver import DriverFactory

ENTRY_POINT_GROUP = "progressived.drivers"


class DriverNotFound(LookupError):
    pass


def available_drivers() -> list[str]:
    """The installed drivers' names (nothing is imported)."""
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def load_driver_factory(name: str) -> DriverFactory:
    """Import the one driver plugin named ``name`` (only its entry point's module)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            factory: DriverFactory = ep.load()
            return factory
    known = ", ".join(available_drivers()) or "none installed"
    raise DriverNotFound(f"no board driver named {name!r} (available: {known})")

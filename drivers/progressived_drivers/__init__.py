"""Hardware drivers: adapters between the table's devices and the daemon.

Drivers depend on ``progressived``; ``progressived`` never imports a driver module: the
daemon finds a driver by name through the ``progressived.drivers`` entry-point group
(:func:`progressived.board.driver.load_driver_factory`), so a driver from another distribution
plugs in the same way.
"""

"""Hardware drivers: adapters between the table's devices and the daemon.

Drivers depend on ``progressived``; ``progressived`` never imports a driver module: the
daemon loads the configured driver through the ``progressived.drivers`` entry points.
"""

"""Hardware drivers: adapters between the table's devices and the daemon.

Drivers depend on ``progressived``; ``progressived`` never imports a driver module
directly except through the service wiring.
"""

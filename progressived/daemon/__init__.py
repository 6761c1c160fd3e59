"""The daemon, composed of small parts that only look downward.

``journal`` (decide -> append -> apply on the one ledger thread, under one lock: the only
writer) sits at the bottom; ``outputs`` (lights, meter payloads, publisher hooks),
``board_input`` (board events -> keypad -> commands), ``upkeep`` (watchdog, housekeeping,
metrics source) and ``desk`` (the operator desk's narrow port) are built on it, and
:mod:`progressived.daemon.service` composes them.
"""

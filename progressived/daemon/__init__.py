"""The daemon, composed of small parts that only look downward.

``ledger_executor`` (the one ledger thread) and ``ledger_writer`` (the one lock, commits,
system records, the ledger's health) sit at the bottom; ``journal`` (decide -> append ->
apply: the only writer of the table's state, :class:`~progressived.daemon.current.CurrentTable`)
is given them and its ``observers`` (``outputs``: lights and meter payloads; the publisher;
hits, metrics, the key-to-publish latency); ``board_input`` (board events -> keypad ->
commands), ``link`` (the link client), ``upkeep`` (watchdog, housekeeping, metrics source)
and ``desk`` (the operator desk's narrow port) submit to it. :mod:`progressived.daemon.assembly`
builds them over the open ledger and :mod:`progressived.daemon.service` runs them.
"""

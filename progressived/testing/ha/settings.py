"""The settings that make an acknowledged write survive a failover, and the timings that make
a failover take seconds: one source for the rig and for the configurations shipped under
``config/ha/`` (tests/test_ha_config.py checks that the shipped files say the same).

Why each matters (docs/ha.md, "How an acknowledged write survives"):

* ``synchronous_mode`` -- Patroni names a synchronous standby in ``synchronous_standby_names``
  and records it in the DCS (``/sync``); only a node recorded there may be promoted, so the
  new primary is one that confirmed every acknowledged commit.
* ``synchronous_mode_strict`` -- with no synchronous standby left, the primary keeps
  ``synchronous_standby_names`` set (to ``*``) instead of dropping to asynchronous: commits
  wait (no write is acknowledged that lives on one node only).
* ``synchronous_commit = on`` -- COMMIT returns once the standby has flushed the commit's WAL
  to its disk (``remote_write`` would settle for its memory, ``local`` and ``off`` for less).
* ``maximum_lag_on_failover = 0`` -- belt and braces for a non-synchronous replica.
* ``use_pg_rewind`` -- a killed old primary may hold WAL its successor never received (a
  commit that was not acknowledged); it is rewound to the new timeline and rejoins as a
  replica instead of needing a new base backup.

Timings: Patroni requires ``loop_wait + 2 * retry_timeout <= ttl``. With ``ttl`` 7 the leader
key of a lost primary expires at most 7 s after its last renewal (one per ``loop_wait``);
the synchronous standby then promotes itself within a loop. Patroni's defaults (30/10/10)
take about half a minute.
"""

from __future__ import annotations

from typing import Final

SCOPE: Final = "progressived-link"  # the cluster's name in the DCS (Patroni's ``scope``)
NAMESPACE: Final = "/service/"

TTL_S: Final = 7
LOOP_WAIT_S: Final = 1
RETRY_TIMEOUT_S: Final = 3

# bootstrap.dcs: Patroni's cluster-wide settings, written to the DCS once at bootstrap.
DCS: Final[dict[str, object]] = {
    "ttl": TTL_S,
    "loop_wait": LOOP_WAIT_S,
    "retry_timeout": RETRY_TIMEOUT_S,
    "maximum_lag_on_failover": 0,
    "synchronous_mode": True,
    "synchronous_mode_strict": True,
    "synchronous_node_count": 1,
    "postgresql": {
        "use_pg_rewind": True,
        "use_slots": True,
    },
}

# postgresql.parameters: the server's settings (each node's file).
PARAMETERS: Final[dict[str, object]] = {
    "synchronous_commit": "on",
    "wal_level": "replica",
    "wal_log_hints": "on",  # pg_rewind needs it (or data checksums)
    "hot_standby": "on",
    "max_wal_senders": 10,
    "max_replication_slots": 10,
    "wal_keep_size": "128MB",
    "fsync": "on",
    "full_page_writes": "on",
    "max_connections": 100,
    # A standby whose primary is gone retries (the new one, once Patroni names it) after
    # this, not PostgreSQL's default 5 s: strict mode commits nothing until it streams.
    "wal_retrieve_retry_interval": "500ms",
    # A standby lost without closing its connection (power, network) is dropped after this,
    # not PostgreSQL's default 60 s: until then the primary's commits wait for it.
    "wal_sender_timeout": "10s",
    "wal_receiver_timeout": "10s",
}

# Roles Patroni uses (their passwords are each site's own; the rig makes random ones).
SUPERUSER: Final = "postgres"
REPLICATION_USER: Final = "replicator"
REWIND_USER: Final = "rewinder"

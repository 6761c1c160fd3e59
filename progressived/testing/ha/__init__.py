"""A highly available link ledger database on one machine, for tests, the demo and the bench:
3 etcd members and 2-3 Patroni/PostgreSQL nodes on loopback ports, replicated synchronously
(docs/ha.md). ``with database_cluster() as db:`` gives :class:`DatabaseCluster`.
"""

from progressived.testing.ha import settings
from progressived.testing.ha.cluster import (
    ClusterTimeout,
    DatabaseCluster,
    database_cluster,
    rig_available,
)
from progressived.testing.ha.patroni import PatroniNode

__all__ = [
    "ClusterTimeout",
    "DatabaseCluster",
    "PatroniNode",
    "database_cluster",
    "rig_available",
    "settings",
]

"""The storage port and its adapters: where a ledger's rows live (SQLite or PostgreSQL).

See :mod:`progressived.storage.port`. This package stores and reads rows; what they mean
(the engine's events, the link's book) is the ledgers' (``progressived.ledger``,
``progressived.link.store``), and the import-linter contract ``storage-rows`` keeps it so.
"""

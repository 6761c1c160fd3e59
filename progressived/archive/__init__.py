"""The archive: every table's ledger off its board, into the floor's PostgreSQL (docs/archive.md).

* :mod:`progressived.archive.core` -- pure: the wire messages and the hash-chain check of
  rows as they arrive;
* :mod:`progressived.archive.store` -- the archive's database (PostgreSQL, on the storage
  port's adapter) and the restore of a table's ledger file from it;
* :mod:`progressived.archive.feed` -- the table's side: its journal sent to the archive
  after the archived head, the lag it reports;
* :mod:`progressived.archive.service` -- ``progressived archive``, the process.
"""

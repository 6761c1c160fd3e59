"""The archive's database and the restore of a table's ledger from it."""

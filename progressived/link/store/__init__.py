"""The link ledger: its file, audit, reports and the reconciliation with table ledgers.
"""

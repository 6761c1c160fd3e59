"""The link's pure part: messages, the link book, batches, rows and snapshots.

No I/O, no clock (docs/link.md).
"""

"""The archive's pure core: messages and the chain check (no I/O, no clock)."""

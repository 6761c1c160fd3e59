"""Sequence-number arithmetic of protocol v1 (docs/protocol.md, "Sequence numbers").

Why a module of its own: both ends of the line judge duplicates, reordering and gaps
by this one rule, and it is the rule a board maker most often gets wrong at wrap-around.
"""

from __future__ import annotations

from progressived_drivers.protocol.framing import SEQ_MOD


def seq_diff(new: int, old: int) -> int:
    """``new - old`` in 16-bit serial-number arithmetic (RFC 1982): -32768..32767."""
    d = (new - old) % SEQ_MOD
    return d - SEQ_MOD if d >= SEQ_MOD // 2 else d

"""Exact PAR sheets: hand probabilities counted from the deck, return, break-even, envy, hold.

Every probability here is a :class:`fractions.Fraction` computed from a 52-card deck, each
in two independent ways (enumeration and closed-form counting), never typed in. See
``docs/par.md`` for the mathematics.
"""

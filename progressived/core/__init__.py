"""The pure domain: money, the engine's parameters and the paytable's model.

No I/O, no clock; everything above builds on these.
"""

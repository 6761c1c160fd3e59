"""``progressived demo``: one table, or a linked meter across several tables, on this machine.
"""

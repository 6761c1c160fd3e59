"""Reports made from the ledgers for accounting and the regulator (docs/reports.md).

``progressivectl report liability``: the progressive liability over a shift, a gaming day,
a quarter or any two local times, per meter, per table and in total, reconciled to the
unit, with its plots, as text, JSON, CSV, HTML and PDF. It reads table and link ledgers
(read-only) and the ``[site]`` section of a configuration file; it writes nothing else.
"""

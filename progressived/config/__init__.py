"""Configuration files in, validated configuration out: the daemon's file, the
``[table]``/``[progressive]`` sections, the paytable files and the ``[keypad]`` map.
"""

"""Test doubles and the end-to-end rig, importable by anyone testing against progressived.

The project's own tests, its benchmarks and ``progressived demo`` share these instead of
each keeping a copy; a board maker or an integrator can use them for their own tests:

- :mod:`progressived.testing.config` writes a daemon configuration (TOML) for a table on
  this machine;
- :mod:`progressived.testing.board` finds the board simulator on a pty through its entry
  point (progressived never imports ``drivers`` itself);
- :mod:`progressived.testing.subscriber` is an independent sign: an MQTT subscriber that
  records, timestamps and checks every message;
- :mod:`progressived.testing.rig` puts them together with a real Mosquitto and the daemon
  as a real process (after ``progressived init``).

Nothing here imports a test framework.
"""

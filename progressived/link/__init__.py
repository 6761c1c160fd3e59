"""The linked progressive: one meter fed by many tables, owned by a link controller.

``messages`` is the wire protocol (typed messages, strict JSON, MQTT topics); ``book`` is
the pure linked-meter book (commands in, events out; no I/O, no clock). See docs/link.md.
"""

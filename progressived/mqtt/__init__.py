"""MQTT adapter: topics and payloads for the meter signs, the outbox publisher, and the one
broker session every client uses (``session.py``) with the floor's ACL (``acl.py``)."""

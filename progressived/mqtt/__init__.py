"""MQTT adapter: topics and payloads for the meter signs, and the outbox publisher."""

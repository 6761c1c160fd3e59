"""The web meter sign: ``progressivectl sign --web`` (docs/sign.md).

:mod:`.model` is pure (MQTT messages in, a JSON-able picture of the floor out);
:mod:`.server` subscribes to the broker and pushes that picture to browsers over
server-sent events; ``static/`` holds the page, its style and its script (no CDN, no
external fonts: a sign on a casino floor has no internet).
"""

DEFAULT_PORT = 8090  # ``progressivectl sign --web`` listens on 127.0.0.1:8090 unless told

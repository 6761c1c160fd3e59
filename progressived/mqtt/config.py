"""The ``[mqtt]`` configuration section."""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class MqttTlsSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ca_certs: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    insecure: bool = False


class MqttSection(BaseModel):
    """How the daemon reaches the broker that feeds the meter signs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=1883, ge=1, le=65535)
    prefix: str = Field(default="progressive", pattern=r"^[A-Za-z0-9_\-]+(/[A-Za-z0-9_\-]+)*$")
    client_id: str | None = None
    username: str | None = None
    password: str | None = None
    password_file: Path | None = None
    tls: MqttTlsSection | None = None
    keepalive_s: int = Field(default=15, ge=5, le=600)
    meter_max_rate_hz: float = Field(default=4.0, gt=0, le=100)
    reconnect_initial_s: float = Field(default=0.5, gt=0, le=60)
    reconnect_max_s: float = Field(default=30.0, gt=0, le=600)
    publish_timeout_s: float = Field(default=10.0, gt=0, le=300)

    def resolved_password(self) -> str | None:
        if self.password_file is not None:
            return self.password_file.read_text().strip()
        return self.password


# Every MQTT socket of the product turns Nagle's algorithm off: a reply or a meter published
# while the previous packet is unacknowledged would otherwise wait for the peer's delayed
# ACK (about 40 ms on Linux), twice per request and answer (docs/performance.md, "The link").
NO_DELAY: list[tuple[int, int, int]] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

"""The ``[mqtt]`` configuration section."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from progressived.mqtt.client import NO_DELAY, BrokerOptions, TlsOptions, broker_address
from progressived.runtime.config_files import StrictModel, read_password_file

__all__ = ["NO_DELAY", "MqttSection", "MqttTlsSection", "broker_address"]


class MqttTlsSection(StrictModel):
    ca_certs: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    insecure: bool = False


class MqttSection(StrictModel):
    """How the daemon reaches the broker that feeds the meter signs."""

    host: str = "127.0.0.1"
    port: int = Field(default=1883, ge=1, le=65535)
    # Two brokers or more (docs/mqtt.md, "Two brokers"): "host:port" (or "host", port
    # ``port``), tried in this order; instead of ``host``.
    hosts: list[str] | None = Field(default=None, min_length=1, max_length=8)
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

    @model_validator(mode="after")
    def _hosts_or_host(self) -> MqttSection:
        if self.hosts is None:
            return self
        if "host" in self.model_fields_set:
            raise ValueError("give host (one broker) or hosts (a list), not both")
        endpoints = [broker_address(text, self.port) for text in self.hosts]
        if len(set(endpoints)) != len(endpoints):
            raise ValueError("hosts lists a broker twice")
        return self

    def endpoints(self) -> tuple[tuple[str, int], ...]:
        """Every broker as (host, port), in order: ``hosts``, else ``host``/``port``."""
        if self.hosts is None:
            return ((self.host, self.port),)
        return tuple(broker_address(text, self.port) for text in self.hosts)

    def resolved_password(self) -> str | None:
        """``password``, or the one in ``password_file`` (read now: docs/configuration.md,
        "Password files"; :class:`~progressived.runtime.config_files.PasswordFileError`)."""
        if self.password_file is not None:
            return read_password_file(self.password_file)
        return self.password

    def broker_options(
        self,
        default_client_id: str,
        *,
        default_username: str | None = None,
        max_inflight: int | None = None,
        max_queued_incoming: int | None = None,
        broker: tuple[str, int] | None = None,
    ) -> BrokerOptions:
        """This section as one session's options (the password file read now): every
        broker of the list, moved through in turn, or only ``broker`` (the link controller
        keeps one session per broker).

        The client id is ``client_id`` if set, else the user name (docs/mqtt.md, "Accounts
        and client ids": the documented broker binds the client id to the user name), else
        ``default_client_id`` (an anonymous broker, e.g. the demo's).
        """
        username = self.username or default_username
        tls = self.tls
        (host, port), *rest = (broker,) if broker is not None else self.endpoints()
        return BrokerOptions(
            host=host,
            port=port,
            fallbacks=tuple(rest),
            client_id=self.client_id or username or default_client_id,
            username=username,
            password=self.resolved_password(),
            tls=None
            if tls is None
            else TlsOptions(tls.ca_certs, tls.certfile, tls.keyfile, tls.insecure),
            keepalive_s=self.keepalive_s,
            publish_timeout_s=self.publish_timeout_s,
            reconnect_initial_s=self.reconnect_initial_s,
            reconnect_max_s=self.reconnect_max_s,
            max_inflight=max_inflight,
            max_queued_incoming=max_queued_incoming,
        )

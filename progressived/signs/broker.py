"""How a sign logs in to the broker, and what a failed login means.

docs/mqtt.md's Mosquitto configuration refuses anonymous clients, so a sign needs a user
name, a password (read from a file or the environment so that it does not show in ``ps``)
and, on a TLS listener, a CA. A refused login will not fix itself and is reported
distinctly from a broker that cannot be reached, which is retried.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import aiomqtt
from paho.mqtt.reasoncodes import ReasonCode

PASSWORD_ENV = "PROGRESSIVE_SIGN_PASSWORD"

# Exit statuses of ``progressivectl sign`` (docs/mqtt.md).
EXIT_OK = 0
EXIT_USAGE = 2  # bad arguments, unreadable password or TLS file
EXIT_NOT_AUTHORISED = 3  # the broker refused the login or a subscription

# CONNACK codes meaning "who you are is not allowed": MQTT 3.1.1 (4, 5) and 5.0 (134, 135).
_NOT_AUTHORISED_CODES = frozenset({4, 5, 134, 135})


class LoginError(ValueError):
    """A sign's login options cannot be used (one line for the operator)."""


class NotAuthorised(Exception):
    """The broker refused this sign: wrong credentials or the ACL denies it."""


@dataclass(frozen=True, slots=True)
class BrokerLogin:
    """Where the broker is and how this sign logs in."""

    host: str = "127.0.0.1"
    port: int = 1883
    username: str | None = None
    password: str | None = None
    tls: bool = False
    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    tls_insecure: bool = False

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"

    def client(self, keepalive: int = 60, timeout: float | None = None) -> aiomqtt.Client:
        """A fresh client for one connection attempt (``keepalive``: seconds between pings;
        a broker that answers none within about two of them counts as gone)."""
        tls_params = None
        if self.tls:
            tls_params = aiomqtt.TLSParameters(
                ca_certs=str(self.cafile) if self.cafile else None,
                certfile=str(self.certfile) if self.certfile else None,
                keyfile=str(self.keyfile) if self.keyfile else None,
                cert_reqs=ssl.CERT_REQUIRED,
            )
        return aiomqtt.Client(
            self.host,
            self.port,
            identifier=None,
            username=self.username,
            password=self.password,
            tls_params=tls_params,
            tls_insecure=self.tls_insecure if self.tls else None,
            keepalive=keepalive,
            timeout=timeout,
        )


def resolve_password(
    password: str | None, password_file: Path | None, env: dict[str, str] | None = None
) -> str | None:
    """The password from ``--password-file``, else ``--password``, else the environment."""
    env = dict(os.environ) if env is None else env
    if password_file is not None:
        try:
            return password_file.read_text().strip()
        except OSError as exc:
            raise LoginError(
                f"cannot read the password file {password_file}: {exc.strerror}"
            ) from None
    if password is not None:
        return password
    return env.get(PASSWORD_ENV) or None


def check_tls_files(login: BrokerLogin) -> None:
    """Name a missing CA/certificate/key file before trying to connect."""
    for what, path in (
        ("CA", login.cafile),
        ("certificate", login.certfile),
        ("key", login.keyfile),
    ):
        if path is not None and not path.is_file():
            raise LoginError(f"TLS {what} file {path} does not exist")


def not_authorised(exc: aiomqtt.MqttError) -> bool:
    """Whether a failed connection was the broker refusing who we are."""
    if isinstance(exc, aiomqtt.MqttCodeError):
        rc = exc.rc
        code = rc.value if isinstance(rc, ReasonCode) else rc
        return code in _NOT_AUTHORISED_CODES
    return False


def why_unreachable(exc: aiomqtt.MqttError) -> str:
    """A short reason for a failed connection (connection refused, TLS, timeout...)."""
    text = str(exc).strip()
    return text or type(exc).__name__

"""How a sign logs in to the broker, and what a failed login means.

docs/mqtt.md's Mosquitto configuration refuses anonymous clients, so a sign needs a user
name, a password (read from a file or the environment so that it does not show in ``ps``)
and, on a TLS listener, a CA. A refused login will not fix itself and is reported
distinctly from a broker that cannot be reached, which is retried.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from progressived.mqtt.client import BrokerOptions, TlsOptions, describe, login_refused
from progressived.mqtt.session import NotAuthorised
from progressived.runtime.config_files import PasswordFileError, read_password_file

__all__ = [
    "EXIT_NOT_AUTHORISED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PASSWORD_ENV",
    "SIGN_RECONNECT_MAX_S",
    "BrokerLogin",
    "LoginError",
    "NotAuthorised",
    "check_tls_files",
    "not_authorised",
    "resolve_password",
    "why_unreachable",
]

PASSWORD_ENV = "PROGRESSIVE_SIGN_PASSWORD"

# Exit statuses of ``progressivectl sign`` (docs/mqtt.md).
EXIT_OK = 0
EXIT_USAGE = 2  # bad arguments, unreadable password or TLS file
EXIT_NOT_AUTHORISED = 3  # the broker refused the login or a subscription

# A sign retries an unreachable broker from its ``reconnect_s`` (1 s) backing off to this,
# jittered like every product client: a floor of signs does not come back in lockstep.
SIGN_RECONNECT_MAX_S = 30.0

not_authorised = login_refused  # whether a failed connection was the broker refusing us
why_unreachable = describe  # a short reason for a failed connection


class LoginError(ValueError):
    """A sign's login options cannot be used (one line for the operator)."""


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
    fallbacks: tuple[tuple[str, int], ...] = ()  # more brokers, moved to in turn (--broker)

    @property
    def url(self) -> str:
        more = "".join(f",{h}:{p}" for h, p in self.fallbacks)
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}{more}"

    def options(
        self, *, keepalive_s: int = 60, timeout_s: float = 10.0, reconnect_s: float = 1.0
    ) -> BrokerOptions:
        """This login as a session's options. The client id is the user name (one account
        per sign process, docs/mqtt.md); an anonymous sign lets the broker pick one.
        ``keepalive_s``: seconds between pings (a silent broker is given up about one more
        keepalive later)."""
        tls = TlsOptions(self.cafile, self.certfile, self.keyfile, self.tls_insecure)
        return BrokerOptions(
            host=self.host,
            port=self.port,
            client_id=self.username,
            username=self.username,
            password=self.password,
            tls=tls if self.tls else None,
            keepalive_s=keepalive_s,
            publish_timeout_s=timeout_s,
            reconnect_initial_s=reconnect_s,
            reconnect_max_s=max(reconnect_s, SIGN_RECONNECT_MAX_S),
            fallbacks=self.fallbacks,
        )


def resolve_password(
    password: str | None, password_file: Path | None, env: dict[str, str] | None = None
) -> str | None:
    """The password from ``--password-file``, else ``--password``, else the environment."""
    env = dict(os.environ) if env is None else env
    if password_file is not None:
        try:
            return read_password_file(password_file)
        except PasswordFileError as exc:
            raise LoginError(str(exc)) from None
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

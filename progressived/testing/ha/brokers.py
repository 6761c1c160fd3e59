"""A broker of the HA rig: Mosquitto on a loopback port with docs/mqtt.md's settings, a
password per account and the floor's ACL as ``progressivectl broker-acl`` writes it.

Why not the plain :class:`~progressived.testing.broker.Mosquitto`: it is anonymous, so a
table could speak for another and a second controller's session would not be told from the
first's; the HA rig must show the link surviving with the accounts it runs with on a floor.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

from progressived.mqtt.acl import LinkAccounts, floor_acl
from progressived.testing.broker import Mosquitto, find_mosquitto, wait_for_port

PREFIX = "progressive"


def accounts_for(link: str, tables: Sequence[str], signs: Sequence[str]) -> dict[str, str]:
    """A new random password for each account: every table, the link (user name = link id)
    and every sign."""
    return {name: secrets.token_urlsafe(12) for name in [*tables, link, *signs]}


def acl_for(link: str, tables: Sequence[str], signs: Sequence[str]) -> str:
    """The floor's ACL for one link over ``tables`` (docs/mqtt.md, docs/link.md)."""
    return floor_acl(PREFIX, [LinkAccounts(link, link, tuple(tables))], list(signs))


@dataclass
class AclBroker(Mosquitto):
    """Mosquitto with ``allow_anonymous false``, a password file of ``accounts``, ``acl``,
    the client id bound to the user name, persistence on; restartable on the same port."""

    accounts: dict[str, str] = field(default_factory=dict)
    acl: str = ""

    def start(self) -> AclBroker:
        binary = self.binary or find_mosquitto()
        if binary is None:
            raise FileNotFoundError("mosquitto (Debian: apt-get install mosquitto)")
        self.binary = binary
        self.workdir.chmod(0o777)  # started as root, Mosquitto drops to its own user
        passwd, acl = self.workdir / "passwd", self.workdir / "progressive.acl"
        if not passwd.exists():
            passwd.touch()
            for user, password in self.accounts.items():
                subprocess.run(
                    ["mosquitto_passwd", "-b", str(passwd), user, password],
                    check=True,
                    capture_output=True,
                )
            acl.write_text(self.acl)
            passwd.chmod(0o600)
            if os.geteuid() == 0:
                for path in (passwd, acl):
                    shutil.chown(path, "mosquitto", "mosquitto")
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(
            f"listener {self.port} {self.host}\n"
            "allow_anonymous false\n"
            f"password_file {passwd}\n"
            f"acl_file {acl}\n"
            "use_username_as_clientid true\n"
            "set_tcp_nodelay true\n"
            "persistence true\n"
            f"persistence_location {self.workdir}/\n"
            f"log_dest file {self.workdir / 'mosquitto.log'}\n"
        )
        self.proc = subprocess.Popen(
            [binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.host, self.port)
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL (the broker's machine is lost): sessions end without a word."""
        self.stop(signal.SIGKILL)

    @property
    def address(self) -> str:
        """``host:port``, as ``[mqtt] hosts`` lists it."""
        return f"{self.host}:{self.port}"

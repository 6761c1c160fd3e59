"""A real Mosquitto configured exactly as docs/mqtt.md says: its conf, ACL and accounts.

The conf, ACL and ``mosquitto_passwd`` blocks are read from the doc; only the listener
(a free loopback port) and the file locations (the broker's work directory) differ, and
``persistence_location`` (which Debian's main mosquitto.conf sets) is added.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from progressived.testing.broker import Mosquitto, wait_for_port
from tests.mqtt_schemas import MQTT_DOC

# The doc's accounts (the shipped link's tables uth-01 and uth-02, link-a, a sign) and two
# tables on no link (the pattern alone covers them: tcp-07 is config/progressived.toml's).
PASSWORDS = {
    "uth-01": "pw-uth-01",
    "uth-02": "pw-uth-02",
    "tcp-07": "pw-tcp-07",
    "tcp-08": "pw-tcp-08",
    "link-a": "pw-link-a",
    "sign-lobby": "pw-sign-lobby",
}


def doc_block(after: str) -> str:
    """The fenced block that follows the line naming ``after`` in docs/mqtt.md."""
    text = MQTT_DOC.read_text()
    match = re.search(re.escape(after) + r".*?\n```\n(.*?)```", text, flags=re.DOTALL)
    assert match, f"docs/mqtt.md has no block after {after!r}"
    return match.group(1)


def doc_accounts() -> list[str]:
    """The user names the doc's ``mosquitto_passwd`` commands create."""
    users = []
    for line in doc_block("`/etc/mosquitto/passwd`").splitlines():
        words = shlex.split(line)
        if words and words[0] == "mosquitto_passwd":
            users.append(words[-1])
    return users


@dataclass
class DocBroker(Mosquitto):
    """Mosquitto with the doc's settings, ACL file and password file.

    ``accounts`` are the accounts made (the doc's by default); ``acl`` replaces the doc's ACL
    (e.g. one written by ``progressivectl broker-acl`` for other tables).
    """

    accounts: dict[str, str] = field(default_factory=lambda: dict(PASSWORDS))
    acl: str | None = None
    tls: bool = False  # a TLS listener with a private CA (``ca``), made in the work directory

    @property
    def ca(self) -> Path:
        return self.workdir / "ca.crt"

    @property
    def log_path(self) -> Path:
        return self.workdir / "mosquitto.log"

    def warnings(self) -> list[str]:
        """The lines of Mosquitto's log that warn or report an error."""
        text = self.log_path.read_text() if self.log_path.exists() else ""
        return [line for line in text.splitlines() if "Warning" in line or "Error" in line]

    def _listener(self) -> str:
        line = f"listener {self.port} {self.host}"
        if self.tls:
            if not self.ca.exists():
                make_certificates(self.workdir)
            cert, key = self.workdir / "server.crt", self.workdir / "server.key"
            line += f"\ncafile {self.ca}\ncertfile {cert}\nkeyfile {key}"
        return line

    def start(self) -> DocBroker:
        self.binary = self.binary or shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self.workdir.chmod(0o777)
        passwd = self.workdir / "passwd"
        acl = self.workdir / "progressive.acl"
        if not passwd.exists():
            passwd.touch()
            for user, password in self.accounts.items():
                subprocess.run(
                    ["mosquitto_passwd", "-b", str(passwd), user, password],
                    check=True,
                    capture_output=True,
                )
            acl.write_text(self.acl or doc_block("`/etc/mosquitto/progressive.acl`"))
            shutil.chown(passwd, "mosquitto", "mosquitto")
            passwd.chmod(0o600)
            shutil.chown(acl, "mosquitto", "mosquitto")
        # The doc's listeners (the floor address, loopback) become one on this test's port.
        conf_lines: list[str] = []
        for line in doc_block("`/etc/mosquitto/conf.d/progressive.conf`").splitlines():
            if line.startswith("listener "):
                if not any(c.startswith("listener ") for c in conf_lines):
                    conf_lines.append(self._listener())
                continue
            conf_lines.append(
                line.replace("/etc/mosquitto/passwd", str(passwd)).replace(
                    "/etc/mosquitto/progressive.acl", str(acl)
                )
            )
        # What Debian's own mosquitto.conf adds (the doc's persistence goes there), and the log.
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(
            "\n".join(conf_lines)
            + f"\npersistence_location {self.workdir}/\nlog_dest file {self.log_path}\n"
        )
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.host, self.port)
        return self


def make_certificates(where: Path) -> tuple[Path, Path, Path]:
    """A private CA and a server certificate for 127.0.0.1 (openssl), for TLS tests."""
    ca_key, ca, key, csr, cert = (
        where / n for n in ("ca.key", "ca.crt", "server.key", "server.csr", "server.crt")
    )

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=progressived test CA",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    ext = where / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(ext),
        "-out",
        str(cert),
    )
    for path in (ca, cert, key):
        path.chmod(0o644)
        shutil.chown(path, "mosquitto", "mosquitto")
    return ca, cert, key

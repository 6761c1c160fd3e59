"""A temporary Debian 12 root to run docs/operations.md's install blocks in, verbatim.

The blocks say ``/etc``, ``/opt``, ``/var/lib`` and ``runuser -u progressived``: rewriting
their paths would test another text, and ``runuser`` needs the user the blocks create. So the
blocks run unchanged as root inside a ``chroot`` whose ``/etc`` is a copy of this machine's
(without any progressived user or group: a fresh machine), whose ``/usr`` is this machine's,
read-only (Python, systemd's tools, Mosquitto), and whose ``/opt``, ``/var``, ``/usr/local``
and ``/run`` are its own. The chroot lives in its own mount, network and PID namespaces
(``unshare``): its mounts are invisible outside, its loopback is its own (so the documented
port 1883 is free there, and nothing reaches this machine's services), and killing the
namespace's first process kills everything started in it. Its ``/proc`` is mounted
``hidepid=invisible``, as the units' ``ProtectProc=invisible`` mounts it for the daemons.

What the root does not have, the test says so (docs/operations.md names the lines it does not
run): a systemd manager (``systemctl``), a udev daemon, ``apt-get`` (Mosquitto's package
files are laid down as Debian's package leaves them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from progressived.testing.waits import until_sync

# What a fresh root's environment is: root's login PATH, the operator's scripted editor first.
PATH = "/root/operator-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# pip installs from the wheels the test built (no network from the root's own loopback).
PIP_ENV = {
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": "/root/wheels",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}
FRESH_NAMES = ("progressived", "progressive-ops")  # never on a machine before the install

# Debian 12's /etc/mosquitto/mosquitto.conf as the mosquitto 2.0.11-1.2+deb12u2 package
# ships it (this machine's may have been edited): it reads every conf.d/*.conf.
DEBIAN_MOSQUITTO_CONF = """\
# Place your local configuration in /etc/mosquitto/conf.d/
#
# A full description of the configuration file is at
# /usr/share/doc/mosquitto/examples/mosquitto.conf.example

pid_file /run/mosquitto/mosquitto.pid

persistence true
persistence_location /var/lib/mosquitto/

log_dest file /var/log/mosquitto/mosquitto.log

include_dir /etc/mosquitto/conf.d
"""

_SETUP = """
set -e
root=$1 usr_local=$2
mount --bind /usr "$root/usr"
mount -o remount,bind,ro "$root/usr"
mount --bind "$usr_local" "$root/usr/local"
# hidepid=invisible: what the units' ProtectProc=invisible makes of /proc for the daemons
# (another user's processes are not there at all), so a check that reads a caller's
# /proc/<pid> fails here as under systemd.
mount -t proc -o hidepid=invisible proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
ip link set lo up
echo ready
exec chroot "$root" sleep infinity
"""


@dataclass
class Ran:
    """One script run in the root: its exit status and its output (with the ``-x`` trace)."""

    script: str
    returncode: int
    output: str

    def __str__(self) -> str:
        return f"exit {self.returncode}\n--- script\n{self.script}\n--- output\n{self.output}"


@dataclass
class InstallRoot:
    """The root's directory on this machine (``path``) and its namespaces' first process."""

    base: Path
    path: Path = field(init=False)
    unshare: subprocess.Popen[str] | None = None
    init_pid: int = 0

    def __post_init__(self) -> None:
        self.path = self.base / "root"

    def host(self, inside: str) -> Path:
        """The host's path of a path inside the root (its /usr/local is mounted from beside it)."""
        if inside.startswith("/usr/local/"):
            return self.base / "usr-local" / inside.removeprefix("/usr/local/")
        return self.path / inside.lstrip("/")

    def command(self, *argv: str, env: dict[str, str] | None = None) -> list[str]:
        """``argv`` run as root inside the root, with a fresh login environment."""
        fresh = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", **PIP_ENV}
        fresh.update(env or {})
        return [
            *("nsenter", "--target", str(self.init_pid), "--mount", "--net", "--pid"),
            *("chroot", str(self.path), "env", "-i"),
            *(f"{k}={v}" for k, v in fresh.items()),
            *argv,
        ]

    def bash(self, script: str, *, cwd: str = "/root/release", timeout: float = 300) -> Ran:
        """``script`` run by bash -e -x inside the root, from ``cwd``."""
        full = f"set -e -o pipefail -x\ncd {cwd}\n{script}"
        done = subprocess.run(
            self.command("bash", "-c", full),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Ran(script, done.returncode, done.stdout)

    def spawn(self, script: str, log: Path, *, cwd: str = "/root/release") -> subprocess.Popen[str]:
        """``script`` started in the background in its own process group, output to ``log``."""
        full = f"set -e -o pipefail -x\ncd {cwd}\n{script}"
        with log.open("w") as out:
            return subprocess.Popen(
                self.command("bash", "-c", full),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )

    def processes(self) -> list[int]:
        """Host pids of the processes whose root directory is this root."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(entry / "root") == str(self.path):
                        found.append(int(entry.name))
        return found


def _fresh_etc(root: Path) -> None:
    """This machine's /etc without the install's users and groups, with Debian's Mosquitto."""
    subprocess.run(["cp", "-a", "/etc", str(root / "etc")], check=True)  # owners too
    for name in ("passwd", "group", "shadow", "gshadow"):
        path = root / "etc" / name
        if path.exists():
            kept = [
                line
                for line in path.read_text().splitlines(keepends=True)
                if line.split(":", 1)[0] not in FRESH_NAMES
            ]
            path.write_text("".join(kept))
    for leftover in ("progressived", "sysusers.d/progressived.conf"):
        target = root / "etc" / leftover
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    mosquitto = root / "etc" / "mosquitto"
    if mosquitto.exists():
        shutil.rmtree(mosquitto)
    (mosquitto / "conf.d").mkdir(parents=True)
    (mosquitto / "mosquitto.conf").write_text(DEBIAN_MOSQUITTO_CONF)
    (mosquitto / "conf.d" / "README").write_text(
        "Any files placed in this directory that have a .conf ending will be loaded as\n"
        "config files by the broker. Use this to make your local config.\n"
    )
    for state in ("var/lib/mosquitto", "var/log/mosquitto"):  # the package's postinst
        (root / state).mkdir(parents=True)
        shutil.chown(root / state, "mosquitto", "mosquitto")


def _skeleton(root: Path, usr_local: Path) -> None:
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    for link in ("bin", "lib", "lib64", "sbin"):
        (root / link).symlink_to(f"usr/{link}")
    for folder in (
        *("usr", "proc", "dev", "run", "tmp", "opt", "srv", "home", "var/tmp", "var/backups"),
    ):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "root").mkdir(mode=0o700)
    for folder in ("bin", "etc", "games", "include", "lib", "man", "sbin", "share", "src"):
        (usr_local / folder).mkdir(parents=True)


@contextlib.contextmanager
def install_root(release: Path, wheels: Path, operator_bin: Path) -> Iterator[InstallRoot]:
    """A fresh root holding ``release`` (wheel, systemd/, config/, docs/) in /root/release.

    At exit every process started in it is killed and the directory removed.
    """
    base = Path(tempfile.mkdtemp(prefix="progressived-install-"))
    root = InstallRoot(base)
    try:
        usr_local = base / "usr-local"
        _skeleton(root.path, usr_local)
        _fresh_etc(root.path)
        shutil.copytree(release, root.path / "root" / "release")
        shutil.copytree(wheels, root.path / "root" / "wheels")
        shutil.copytree(operator_bin, root.path / "root" / "operator-bin")
        root.unshare = subprocess.Popen(
            [
                *("unshare", "--mount", "--net", "--pid", "--fork", "--propagation", "private"),
                *("bash", "-c", _SETUP, "setup", str(root.path), str(usr_local)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert root.unshare.stdout is not None
        line = root.unshare.stdout.readline()  # the namespaces are ready
        if line.strip() != "ready":
            root.unshare.kill()
            _, err = root.unshare.communicate(timeout=30)
            raise RuntimeError(f"cannot make the test root (needs root and unshare): {err}")
        children = Path(f"/proc/{root.unshare.pid}/task/{root.unshare.pid}/children")
        root.init_pid = int(children.read_text().split()[0])
        yield root
    finally:
        _stop(root)
        shutil.rmtree(base, ignore_errors=True)


def _stop(root: InstallRoot) -> None:
    """Kill the PID namespace's first process: the kernel kills every process in it."""
    if root.init_pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(root.init_pid, signal.SIGKILL)
    if root.unshare is not None:
        root.unshare.wait(timeout=30)
        # the kernel reaps the namespace's processes
        until_sync(lambda: not root.processes(), "the namespace's processes reaped", 30, every=0.1)

"""systemd/progressived-sign.service: the web sign server as a service, with the table unit's
hardening bar checked by real tools (``systemd-analyze verify`` printing nothing,
``security --offline=yes`` <= 2.0), its own user from the sysusers file, and its password
convention (a credential file, never the command line) run for real: the unit's own
command line, expanded as systemd expands it, logs in to a Mosquitto set up as
docs/mqtt.md says and serves the page.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from progressived.testing.broker import free_port
from progressived.testing.waits import until_sync
from tests.doc_broker import PASSWORDS, DocBroker
from tests.test_systemd_unit import (
    MAX_EXPOSURE,
    ROOT,
    SYSUSERS,
    allowed_syscalls,
    exposure,
    parse_unit,
    run,
    service,
    verify,
)

UNIT = ROOT / "systemd" / "progressived-sign.service"
INSTALLED = "/opt/progressived/bin/progressivectl"
CREDENTIAL = "/etc/progressived/sign-mqtt-password"

# System calls of `progressivectl sign --web` and its threads (strace -f): start, a broker
# session, pages, a static file and an event stream served, a message pushed, SIGTERM.
SIGN_SYSCALLS = [
    "accept4", "access", "arch_prctl", "bind", "brk", "clone3", "close", "connect",
    "epoll_create1", "epoll_ctl", "epoll_wait", "execve", "exit", "exit_group", "fcntl",
    "futex", "getcwd", "getdents64", "getpid", "getrandom", "getsockname", "getsockopt",
    "gettid", "ioctl", "listen", "lseek", "madvise", "mmap", "mprotect", "mremap", "munmap",
    "newfstatat", "openat", "poll", "pread64", "prlimit64", "read", "readlink", "recvfrom",
    "rseq", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sendfile", "sendto",
    "set_robust_list", "set_tid_address", "setsockopt", "socket", "socketpair", "sysinfo",
    "uname", "write",
]  # fmt: skip


def sign_service() -> dict[str, list[str]]:
    return parse_unit(UNIT.read_text())["Service"]


def verifiable_copy(tmp_path: Path, text: str) -> Path:
    exe = Path(sys.executable).parent / "progressivectl"
    assert exe.is_file()
    copy = tmp_path / "progressived-sign.service"
    copy.write_text(text.replace(f"={INSTALLED} ", f"={exe} "))
    return copy


def test_verify_prints_nothing_and_would_catch_a_typo(tmp_path: Path) -> None:
    assert verify(verifiable_copy(tmp_path, UNIT.read_text())) == ""
    broken = UNIT.read_text().replace("LoadCredential=", "LoadCredentials=")
    assert "LoadCredentials" in verify(verifiable_copy(tmp_path, broken))


def test_security_exposure_is_2_or_better() -> None:
    assert exposure(UNIT) <= MAX_EXPOSURE


def test_the_table_units_hardening_and_no_devices() -> None:
    s, table = sign_service(), service()
    own = {  # what a sign server does not share with the table's daemon
        "Type", "NotifyAccess", "WatchdogSec", "ExecStartPre", "ExecStart", "TimeoutStartSec",
        "TimeoutStopSec", "User", "Group", "SupplementaryGroups", "DeviceAllow",
        "StateDirectory", "StateDirectoryMode", "RuntimeDirectory", "RuntimeDirectoryMode",
        "ConfigurationDirectory", "ConfigurationDirectoryMode", "UMask", "SyslogLevelPrefix",
        "SystemCallFilter",
    }  # fmt: skip
    for key, values in table.items():
        if key not in own:
            assert s.get(key) == values, key
    assert s["User"] == ["progressived-sign"] and s["Group"] == ["progressived-sign"]
    assert s["PrivateDevices"] == ["yes"] and "DeviceAllow" not in s
    assert s["PrivateUsers"] == ["yes"] and "SupplementaryGroups" not in s
    assert s["SystemCallFilter"] == table["SystemCallFilter"][:2]  # not even @chown
    missing = sorted(set(SIGN_SYSCALLS) - allowed_syscalls(s["SystemCallFilter"]))
    assert not missing, f"the unit would kill the sign server on: {missing}"
    assert s["Restart"] == ["always"]


def test_sysusers_creates_the_signs_user(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc" / "group").write_text("root:x:0:\ndialout:x:20:\n")
    result = run("systemd-sysusers", f"--root={root}", "--dry-run", str(SYSUSERS))
    assert result.returncode == 0, result.stderr
    assert "Creating user 'progressived-sign'" in result.stdout + result.stderr
    lines = [x.split() for x in SYSUSERS.read_text().splitlines() if x and not x.startswith("#")]
    assert not [line for line in lines if line[0] == "m" and line[1] == "progressived-sign"]


def test_the_password_is_a_credential_never_on_the_command_line() -> None:
    s = sign_service()
    assert s["LoadCredential"] == [f"mqtt-password:{CREDENTIAL}"]
    (start,) = s["ExecStart"]
    assert "--password-file ${CREDENTIALS_DIRECTORY}/mqtt-password" in start
    assert "--password " not in start and "PROGRESSIVE_SIGN_PASSWORD" not in UNIT.read_text()
    assert s["EnvironmentFile"] == ["-/etc/progressived/sign.env"]


def expand(command: str, env: dict[str, str]) -> list[str]:
    """systemd's ExecStart expansion: ``$NAME`` is split into words, ``${NAME}`` is not."""
    words: list[str] = []
    for word in shlex.split(command):
        if re.fullmatch(r"\$\w+", word):
            words += env[word[1:]].split()
        else:
            words.append(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], word))
    return words


def defaults(s: dict[str, list[str]]) -> dict[str, str]:
    env = {}
    for line in s["Environment"]:
        name, _, value = shlex.split(line)[0].partition("=")
        env[name] = value
    return env


@pytest.fixture
def doc_broker() -> Iterator[DocBroker]:
    with DocBroker() as broker:
        yield broker


@pytest.mark.parametrize("password", [PASSWORDS["sign-lobby"], "wrong"])
def test_the_units_command_logs_in_with_the_credential(
    tmp_path: Path, doc_broker: DocBroker, password: str
) -> None:
    s = sign_service()
    assert defaults(s)["SIGN_OPTIONS"].startswith("--listen 127.0.0.1:8090 --host 127.0.0.1")
    credentials = tmp_path / "credentials"  # what systemd makes from LoadCredential=
    credentials.mkdir(mode=0o700)
    (credentials / "mqtt-password").write_text(password + "\n")
    port = free_port()
    env = {  # as /etc/progressived/sign.env would set it for this machine
        "SIGN_OPTIONS": f"--listen 127.0.0.1:{port} --host {doc_broker.host} "
        f"--port {doc_broker.port} --username sign-lobby --table tcp-07",
        "CREDENTIALS_DIRECTORY": str(credentials),
    }
    (start,) = s["ExecStart"]
    command = expand(start, env)
    assert command[0] == INSTALLED
    command[0] = str(Path(sys.executable).parent / "progressivectl")
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith(f"sign: serving http://127.0.0.1:{port}/"), first
        if password == "wrong":
            assert proc.wait(timeout=30) == 3  # refused: Restart= retries, the journal says why
            return

        def connected() -> bool:  # the sign's view of its broker session
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/state.json", timeout=10) as page:
                return bool(json.load(page)["broker"]["state"] == "connected")

        until_sync(connected, "the sign connected to its broker", 30, every=0.05)
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

"""docs/operations.md's install blocks, run verbatim as root on Debian 12 in a fresh root.

The blocks marked ``<!-- install: NAME -->`` (a table, the broker on this computer, a link
controller, running each by hand) run unchanged, in that order, in a temporary root
(tests/install_root.py: a chroot with its own /etc, /opt, /var, /run and loopback, this
machine's /usr), each by ``bash -e -x`` from the release directory (the wheel built from this
checkout, its systemd/, config/ and docs/), starting from a hardened umask 077. The only
changes:

* lines the root cannot run are commented out: ``apt-get`` (Debian's Mosquitto package files
  are laid down instead), ``udevadm`` and ``ls -l /dev/progressive-board`` (no udev daemon, no
  board), ``systemctl`` (no systemd manager: the units are checked with ``systemd-analyze
  verify`` and Mosquitto is started the way its Debian unit starts it);
* ``editor`` is the operator, scripted: it makes the edit each line's comment names, and
  pastes docs/mqtt.md's broker configuration and ACL as that page is now.

Then it checks what they made (users, groups, owners, modes, ledgers, the program run by the
service user, units), that Mosquitto starts with what they installed and warns of nothing
but the ACL's own content, and that the daemon and the link controller run by hand log in
to it with the passwords the blocks generated, answer ``progressivectl status`` and stop on
Ctrl-C, with no process left behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.markers import Marker

from progressived.cli.extras import INSTALL_WEB
from progressived.testing.waits import until_sync
from tests.conftest import ROOT
from tests.doc_broker import doc_block
from tests.install_root import InstallRoot, Ran, install_root
from tests.test_packaging import pins

# One worker runs the whole module under pytest-xdist (.ci/test: --dist loadgroup):
# its module-scoped install root takes minutes to build.
pytestmark = pytest.mark.xdist_group("install-root")

OPERATIONS = ROOT / "docs" / "operations.md"
REQUIREMENTS = ROOT / "requirements"
SIGN = ROOT / "docs" / "sign.md"  # the sign server's and the kiosk's blocks
BLOCK = re.compile(r"<!-- install: ([a-z-]+) -->\n```sh\n(.*?)```", re.DOTALL)
BLOCK_ORDER = ["table", "broker", "link", "by-hand-table", "by-hand-link"]
SIGN_BLOCKS = ["sign", "kiosk"]
NOT_RUN = ("apt-get ", "udevadm ", "ls -l /dev/progressive-board", "systemctl ", "journalctl ")
VERSION = "0.1.0"

# The operator's edits: what the comment of each `editor` line in the blocks asks for.
EDITOR = r"""#!/bin/bash
set -e
case "$1" in
/etc/progressived/progressived.toml)
  sed -i -e 's|^# username = .*|username = "tcp-07"|' \
         -e 's|^# password_file = .*|password_file = "/etc/progressived/mqtt-password"|' "$1" ;;
/etc/progressived/link.toml)
  sed -i -e 's|^# password_file = .*|password_file = "/etc/progressived/link-mqtt-password"|' "$1" ;;
/etc/mosquitto/conf.d/progressive.conf) cat /root/operator-bin/progressive.conf > "$1" ;;
/etc/mosquitto/progressive.acl) cat /root/operator-bin/progressive.acl > "$1" ;;
*) echo "editor: no edit scripted for $1" >&2; exit 1 ;;
esac
"""


def install_blocks(text: str) -> dict[str, str]:
    found = BLOCK.findall(text)
    assert len({name for name, _ in found}) == len(found), "two blocks with one name"
    return dict(found)


def runnable(block: str) -> str:
    """The block with the lines the root cannot run commented out (and nothing else)."""
    lines = []
    for line in block.splitlines():
        if line.startswith(NOT_RUN):
            assert not line.rstrip().endswith("\\"), f"a skipped line continues: {line}"
            lines.append(f"# not run in the test root: {line}")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def test_the_install_blocks_are_marked_and_only_the_named_lines_are_skipped() -> None:
    blocks = install_blocks(OPERATIONS.read_text())
    assert sorted(blocks) == sorted(BLOCK_ORDER), "one block of each, no other"
    assert sorted(install_blocks(SIGN.read_text())) == sorted(SIGN_BLOCKS)
    blocks.update(install_blocks(SIGN.read_text()))
    skipped = [
        line
        for block in blocks.values()
        for line in runnable(block).splitlines()
        if line.startswith("# not run")
    ]
    assert {line.split(": ", 1)[1].split()[0] for line in skipped} == {
        "apt-get",
        "udevadm",
        "ls",
        "systemctl",
        "journalctl",
    }
    # The doc names them, as the test skips them.
    text = OPERATIONS.read_text()
    for words in ("`udevadm`", "`ls -l /dev/progressive-board`", "`systemctl`", "`apt-get`"):
        assert words in text
    assert "`journalctl`" in text
    assert f"V={VERSION}" in blocks["table"], "the table block installs this version's wheel"
    # Each install block stops at its first failing command (not the by-hand ones: Ctrl-C
    # there would end the operator's shell).
    for name in ("table", "broker", "link", *SIGN_BLOCKS):
        assert blocks[name].startswith("set -e\n"), name
    with pytest.raises(AssertionError, match="continues"):
        runnable("systemctl restart \\\n  mosquitto\n")


# Run after the table's and the link's blocks, before the web sign's adds its extra.
CORE_ONLY = {
    "pip check": "/opt/progressived/bin/pip check",
    "self-check": "/opt/progressived/bin/progressived self-check "
    "--config /etc/progressived/progressived.toml",
    "sign --web": "/opt/progressived/bin/progressivectl sign --web --port 1",
}


@dataclass
class Installed:
    root: InstallRoot
    ran: dict[str, Ran] = field(default_factory=dict)
    core_only: dict[str, Ran] = field(default_factory=dict)
    mosquitto_log: str = ""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("install")
    wheels, release, operator = work / "wheels", work / "release", work / "operator-bin"
    # What a machine with internet access fetches for a table computer without: the pinned
    # files (their hashes checked here and again by the blocks' pip), and the program's wheel.
    pip = [sys.executable, "-m", "pip", "-q"]
    for fetch in (
        [
            *pip,
            "download",
            "--require-hashes",
            "-r",
            str(REQUIREMENTS / "web.txt"),
            "-d",
            str(wheels),
        ],
        [*pip, "wheel", "--no-deps", "-w", str(wheels), str(ROOT)],
    ):
        subprocess.run(fetch, check=True, capture_output=True, timeout=600)
    release.mkdir()
    shutil.copy(wheels / f"progressived-{VERSION}-py3-none-any.whl", release)
    for folder in ("systemd", "config", "docs", "requirements"):
        shutil.copytree(ROOT / folder, release / folder)
    operator.mkdir()
    (operator / "editor").write_text(EDITOR)
    (operator / "editor").chmod(0o755)
    (operator / "progressive.conf").write_text(
        doc_block("`/etc/mosquitto/conf.d/progressive.conf`")
    )
    (operator / "progressive.acl").write_text(doc_block("`/etc/mosquitto/progressive.acl`"))
    blocks = install_blocks(OPERATIONS.read_text())
    with install_root(release, wheels, operator) as root:
        done = Installed(root)
        blocks.update(install_blocks(SIGN.read_text()))
        for name in ("table", "broker", "link", *SIGN_BLOCKS):
            if name == SIGN_BLOCKS[0]:  # the core alone, before the sign's block adds the extra
                done.core_only = {what: root.bash(line) for what, line in CORE_ONLY.items()}
            done.ran[name] = root.bash("umask 077\n" + runnable(blocks[name]))
        done.mosquitto_log = start_mosquitto_as_debian_does(root, work / "mosquitto.out")
        yield done
    assert not root.processes(), "processes left in the test root"


def start_mosquitto_as_debian_does(root: InstallRoot, out: Path) -> str:
    """The unit's ExecStartPre= and ExecStart= lines; its log once it says it is running."""
    unit = Path("/lib/systemd/system/mosquitto.service").read_text().splitlines()
    pre = [line.split("=", 1)[1] for line in unit if line.startswith("ExecStartPre=")]
    start = next(line.split("=", 1)[1] for line in unit if line.startswith("ExecStart="))
    proc = root.spawn("\n".join([*pre, f"exec {start}"]), out, cwd="/")
    return wait_for(root.host("/var/log/mosquitto/mosquitto.log"), " running", proc)


def wait_for(path: Path, text: str, proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """``path``'s content once it holds ``text``; fails if ``proc`` ends first."""

    def holding() -> str | None:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return content
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {text!r}: {content}")
        return None

    return until_sync(holding, f"{text!r} in {path}", timeout, every=0.1)


def mode_owner(root: InstallRoot, inside: str) -> tuple[str, str, str]:
    """``(mode, user, group)`` of a path in the root, names read from the root's /etc."""
    info = root.host(inside).lstat()
    users = _names(root.host("/etc/passwd"))
    groups = _names(root.host("/etc/group"))
    return oct(stat.S_IMODE(info.st_mode)), users[info.st_uid], groups[info.st_gid]


def _names(path: Path) -> dict[int, str]:
    return {int(f[2]): f[0] for f in (line.split(":") for line in path.read_text().splitlines())}


def _member(root: InstallRoot, group: str) -> list[str]:
    for line in root.host("/etc/group").read_text().splitlines():
        name, _, _, members = line.split(":")
        if name == group:
            return members.split(",")
    return []


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_table_install_runs_verbatim_and_makes_what_the_daemon_needs(
    installed: Installed,
) -> None:
    root, ran = installed.root, installed.ran["table"]
    assert ran.returncode == 0, ran
    # The user and groups, from the sysusers file the block installed with install -D.
    passwd = root.host("/etc/passwd").read_text()
    assert re.search(
        r"^progressived:x:\d+:\d+:.*:/var/lib/progressived:/usr/sbin/nologin$", passwd, re.M
    )
    assert "progressived" in _member(root, "dialout")
    assert "progressived" in _member(root, "progressive-ops")
    # The program, readable by the service user although root's umask was 077.
    assert os.readlink(root.host("/opt/progressived")) == f"/opt/progressived-{VERSION}"
    assert mode_owner(root, f"/opt/progressived-{VERSION}") == ("0o755", "root", "root")
    assert f"progressived {VERSION}" in ran.output  # `runuser -u progressived -- ... --version`
    assert mode_owner(root, "/var/backups/progressived") == ("0o700", "root", "root")
    # Configuration, password, ledger: owners and modes as the unit and the docs expect.
    assert mode_owner(root, "/etc/progressived") == ("0o750", "root", "progressived")
    for name in ("progressived.toml", "mqtt-password"):
        assert mode_owner(root, f"/etc/progressived/{name}") == ("0o640", "root", "progressived")
    config = root.host("/etc/progressived/progressived.toml").read_text()
    assert 'username = "tcp-07"' in config.splitlines()  # the operator's edit took
    assert len(root.host("/etc/progressived/mqtt-password").read_text().strip()) >= 32
    assert mode_owner(root, "/var/lib/progressived") == ("0o750", "progressived", "progressived")
    assert mode_owner(root, "/var/lib/progressived/ledger.db")[1] == "progressived"
    assert "created ledger /var/lib/progressived/ledger.db for table tcp-07" in ran.output
    assert "/etc/progressived/progressived.toml: ok (tcp-07, paytable tcp-sd-1)" in ran.output
    assert mode_owner(root, "/usr/local/bin/progressivectl")[1] == "root"
    verify = root.bash("progressivectl ledger verify --db /var/lib/progressived/ledger.db")
    assert verify.returncode == 0, verify


def _said(ran: Ran) -> list[str]:
    """What a command printed, without bash's ``-x`` trace."""
    return [line for line in ran.output.splitlines() if not line.startswith("+ ")]


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_table_install_has_exactly_the_pinned_libraries_and_no_web_extra(
    installed: Installed,
) -> None:
    """``--require-hashes`` then ``--no-deps``: the pinned files, nothing more or less."""
    core_only = installed.core_only
    assert core_only["pip check"].returncode == 0, core_only["pip check"]
    check = core_only["self-check"]
    assert check.returncode == 0, check
    said = "\n".join(_said(check))
    dependencies = json.loads(said[said.index("{") :])["dependencies"]
    pinned = {
        name: version
        for name, (version, marker, _) in pins(REQUIREMENTS / "progressived.txt").items()
        if marker is None or Marker(marker).evaluate()
    }
    assert dependencies == pinned
    assert "aiohttp" not in dependencies
    # Without the web extra: one line naming it, exit 8.
    web = core_only["sign --web"]
    assert web.returncode == 8, web
    assert _said(web) == [
        "progressivectl sign --web needs the web extra, which is not installed here (no "
        f"module 'aiohttp'): {INSTALL_WEB}"
    ]


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_link_install_runs_verbatim_and_its_state_directory_comes_first(
    installed: Installed,
) -> None:
    root, ran = installed.root, installed.ran["link"]
    assert ran.returncode == 0, ran
    assert mode_owner(root, "/var/lib/progressived-link") == (
        "0o750",
        "progressived",
        "progressived",
    )
    assert mode_owner(root, "/var/lib/progressived-link/link.db")[1] == "progressived"
    assert mode_owner(root, "/etc/progressived/link-mqtt-password") == (
        "0o640",
        "root",
        "progressived",
    )
    config = root.host("/etc/progressived/link.toml").read_text().splitlines()
    assert 'password_file = "/etc/progressived/link-mqtt-password"' in config
    assert "/etc/progressived/link.toml: ok (link link-a, ledger head" in ran.output


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_every_unit_in_systemd_is_installed_by_a_block_and_verifies(installed: Installed) -> None:
    root = installed.root
    for unit in sorted((ROOT / "systemd").glob("*.service")):
        inside = f"/etc/systemd/system/{unit.name}"
        assert root.host(inside).exists(), f"no install block installs {unit.name}"
        assert root.host(inside).read_bytes() == unit.read_bytes()
        assert mode_owner(root, inside) == ("0o644", "root", "root")
        verify = root.bash(f"systemd-analyze verify {inside}")
        assert verify.returncode == 0, verify
        said = [line for line in verify.output.splitlines() if not line.startswith("+ ")]
        assert said == [], verify  # "prints nothing", as the blocks say
    rules = "/etc/udev/rules.d/99-progressive-board.rules"
    assert mode_owner(root, rules) == ("0o644", "root", "root")


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_sign_and_kiosk_installs_run_verbatim_beside_a_table(installed: Installed) -> None:
    root = installed.root
    for name in SIGN_BLOCKS:
        assert installed.ran[name].returncode == 0, installed.ran[name]
    passwd = root.host("/etc/passwd").read_text()
    assert re.search(r"^progressived-sign:x:", passwd, re.M)
    assert re.search(r"^progressived-kiosk:x:", passwd, re.M)
    # The table's configuration directory keeps its mode; the password is root's alone.
    assert mode_owner(root, "/etc/progressived") == ("0o750", "root", "progressived")
    password = "/etc/progressived/sign-mqtt-password"
    assert mode_owner(root, password) == ("0o600", "root", "root")
    assert len(root.host(password).read_text().strip()) >= 24
    # /opt/progressived is a symlink (absolute, inside the root) to this version's folder
    page = root.host(f"/opt/progressived-{VERSION}/share/progressived/kiosk.html")
    assert (
        page.read_bytes()
        == (ROOT / "progressived" / "signs" / "web" / "static" / "kiosk.html").read_bytes()
    )


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_mosquitto_starts_with_what_the_broker_block_installed(installed: Installed) -> None:
    root, ran = installed.root, installed.ran["broker"]
    assert ran.returncode == 0, ran
    # Read by Mosquitto after it drops to its user: its own, and nobody else's.
    for name in ("passwd", "progressive.acl"):
        assert mode_owner(root, f"/etc/mosquitto/{name}") == ("0o600", "mosquitto", "mosquitto")
    accounts = [
        line.split(":")[0] for line in root.host("/etc/mosquitto/passwd").read_text().splitlines()
    ]
    assert accounts == ["tcp-07", "link-a", "sign-lobby"]  # the sign's from docs/sign.md
    log = installed.mosquitto_log
    assert "Error" not in log, log
    # The only warnings allowed: those the ACL's own content draws (docs/mqtt.md's to fix).
    acl = doc_block("`/etc/mosquitto/progressive.acl`")
    expected = [
        f"Warning: ACL pattern '{line.split()[-1]}' does not contain '%c' or '%u'."
        for line in acl.splitlines()
        if line.startswith("pattern") and "%u" not in line and "%c" not in line
    ]
    warnings = [line.split(": ", 1)[1] for line in log.splitlines() if ": Warning" in line]
    assert warnings == expected, log


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_running_by_hand_needs_its_runtime_directory_then_logs_in_and_stops_on_ctrl_c(
    installed: Installed, tmp_path: Path
) -> None:
    root = installed.root
    blocks = install_blocks(OPERATIONS.read_text())
    procs: dict[str, subprocess.Popen[str]] = {}
    logs: dict[str, Path] = {}
    for name, socket in (("table", "/run/progressived"), ("link", "/run/progressived-link")):
        block = blocks[f"by-hand-{name}"]
        # Without the directory: one line naming it, exit 2, nothing started.
        command = block.strip().splitlines()[-1]
        refused = root.bash(command)
        said = [line for line in refused.output.splitlines() if not line.startswith("+ ")]
        assert refused.returncode == 2, refused
        assert len(said) == 1 and f"cannot make the control socket {socket}/control.sock" in said[0]
        assert f"install -d -m 0755 -o progressived -g progressived {socket}" in said[0]
        logs[name] = tmp_path / f"{name}.log"
        procs[name] = root.spawn(runnable(block), logs[name])
    try:
        for name, proc in procs.items():
            wait_for(logs[name], "broker connected", proc)
        runtime = root.bash("stat -c '%a %U:%G' /run/progressived /run/progressived-link")
        assert runtime.output.splitlines()[-2:] == ["755 progressived:progressived"] * 2, runtime
        table = root.bash("progressivectl status --json")
        link = root.bash(
            "progressivectl status --socket /run/progressived-link/control.sock --json"
        )
        for status in (table, link):
            assert status.returncode == 0, status
            answer = json.loads(status.output[status.output.index("{") :])
            assert answer["status"]["broker"]["connected"] is True, answer
        # An operator in the control group (operations.md: `usermod -aG progressive-ops`),
        # not root: under the root's hidepid=invisible /proc (the units' ProtectProc=invisible)
        # the daemons cannot read the caller's /proc/<pid>; they ask the group database.
        operator = root.bash(
            "useradd -m alice && usermod -aG progressive-ops alice && id alice\n"
            "runuser -u alice -- progressivectl status\n"
            "runuser -u alice -- progressivectl status "
            "--socket /run/progressived-link/control.sock\n"
        )
        assert operator.returncode == 0, operator
        assert "permission denied" not in operator.output, operator
        assert "table tcp-07" in operator.output and "link link-a" in operator.output, operator
        # The sign's account (docs/sign.md's block made it) reads the table's retained status.
        sign = root.bash(
            "mosquitto_sub -h 127.0.0.1 -u sign-lobby -P \"$(cat /etc/progressived/sign-mqtt-password)\" "
            "-t progressive/table/tcp-07/status -C 1 -W 30"
        )
        assert sign.returncode == 0, sign
        assert '"table": "tcp-07"' in sign.output or '"table":"tcp-07"' in sign.output, sign
    finally:
        for proc in procs.values():
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C on the terminal running the block
    until_sync(lambda: not _daemons(root), "Ctrl-C to stop the daemons", 60, every=0.1)
    for name, log in logs.items():
        assert "Traceback" not in log.read_text(), f"{name}: {log.read_text()}"


def _daemons(root: InstallRoot) -> list[int]:
    """Host pids of progressived processes in the root."""
    found = []
    for pid in root.processes():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(arg.endswith(b"bin/progressived") for arg in cmdline):
            found.append(pid)
    return found

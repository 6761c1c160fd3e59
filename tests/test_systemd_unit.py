"""The systemd unit, the sysusers/udev files and the Grafana dashboard, checked with real tools.

* ``systemd-analyze verify`` must print nothing (it exits 0 even with warnings, so the test
  checks the output). The unit runs ``/opt/progressived/bin/progressived``, which does not
  exist on a build machine, and verify would rightly say so; the test therefore verifies a
  copy of the unit whose ExecStartPre/ExecStart point at this checkout's installed
  ``progressived`` (``.venv/bin/progressived``) — everything else is the unit byte for byte.
* ``systemd-analyze security --offline=yes`` must rate the exposure 2.0 or better; it works on
  the unit file itself, without a running manager (PID 1 need not be systemd).
* The unit's system-call filter must allow every system call the daemon was seen making
  (``strace -f`` of ``progressived demo --headless``), so the hardening cannot kill it.
* ``docs/grafana-dashboard.json`` loads, uses only the daemon's metric names, and each query
  parses as PromQL (``promtool check rules``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "systemd" / "progressived.service"
RULES = ROOT / "systemd" / "99-progressive-board.rules"
SYSUSERS = ROOT / "systemd" / "progressived.sysusers"
TMPFILES = ROOT / "systemd" / "progressived.tmpfiles"
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
INSTALLED = "/opt/progressived/bin/progressived"
CONFIG = "/etc/progressived/progressived.toml"

SYSTEMD_ANALYZE = shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze"
MAX_EXPOSURE = 2.0

# System calls of the daemon process and its threads during `progressived demo --headless`
# (strace -f -ff; board on a pty, Mosquitto, ledger with WAL and fsync, metrics, notify).
DAEMON_SYSCALLS = [
    "access",
    "arch_prctl",
    "bind",
    "brk",
    "clone3",
    "close",
    "close_range",
    "connect",
    "dup2",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "execve",
    "exit",
    "exit_group",
    "fchown",
    "fcntl",
    "fdatasync",
    "flock",
    "ftruncate",
    "futex",
    "getcwd",
    "getdents64",
    "geteuid",
    "getpid",
    "getrandom",
    "getsockname",
    "getsockopt",
    "gettid",
    "ioctl",
    "listen",
    "lseek",
    "madvise",
    "mkdir",
    "mmap",
    "mprotect",
    "munmap",
    "newfstatat",
    "openat",
    "pipe2",
    "poll",
    "pread64",
    "prlimit64",
    "pselect6",
    "pwrite64",
    "read",
    "readlink",
    "recvfrom",
    "rseq",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sched_getaffinity",
    "sendto",
    "set_robust_list",
    "set_tid_address",
    "setsockopt",
    "socket",
    "socketpair",
    "statx",
    "sysinfo",
    "uname",
    "unlink",
    "write",
]
# Not in that trace but needed soon: the control socket (accept, peer credentials, chown of
# the socket to [control] group) and fsync of a real serial port or ledger backup.
EXPECTED_SYSCALLS = [
    "accept4",
    "getpeername",
    "recvmsg",
    "sendmsg",
    "shutdown",
    "fsync",
    "fchownat",
    "getgroups",
]

# The daemon's metric names (progressived/daemon/metrics.py); all carry the label `table`.
METRICS = {
    "progressive_info",
    "progressive_meter_display_cents",
    "progressive_meter_reserve_cents",
    "progressive_meter_overflow_cents",
    "progressive_meter_pending_cents",
    "progressive_paid_cents_total",
    "progressive_in_total",
    "progressive_hits_total",
    "progressive_wins_cents_total",
    "progressive_board_online",
    "progressive_broker_connected",
    "progressive_ledger_ok",
    "progressive_table_open",
    "progressive_healthy",
    "progressive_ledger_head_seq",
    "progressive_wagers_locked_total",
    "progressive_awards_total",
    "progressive_envy_paid_total",
    "progressive_pays_total",
    "progressive_rounds_total",
    "progressive_commands_rejected_total",
}
HISTOGRAMS = {"progressive_ledger_commit_seconds", "progressive_key_to_publish_seconds"}
BOARD_COUNTERS = {
    "good_frames",
    "crc_errors",
    "resyncs",
    "duplicates",
    "reconnects",
    "malformed",
    "oversized",
    "bytes_discarded",
    "missed_heartbeat_offline",
    "offline_events",
}
# A table with an [archive] section (docs/archive.md): its lag, and a refusal.
ARCHIVE = {
    "progressive_archive_lag_rows",
    "progressive_archive_lag_seconds",
    "progressive_archive_refused",
}
KNOWN = (
    METRICS
    | ARCHIVE
    | {f"progressive_board_{c}_total" for c in BOARD_COUNTERS}
    | {f"{h}{s}" for h in HISTOGRAMS for s in ("_bucket", "_sum", "_count")}
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> every value in order (comments and blank lines skipped)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in re.sub(r"\\\n", " ", text).splitlines():  # a line ending in \ goes on
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"setting outside a section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def service() -> dict[str, list[str]]:
    return parse_unit(UNIT.read_text())["Service"]


def verifiable_copy(tmp_path: Path, text: str | None = None) -> Path:
    """The unit with its two commands pointed at this checkout's ``progressived``."""
    exe = Path(sys.executable).parent / "progressived"
    assert exe.is_file(), f"{exe}: install the package first (.ci/test)"
    source = UNIT.read_text() if text is None else text
    lines = source.splitlines(keepends=True)
    commands = [i for i, line in enumerate(lines) if line.startswith("ExecStart")]
    assert len(commands) == 2  # ExecStartPre and ExecStart
    for i in commands:
        assert f"={INSTALLED} " in lines[i]
        lines[i] = lines[i].replace(INSTALLED, str(exe))
    copy = tmp_path / "progressived.service"
    copy.write_text("".join(lines))
    return copy


def verify(unit: Path) -> str:
    result = run(SYSTEMD_ANALYZE, "verify", str(unit))
    return (result.stdout + result.stderr).strip()


def exposure(unit: Path) -> float:
    result = run(SYSTEMD_ANALYZE, "security", "--offline=yes", "--no-pager", str(unit))
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match, result.stdout + result.stderr
    return float(match.group(1))


# ----------------------------------------------------------------------- systemd-analyze
def test_systemd_analyze_works_on_unit_files_offline() -> None:
    version = run(SYSTEMD_ANALYZE, "--version")
    assert version.returncode == 0
    major = int(re.match(r"systemd (\d+)", version.stdout).group(1))
    assert major >= 250, "security --offline=yes needs systemd >= 250"


def test_verify_prints_nothing(tmp_path: Path) -> None:
    assert verify(verifiable_copy(tmp_path)) == ""


def test_verify_would_catch_a_broken_unit(tmp_path: Path) -> None:
    """The empty-output check has teeth: a misspelt key and a missing program are reported."""
    broken = UNIT.read_text().replace("WatchdogSec=", "WatchdogSecs=")
    out = verify(verifiable_copy(tmp_path, broken))
    assert "WatchdogSecs" in out
    missing = tmp_path / "missing"
    missing.mkdir()
    (missing / "progressived.service").write_text(UNIT.read_text())
    assert INSTALLED in verify(missing / "progressived.service")


def test_security_exposure_is_2_or_better() -> None:
    assert exposure(UNIT) <= MAX_EXPOSURE


def test_security_exposure_parser_sees_an_unhardened_unit(tmp_path: Path) -> None:
    bare = tmp_path / "bare.service"
    bare.write_text("[Service]\nType=notify\nExecStart=/bin/true\n")
    assert exposure(bare) > 9.0


# ----------------------------------------------------------------------- unit settings
def test_unit_runs_the_daemon_as_a_notify_service_with_a_watchdog() -> None:
    s = service()
    assert s["Type"] == ["notify"]
    assert s["NotifyAccess"] == ["main"]
    watchdog = s["WatchdogSec"][0]
    assert re.fullmatch(r"\d+s", watchdog) and 2 <= int(watchdog[:-1]) <= 30
    assert s["Restart"] == ["always"]
    assert s["RestartSec"] and s["RestartSec"][0] not in ("0", "0s")
    assert s["ExecStart"] == [f"{INSTALLED} run --config {CONFIG}"]
    assert s["ExecStartPre"] == [f"{INSTALLED} check-config {CONFIG}"]


def test_unit_directories_match_the_example_configuration() -> None:
    s = service()
    assert s["StateDirectory"] == ["progressived"]
    assert s["RuntimeDirectory"] == ["progressived"]
    assert s["ConfigurationDirectory"] == ["progressived"]
    assert s["UMask"] == ["0027"]
    example = (ROOT / "config" / "progressived.toml").read_text()
    assert 'path = "/var/lib/progressived/ledger.db"' in example
    assert 'socket = "/run/progressived/control.sock"' in example


def test_unit_has_a_dedicated_user_with_the_serial_devices_only() -> None:
    s = service()
    assert s["User"] == ["progressived"] and s["Group"] == ["progressived"]
    assert "DynamicUser" not in s
    assert "dialout" in " ".join(s["SupplementaryGroups"]).split()
    assert s["DevicePolicy"] == ["closed"]
    assert set(s["DeviceAllow"]) == {"char-ttyUSB rw", "char-ttyACM rw"}
    assert s.get("PrivateDevices", ["no"]) == ["no"]
    assert "PrivateUsers" not in s  # would hide the operators' uids from the control socket


def test_unit_hardening() -> None:
    s = service()
    yes = (
        "NoNewPrivileges ProtectHome PrivateTmp ProtectKernelTunables ProtectKernelModules "
        "ProtectKernelLogs ProtectControlGroups ProtectClock ProtectHostname RestrictNamespaces "
        "RestrictRealtime RestrictSUIDSGID LockPersonality MemoryDenyWriteExecute"
    )
    for key in yes.split():
        assert s.get(key) == ["yes"], key
    assert s["ProtectSystem"] == ["strict"]
    assert s["CapabilityBoundingSet"] == [""]
    assert s["AmbientCapabilities"] == [""]
    assert s["ProtectProc"] == ["invisible"]
    assert s["ProcSubset"] == ["pid"]
    assert s["SystemCallArchitectures"] == ["native"]
    assert s["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6"]
    assert s["IPAddressDeny"] == ["any"]
    assert s["IPAddressAllow"] == ["localhost"]
    assert "#IPAddressAllow=" in UNIT.read_text()  # the broker's network, for the installer


def syscall_group(name: str) -> set[str]:
    """A system call or @group expanded with systemd-analyze syscall-filter."""
    if not name.startswith("@"):
        return {name}
    result = run(SYSTEMD_ANALYZE, "syscall-filter", "--no-pager", name)
    assert result.returncode == 0, result.stderr
    calls: set[str] = set()
    for line in result.stdout.splitlines()[1:]:
        item = line.strip()
        if item and not item.startswith("#"):
            calls |= syscall_group(item)
    return calls


def allowed_syscalls(lines: list[str]) -> set[str]:
    """SystemCallFilter= semantics: the first line sets an allow list, ~ removes, more adds."""
    allowed: set[str] = set()
    for i, line in enumerate(lines):
        deny = line.startswith("~")
        names: set[str] = set()
        for item in line.lstrip("~").split():
            names |= syscall_group(item)
        assert not (deny and i == 0), "the filter must be an allow list"
        allowed = allowed - names if deny else allowed | names
    return allowed


def test_syscall_filter_allows_what_the_daemon_does() -> None:
    s = service()
    assert s["SystemCallFilter"][:2] == ["@system-service", "~@privileged @resources"]
    allowed = allowed_syscalls(s["SystemCallFilter"])
    missing = sorted(set(DAEMON_SYSCALLS + EXPECTED_SYSCALLS) - allowed)
    assert not missing, f"the unit would kill the daemon on: {missing}"
    # ... and still refuses what it never needs
    for call in ("setuid", "mount", "reboot", "setrlimit", "sched_setscheduler", "ptrace"):
        assert call not in allowed, call


# ----------------------------------------------------------------------- sysusers, tmpfiles
def test_sysusers_creates_the_user_in_dialout(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc" / "group").write_text("root:x:0:\ndialout:x:20:\n")
    result = run("systemd-sysusers", f"--root={root}", "--dry-run", str(SYSUSERS))
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert "Creating user 'progressived'" in out
    assert "Creating group 'progressive-ops'" in out
    lines = [x.split() for x in SYSUSERS.read_text().splitlines() if x and not x.startswith("#")]
    assert ["m", "progressived", "dialout"] in lines


def test_tmpfiles_creates_a_private_backup_directory(tmp_path: Path) -> None:
    result = run("systemd-tmpfiles", f"--root={tmp_path}", "--create", str(TMPFILES))
    assert result.returncode == 0, result.stderr
    backups = tmp_path / "var" / "backups" / "progressived"
    assert backups.is_dir()
    assert backups.stat().st_mode & 0o777 == 0o700


# ----------------------------------------------------------------------- udev rule
UDEV_ITEM = re.compile(r'^([A-Z_]+)(\{[^}]+\})?(==|!=|\+=|-=|:=|=)"([^"]*)"$')


def udev_rules(text: str) -> list[list[tuple[str, str, str]]]:
    """Each rule: (key, operator, value) items, split at commas outside quotes."""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        items = [i.strip() for i in re.findall(r'(?:[^,"]|"[^"]*")+', line)]
        parsed = []
        for item in items:
            match = UDEV_ITEM.match(item)
            assert match, f"not key==value: {item!r}"
            key, attr, op, value = match.groups()
            parsed.append((key + (attr or ""), op, value))
        rules.append(parsed)
    return rules


def test_udev_rule_gives_the_board_a_stable_name() -> None:
    text = RULES.read_text()
    rules = udev_rules(text)
    assert len(rules) == 1
    rule = rules[0]
    keys = {k: (op, v) for k, op, v in rule}
    assert keys["SUBSYSTEM"] == ("==", "tty")
    for attr in ("ATTRS{idVendor}", "ATTRS{idProduct}", "ATTRS{serial}"):
        assert keys[attr][0] == "==", attr
    assert re.fullmatch(r"[0-9a-f]{4}", keys["ATTRS{idVendor}"][1])
    assert re.fullmatch(r"[0-9a-f]{4}", keys["ATTRS{idProduct}"][1])
    assert keys["SYMLINK"] == ("+=", "progressive-board")
    assert keys["GROUP"] == ("=", "dialout")
    assert keys["MODE"] == ("=", "0660")
    assert "udevadm info -a -n /dev/ttyUSB0" in text
    assert "/dev/serial/by-id/" in text


def test_udev_parser_rejects_a_malformed_rule() -> None:
    with pytest.raises(AssertionError, match="SYMLINK"):
        udev_rules('SUBSYSTEM=="tty", SYMLINK+=progressive-board\n')


# ----------------------------------------------------------------------- Grafana dashboard
def all_panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for panel in panels:
        out.append(panel)
        out += all_panels(panel.get("panels", []))
    return out


def dashboard_exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [
        t["expr"] for p in all_panels(board["panels"]) for t in p.get("targets", []) if "expr" in t
    ]


def test_dashboard_loads_with_datasource_and_table_variables() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert 36 <= board["schemaVersion"] <= 41
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    table = variables["table"]
    assert table["type"] == "query"
    assert table["query"]["query"] == "label_values(progressive_info, table)"
    assert table["datasource"]["uid"] == "${datasource}"
    ids = [p["id"] for p in all_panels(board["panels"])]
    assert len(ids) == len(set(ids))
    for panel in all_panels(board["panels"]):
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_dashboard_uses_only_the_daemons_metrics() -> None:
    exprs = dashboard_exprs()
    used = {m for e in exprs for m in re.findall(r"\bprogressive_[a-z0-9_]+", e)}
    unknown = used - KNOWN
    assert not unknown, f"not exported by the daemon: {sorted(unknown)}"
    for e in exprs:
        assert 'table=~"$table"' in e, e
    # the slot floor's view: every meter, money, health and latency series is on it
    wanted = (METRICS | {f"{h}_bucket" for h in HISTOGRAMS}) - {"progressive_info"}
    wanted |= {
        f"progressive_board_{c}_total"
        for c in ("crc_errors", "resyncs", "duplicates", "reconnects", "good_frames")
    }
    assert wanted <= used, sorted(wanted - used)
    assert any("/ 100" in e for e in exprs if "progressive_meter_display_cents" in e), (
        "meters are shown in dollars"
    )
    for q in ("0.5", "0.99"):
        for h in HISTOGRAMS:
            assert any(f"histogram_quantile({q}," in e and h in e for e in exprs), (q, h)


def test_dashboard_queries_parse_as_promql(tmp_path: Path) -> None:
    """Each query as a recording rule, Grafana's variables filled in, through promtool."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is installed by .ci/test"
    rules = []
    for i, expr in enumerate(dashboard_exprs()):
        promql = (
            expr.replace("$__rate_interval", "5m").replace("$__range", "1h").replace("$table", ".*")
        )
        rules.append({"record": f"dashboard:query_{i}", "expr": promql})
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout + result.stderr

    bad = tmp_path / "bad.yml"
    bad.write_text(
        json.dumps(
            {
                "groups": [
                    {
                        "name": "d",
                        "rules": [
                            {
                                "record": "dashboard:bad",
                                "expr": "sum by (table (progressive_in_total)",
                            }
                        ],
                    }
                ]
            }
        )
    )
    assert run(promtool, "check", "rules", str(bad)).returncode != 0


# ----------------------------------------------------------------------- every unit
UNITS = sorted((ROOT / "systemd").glob("*.service"))
# Descriptors a daemon may hold at most (LimitNOFILE=, soft and hard): above what its own
# bounds need (the listeners' connection limits, the broker, the ledger, the board, the
# control socket, a few dozen of Python's own), so a flood of clients meets the listener's
# refusal before the process runs out; below the kernel's default hard limit, so a leak
# ends at a known number instead of the machine's.
NOFILE = 4096


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_every_unit_sets_its_descriptor_limit(unit: Path) -> None:
    assert len(UNITS) >= 4
    assert parse_unit(unit.read_text())["Service"]["LimitNOFILE"] == [str(NOFILE)]


def test_the_simulated_board_drop_in_allows_a_pty_and_verifies(tmp_path: Path) -> None:
    """systemd/progressived-simulated-board.conf: the unit with it verifies (systemd-analyze
    reads the drop-ins of a unit beside it) and may open a pty; a broken drop-in is seen."""
    drop_in = ROOT / "systemd" / "progressived-simulated-board.conf"
    assert parse_unit(drop_in.read_text())["Service"] == {"DeviceAllow": ["char-pts rw"]}
    unit = verifiable_copy(tmp_path)
    folder = tmp_path / "progressived.service.d"
    folder.mkdir()
    (folder / "simulated-board.conf").write_text(drop_in.read_text())
    assert verify(unit) == ""
    (folder / "simulated-board.conf").write_text(drop_in.read_text() + "DeviceAllowz=x\n")
    assert "DeviceAllowz" in verify(unit)


def test_every_units_user_and_groups_are_made_by_a_shipped_sysusers_file() -> None:
    """A unit whose User= no sysusers file makes fails at start (status=217/USER)."""
    made: set[str] = set()
    for path in (ROOT / "systemd").glob("*.sysusers"):
        for line in path.read_text().splitlines():
            words = line.split()
            if words and words[0] in ("u", "g"):
                made.add(words[1])
    debian = {"dialout", "video", "render", "input"}  # the base system's groups
    for unit in UNITS:
        s = parse_unit(unit.read_text())["Service"]
        assert s["User"][0] in made, f"{unit.name}: no sysusers file makes {s['User'][0]}"
        for group in [*s.get("Group", []), *" ".join(s.get("SupplementaryGroups", [])).split()]:
            assert group in made | debian, f"{unit.name}: no sysusers file makes {group}"

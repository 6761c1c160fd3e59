"""Expected faults end with one clear line and a documented exit code, never a traceback;
a missing ledger is never an empty one (`progressived init` makes it, journaling who).

Every test runs the real commands as subprocesses, as an operator (or systemd) would.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.ledger import Ledger
from progressived.testing.waits import until_sync

# Every test starts the commands as processes: end to end, outside the day-to-day subset.
pytestmark = pytest.mark.e2e

DAEMON = [sys.executable, "-m", "progressived.cli.daemon"]
CTL = [sys.executable, "-m", "progressived.cli.ctl"]
AT = "2026-11-23T12:00:00.000000Z"


def run(*cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single clear line an expected fault prints (and no traceback)."""
    assert "Traceback" not in (result.stdout or "") + result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def closed_pipe_run(*cmd: str) -> subprocess.CompletedProcess[str]:
    """Run with standard output into a pipe whose reader has already gone (`| head`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            list(cmd), stdout=write, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(write)


def config(tmp: Path, *, table: str = "t-1", ledger: Path | None = None, extra: str = "") -> Path:
    """A daemon configuration; nothing in it is reached before the ledger is opened."""
    path = tmp / f"{table}.toml"
    path.write_text(
        f"""
[table]
id = "{table}"
paytable = "tcp-sd-1"

[[progressive.meters]]
id = "main"
rate = 0.15

[board]
driver = "serial"
port = "{tmp / "no-board"}"

[mqtt]
host = "127.0.0.1"
port = 1

[ledger]
path = "{ledger or tmp / "ledger.db"}"

[metrics]
enabled = false

[control]
socket = "{tmp / "control.sock"}"
{extra}
"""
    )
    return path


# ----------------------------------------------------------------- 16: a missing ledger


def test_run_refuses_a_missing_ledger_and_creates_nothing(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    result = run(*DAEMON, "run", "--config", str(cfg))
    assert result.returncode == 3
    line = one_line(result)
    assert f"no ledger at {tmp_path / 'ledger.db'}" in line
    assert "progressived init --config" in line
    # Nothing was created: no empty ledger, no lock file, no socket (the table never opened).
    assert sorted(p.name for p in tmp_path.iterdir()) == [cfg.name]


def test_run_refuses_a_missing_ledger_directory_and_an_empty_file(tmp_path: Path) -> None:
    typo = config(tmp_path, ledger=tmp_path / "lib-typo" / "ledger.db")
    result = run(*DAEMON, "run", "--config", str(typo))
    assert result.returncode == 3
    assert f"ledger directory {tmp_path / 'lib-typo'} does not exist" in one_line(result)
    assert not (tmp_path / "lib-typo").exists()

    (tmp_path / "ledger.db").touch()
    result = run(*DAEMON, "run", "--config", str(config(tmp_path)))
    assert result.returncode == 3
    assert "never initialised" in one_line(result)
    assert (tmp_path / "ledger.db").stat().st_size == 0


def test_init_creates_the_ledger_journaling_who_and_when_and_never_twice(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    before = time.time()
    made = run(*DAEMON, "init", "--config", str(cfg), "--operator", "ops-7")
    assert made.returncode == 0, made.stderr
    user = pwd.getpwuid(os.getuid()).pw_name
    assert f"created ledger {tmp_path / 'ledger.db'} for table t-1" in made.stdout
    assert (
        "meters main $1,000.00" in made.stdout and f"operator ops-7, OS user {user}" in made.stdout
    )
    with sqlite3.connect(tmp_path / "ledger.db") as conn:
        seq, at, actor, data = conn.execute(
            "SELECT seq, at, actor, data FROM journal WHERE kind = 'ledger_created'"
        ).fetchone()
    created = json.loads(data)
    assert (seq, actor) == (1, "ops-7")
    assert (created["operator"], created["os_user"], created["table_id"]) == ("ops-7", user, "t-1")
    assert created["paytable"] == "tcp-sd-1"
    stamp = time.mktime(time.strptime(at[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert before - 2 <= stamp <= time.time() + 2

    # A second init refuses the existing ledger and leaves it as it was.
    digest = (tmp_path / "ledger.db").read_bytes()
    again = run(*DAEMON, "init", "--config", str(cfg), "--operator", "ops-8")
    assert again.returncode == 6
    assert "already exists" in one_line(again)
    assert (tmp_path / "ledger.db").read_bytes() == digest

    # Init refuses a missing directory instead of making it.
    typo = config(tmp_path, table="t-2", ledger=tmp_path / "nope" / "ledger.db")
    missing = run(*DAEMON, "init", "--config", str(typo))
    assert missing.returncode == 3
    assert "does not exist" in one_line(missing)
    assert not (tmp_path / "nope").exists()

    # self-check now finds the chain it just made.
    check = run(*DAEMON, "self-check", "--config", str(cfg))
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads(check.stdout)["ledger_head_seq"] >= 2


def test_run_refuses_another_tables_ledger(tmp_path: Path) -> None:
    assert run(*DAEMON, "init", "--config", str(config(tmp_path, table="t-1"))).returncode == 0
    other = config(tmp_path, table="t-2")
    result = run(*DAEMON, "run", "--config", str(other))
    assert result.returncode == 4
    assert "belongs to table 't-1', not 't-2'" in one_line(result)
    check = run(*DAEMON, "check-config", str(other))
    assert check.returncode == 4
    assert "belongs to table 't-1', not 't-2'" in check.stderr and "Traceback" not in check.stderr


def test_run_with_a_missing_control_group_says_so_before_starting(tmp_path: Path) -> None:
    assert run(*DAEMON, "init", "--config", str(config(tmp_path))).returncode == 0
    cfg = config(tmp_path, extra='group = "no-such-group-xyz"')
    result = run(*DAEMON, "run", "--config", str(cfg))
    assert result.returncode == 2
    assert one_line(result) == (
        f"progressived: {cfg}: control.group: no group 'no-such-group-xyz' on this machine "
        "(create it with groupadd, or fix the key)"
    )
    assert not (tmp_path / "control.sock").exists()


def test_check_config_reports_the_ledger_its_directory_and_the_group(tmp_path: Path) -> None:
    missing = run(*DAEMON, "check-config", str(config(tmp_path)))
    assert missing.returncode == 3
    assert "ledger.path: no ledger at" in missing.stderr
    assert "control.group: warning: not set" in missing.stderr

    nodir = config(tmp_path, table="t-3", ledger=tmp_path / "x" / "l.db", extra='group = "zz-no"')
    both = run(*DAEMON, "check-config", str(nodir))
    assert both.returncode == 3
    lines = both.stderr.strip().splitlines()
    assert lines == [
        f"{nodir}: ledger.path: the ledger directory {tmp_path / 'x'} does not exist (a typo? "
        f"else create it, then initialise a new table's ledger with `progressived init "
        f"--config {nodir}`)",
        f"{nodir}: control.group: no group 'zz-no' on this machine (create it with groupadd, "
        "or fix the key)",
    ]

    group = grp.getgrgid(os.getgid()).gr_name
    good = config(tmp_path, extra=f'group = "{group}"')
    assert run(*DAEMON, "init", "--config", str(good)).returncode == 0
    ok = run(*DAEMON, "check-config", str(good))
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == "" and ok.stdout.splitlines()[0] == f"{good}: ok (t-1, paytable tcp-sd-1)"
    # Reading the ledger left nothing beside it (root's -shm would lock out the daemon).
    assert not list(tmp_path.glob("ledger.db-*"))


def test_self_check_on_a_missing_ledger_is_one_line(tmp_path: Path) -> None:
    result = run(*DAEMON, "self-check", "--config", str(config(tmp_path)))
    assert result.returncode == 3
    assert "no ledger at" in one_line(result)
    assert not (tmp_path / "ledger.db").exists()


def test_simulate_refuses_a_ledger_of_another_table_or_paytable(tmp_path: Path) -> None:
    script = tmp_path / "s.txt"
    script.write_text("bet 1\nlock\nreconcile\n")
    db = tmp_path / "sim.db"
    base = ("simulate", "--script", str(script), "--ledger", str(db))
    first = run(*CTL, *base, "--paytable", "tcp-sd-1", "--table", "sim-1")
    assert first.returncode == 0, first.stderr
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM journal").fetchone()[0]

    table = run(*CTL, *base, "--paytable", "tcp-sd-1", "--table", "sim-2")
    assert table.returncode == 2
    assert "written for table 'sim-1', not 'sim-2'" in one_line(table)
    paytable = run(*CTL, *base, "--paytable", "uth-02", "--table", "sim-1")
    assert paytable.returncode == 2
    assert "written for paytable 'tcp-sd-1', not 'uth-02'" in one_line(paytable)
    # Nothing was added by the refused runs; the right table and paytable continue.
    assert sqlite3.connect(db).execute("SELECT count(*) FROM journal").fetchone()[0] == rows
    again = run(*CTL, *base, "--paytable", "tcp-sd-1", "--table", "sim-1")
    assert again.returncode == 0, again.stderr


# ----------------------------------------------------------------- 17: no tracebacks


@pytest.fixture(scope="module")
def busy_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pipe") / "ledger.db"
    params = demo_params("t-p")
    with Ledger.open(path, params, at=AT) as ledger:
        drive(ledger, params, rounds=40, seed=3, run="p")
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("meters",),
        ("ledger", "export", "--format", "csv"),
        ("ledger", "export", "--format", "json"),
        ("hits",),
        ("ledger", "verify"),
    ],
)
def test_output_into_a_closed_pipe_is_silent_and_141(
    busy_ledger: Path, args: tuple[str, ...]
) -> None:
    """As `cat` and `grep` do: the reader went away on purpose (`| head`), nothing to say."""
    result = closed_pipe_run(*CTL, *args, "--db", str(busy_ledger))
    assert result.returncode == 141
    assert result.stderr == ""


def test_ledger_export_into_head_is_silent(busy_ledger: Path) -> None:
    """The operator's own pipeline: the first row, and not a word on standard error."""
    for fmt in ("csv", "json"):
        cmd = f"{' '.join(CTL)} ledger export --db {busy_ledger} --format {fmt} | head -1"
        shell = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=60
        )
        assert shell.stderr == ""
        assert shell.stdout.count("\n") == 1
        assert shell.returncode == 141  # the ledger is far bigger than a pipe's buffer


def test_par_into_a_closed_pipe_and_into_head() -> None:
    result = closed_pipe_run(*CTL, "par", "tcp-sd-1")
    assert result.returncode == 141
    assert result.stderr == ""
    # The real thing: a shell pipeline into head.
    shell = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{' '.join(CTL)} par pmg-01 | head -1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in shell.stderr
    assert shell.stdout.count("\n") == 1
    assert shell.returncode in (0, 141)


@pytest.mark.e2e
@pytest.mark.parametrize("after", [0.3, 1.5, 3.0])  # loading, starting the parts, playing
def test_ctrl_c_in_the_demos_first_seconds(tmp_path: Path, after: float) -> None:
    proc = subprocess.Popen(
        [*DAEMON, "demo", "--headless", "--workdir", str(tmp_path / "demo")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    time.sleep(after)
    os.killpg(proc.pid, signal.SIGINT)  # the terminal sends SIGINT to the whole group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err
    assert "interrupted" in one_line(subprocess.CompletedProcess([], 130, out, err))
    # Nothing of the demo is left running (broker, board simulator, daemon).
    def group_ended() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False

    until_sync(group_ended, "every process of the demo to end", 15)


# ----------------------------------------------------------------- 20: the command line


def test_version_of_both_commands() -> None:
    from progressived import __version__

    assert run(*CTL, "--version").stdout.strip() == f"progressivectl {__version__}"
    assert run(*DAEMON, "--version").stdout.strip() == f"progressived {__version__}"


def test_a_misspelled_flag_is_an_unknown_flag_not_a_missing_one(tmp_path: Path) -> None:
    result = run(*CTL, "close", "--operater", "ops-7", "--reason", "x", "--socket", "/x")
    assert result.returncode == 2
    assert "unknown flag --operater (did you mean --operator?)" in result.stderr
    assert "required" not in result.stderr
    # An abbreviation is not silently taken for a flag either.
    short = run(*CTL, "meters", "--d", str(tmp_path / "l.db"))
    assert short.returncode == 2
    assert "unknown flag --d" in short.stderr
    # A negative amount is still an amount, not a flag.
    adjust = run(
        *CTL,
        "meter-adjust",
        "main",
        "-0.15",
        "--operator",
        "a",
        "--reason",
        "r",
        "--approver",
        "b",
        "--socket",
        str(tmp_path / "none.sock"),
    )
    assert adjust.returncode == 2
    assert "cannot reach the daemon" in one_line(adjust)
    # An unknown flag with nothing required missing is reported the same way, by the
    # subcommand (its usage, a suggestion), not as the top level's "unrecognized arguments".
    extra = run(*CTL, "par", "tcp-sd-1", "--jsn")
    assert extra.returncode == 2
    assert extra.stderr.splitlines()[-1] == (
        "progressivectl par: error: unknown flag --jsn (did you mean --json?)"
    )
    nested = run(*CTL, "ledger", "verify", "--db", "x.db", "--deeep")
    assert nested.returncode == 2
    assert "progressivectl ledger verify: error: unknown flag --deeep (did you mean --deep?)" in (
        nested.stderr
    )


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_shell_completion_is_generated(shell: str) -> None:
    ctl = run(*CTL, "completion", shell)
    assert ctl.returncode == 0, ctl.stderr
    for word in ("meter-transfer", "params-reload", "simulate", "--approver", "verify"):
        assert word in ctl.stdout
    daemon = run(*DAEMON, "completion", shell)
    assert daemon.returncode == 0 and "check-config" in daemon.stdout and "init" in daemon.stdout
    if shell == "bash":
        syntax = subprocess.run(["bash", "-n"], input=ctl.stdout, text=True, capture_output=True)
        assert syntax.returncode == 0, syntax.stderr


def test_run_on_a_ledger_another_process_writes_is_one_line(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    assert run(*DAEMON, "init", "--config", str(cfg)).returncode == 0
    with Ledger.open(tmp_path / "ledger.db", demo_params("t-1"), at=AT, create=False):
        result = run(*DAEMON, "run", "--config", str(cfg))
    assert result.returncode == 5
    assert "is open for writing by another process" in one_line(result)


def on_a_terminal(*cmd: str) -> tuple[int, str, str]:
    """Run with standard error on a pseudo-terminal; returns (status, stdout, terminal)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24x100
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{cmd} kept its terminal open for 60 s: {seen[-500:]!r}")
        if not select.select([master], [], [], left)[0]:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = proc.stdout.read() if proc.stdout else ""
    return proc.wait(timeout=60), out, seen.decode(errors="replace")


def test_progress_on_a_terminal_only(busy_ledger: Path, tmp_path: Path) -> None:
    status, out, terminal = on_a_terminal(*CTL, "ledger", "verify", "--db", str(busy_ledger))
    assert status == 0 and ": OK: table t-p" in out
    assert "verify:" in terminal and "rows" in terminal  # the bar, drawn on the terminal
    piped = run(*CTL, "ledger", "verify", "--db", str(busy_ledger))
    assert piped.returncode == 0 and piped.stderr == ""  # none into a pipe or a log

    script = tmp_path / "long.txt"
    script.write_text("bet 1\nlock\nreconcile\n" * 300)
    args = (*CTL, "simulate", "--paytable", "tcp-sd-1", "--script", str(script), "--json")
    status, out, terminal = on_a_terminal(*args)
    assert status == 0 and len(json.loads(out)["rounds"]) == 300
    assert "simulate:" in terminal and "lines" in terminal
    quiet = run(*args)
    assert quiet.returncode == 0 and quiet.stderr == ""

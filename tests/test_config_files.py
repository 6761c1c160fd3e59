"""One reader of each kind of configuration file (progressived/runtime/config_files.py): the
password file read the same by every reader of one (docs/configuration.md, "Password
files"), the TOML reader every configuration goes through, the strict model base."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import ValidationError

from progressived.config.paytables import PaytableError, load_paytable
from progressived.config.table import ConfigError, read_toml
from progressived.mqtt.config import MqttSection
from progressived.runtime.config_files import (
    ConfigFileError,
    PasswordFileError,
    StrictModel,
    read_password_file,
)
from progressived.runtime.config_files import read_toml as read_any_toml
from progressived.signs.broker import LoginError, resolve_password
from progressived.signs.web.config import SignConfigError, load_sign_config


@pytest.mark.parametrize(
    ("content", "password"),
    [
        (b"s3cret\n", "s3cret"),  # echo
        (b"s3cret", "s3cret"),  # printf '%s'
        (b"  s3cret \t\r\n", "s3cret"),
        (b"s3cret\nsecond line\n", "s3cret"),  # only the first line: the rest is ignored
        ("pässwörd\n".encode(), "pässwörd"),
    ],
)
def test_a_password_file_holds_its_password_on_the_first_line(
    tmp_path: Path, content: bytes, password: str
) -> None:
    path = tmp_path / "pw"
    path.write_bytes(content)
    assert read_password_file(path) == password
    # every reader of a password file reads the same password
    assert MqttSection(username="t-1", password_file=path).resolved_password() == password
    assert resolve_password(None, path, env={}) == password


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "holds no password on its first line"),
        (b"\nsecret\n", "holds no password on its first line"),
        (b"   \n", "holds no password on its first line"),
        (b"\xff\xfe\n", "is not UTF-8 text"),
    ],
)
def test_a_password_file_without_a_password_is_refused_in_one_line(
    tmp_path: Path, content: bytes, words: str
) -> None:
    path = tmp_path / "pw"
    path.write_bytes(content)
    with pytest.raises(PasswordFileError) as caught:
        read_password_file(path)
    assert str(caught.value) == f"the password file {path} {words}"
    with pytest.raises(PasswordFileError):
        MqttSection(username="t-1", password_file=path).resolved_password()
    with pytest.raises(LoginError, match=words):
        resolve_password(None, path, env={})


def test_a_missing_password_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "nowhere"
    with pytest.raises(PasswordFileError) as caught:
        read_password_file(path)
    assert str(caught.value) == f"cannot read the password file {path}: No such file or directory"


def test_every_toml_file_is_read_by_one_reader_its_faults_as_the_callers_error(
    tmp_path: Path,
) -> None:
    good = tmp_path / "good.toml"
    good.write_text("[table]\nrate = 0.15\n")
    assert read_any_toml(good) == {"table": {"rate": Decimal("0.15")}}  # never a float
    bad = tmp_path / "bad.toml"
    bad.write_text("[table\n")
    missing = tmp_path / "missing.toml"
    for read, error in (
        (read_any_toml, ConfigFileError),
        (read_toml, ConfigError),
        (load_paytable, PaytableError),
        (load_sign_config, SignConfigError),
    ):
        with pytest.raises(error, match=rf"^{bad}: not valid TOML: "):
            read(bad)
        with pytest.raises(error, match=rf"^{missing}: cannot read: No such file or directory$"):
            read(missing)


def test_a_strict_model_refuses_an_unknown_key_and_is_frozen() -> None:
    class Section(StrictModel):
        port: int = 1

    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Section.model_validate({"prot": 2})
    section = Section(port=2)
    with pytest.raises(ValidationError, match="frozen"):
        section.port = 3


def test_the_link_ledgers_password_file_is_read_the_same(tmp_path: Path) -> None:
    from progressived.ledger.errors import LedgerUnavailable
    from progressived.link.runtime.config import LinkLedgerSection

    path = tmp_path / "db.pw"
    path.write_text("s3cret\nignored\n")
    section = LinkLedgerSection(url="postgresql://link@db/link", password_file=path)
    assert section.password() == read_password_file(path) == "s3cret"
    path.write_text("\n")
    with pytest.raises(LedgerUnavailable, match="holds no password"):
        section.password()


@pytest.mark.e2e  # progressived init and run as processes
def test_the_daemon_with_an_empty_password_file_stops_in_one_line(tmp_path: Path) -> None:
    from tests.test_cli_faults import DAEMON, config, one_line, run

    secret = tmp_path / "mqtt-password"
    secret.write_text("\n")
    cfg = config(tmp_path, extra="")
    cfg.write_text(cfg.read_text().replace("port = 1\n", f'port = 1\npassword_file = "{secret}"\n'))
    assert run(*DAEMON, "init", "--config", str(cfg)).returncode == 0
    result = run(*DAEMON, "run", "--config", str(cfg))
    assert result.returncode == 2
    assert one_line(result) == (
        f"progressived: {cfg}: mqtt.password_file: the password file {secret} holds no "
        "password on its first line"
    )


def test_every_configuration_section_shares_the_one_strict_base() -> None:
    """One strict-model base: a module that sets ``extra="forbid"`` on a model of
    its own repeats it (three did after the slips, archive and report sections landed)."""
    package = Path(__file__).resolve().parent.parent / "progressived"
    repeats = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if 'ConfigDict(extra="forbid", frozen=True)' in path.read_text()
        and path.name != "config_files.py"
    ]
    assert repeats == [], repeats

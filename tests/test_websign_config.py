"""The sign's own file (``progressivectl sign --web --config``): what it accepts, and a
clear refusal naming file, key and reason for everything else, colours that a player could
not read from across the pit included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from progressived.core.money import UNITS_PER_DOLLAR
from progressived.signs.web.config import ColoursSection, SignConfigError, load_sign_config
from progressived.signs.web.look import contrast
from tests.conftest import ROOT

GOOD = """
[sign]
title = "High Limit Room"
banner_s = 20
odometer_ms = 600

[sign.colours]
background = "#000000"
meter = "#FFD34D"

[[sign.tables]]
id = "tcp-07"
name = "Table 7"
paytable = "tcp-pa-5"
wager = 5.00

[[sign.tables]]
id = "uth-03"
name = "Table 3"
show = false

[[sign.links]]
id = "link-a"
name = "Mega Link"
paytable = "pmg-01"
levels = { pmg = "Mega" }
"""


def write(tmp_path: Path, text: str, name: str = "sign.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_file_loads(tmp_path: Path) -> None:
    config = load_sign_config(write(tmp_path, GOOD))
    assert (config.title, config.banner_s, config.odometer_ms) == ("High Limit Room", 20, 600)
    assert config.colours.meter == "#ffd34d" and config.colours.background == "#000000"
    table = config.look("table", "tcp-07")
    assert table.name == "Table 7" and table.wager == 5 * UNITS_PER_DOLLAR
    assert table.paytable is not None and table.paytable.id == "tcp-pa-5"
    assert config.shown("table") == ("tcp-07",) and config.shown("link") == ("link-a",)
    assert config.table_name("uth-03") == "Table 3" and config.table_name("uth-09") == "uth-09"
    assert config.look("link", "link-a").levels == {"pmg": "Mega"}


def test_the_default_colours_are_readable_from_across_the_pit() -> None:
    colours = ColoursSection()
    for name in ("text", "title", "meter", "pending", "closed", "dimmed"):
        assert contrast(getattr(colours, name), colours.background) >= 7, name
    assert contrast(colours.winner_text, colours.winner_background) >= 7
    assert round(contrast("#ffffff", "#000000"), 2) == 21.0


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            ("banner_s = 20", "banner_s = -1"),
            "sign.banner_s: Input should be greater than or equal to 0",
        ),
        (
            ("odometer_ms = 600", "odometer_ms = 1500"),
            "sign.odometer_ms: Input should be less than or equal to 1000",
        ),
        (
            ('meter = "#FFD34D"', 'meter = "#333333"'),
            "sign.colours: meter #333333 on background #000000 has a contrast of 1.66:1; a sign needs at least 7:1",
        ),
        (
            ('meter = "#FFD34D"', 'meter = "gold"'),
            "sign.colours.meter: 'gold' is not a colour #rrggbb",
        ),
        (
            ('paytable = "tcp-pa-5"', 'paytable = "tcp-xx-9"'),
            "sign.tables[0].paytable: no paytable 'tcp-xx-9' in ",
        ),
        (
            ("wager = 5.00", "wager = 5.005"),
            "sign.tables[0].wager: a wager is a positive whole of cents",
        ),
        (
            ('name = "Table 7"', 'name = ""'),
            "sign.tables[0].name: must be 1 to 40 printable characters",
        ),
        (('id = "uth-03"', 'id = "tcp-07"'), "sign: tables: 'tcp-07' is listed twice"),
        (('id = "uth-03"', 'id = "uth 03"'), "sign.tables[1].id: String should match pattern"),
        (("show = false", "shown = false"), "sign.tables[1].shown: unknown key"),
        (('levels = { pmg = "Mega" }', 'levels = { "pmg/x" = "Mega" }'), "sign.links[0].levels: "),
    ],
)
def test_a_bad_file_names_file_key_and_reason(
    tmp_path: Path, change: tuple[str, str], says: str
) -> None:
    path = write(tmp_path, GOOD.replace(*change, 1))
    with pytest.raises(SignConfigError) as caught:
        load_sign_config(path)
    assert f"{path}: {says}" in str(caught.value), caught.value


def test_a_logo_is_read_once_and_must_be_a_small_image(tmp_path: Path) -> None:
    logo = tmp_path / "logo.svg"
    logo.write_text('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 4 1"/>')
    config = load_sign_config(write(tmp_path, f'[sign]\nlogo = "{logo}"\n'))
    assert config.logo.startswith(b"<svg") and config.logo_type == "image/svg+xml"
    for text, says in (
        (f'[sign]\nlogo = "{tmp_path / "none.png"}"\n', "sign.logo: cannot read"),
        (f'[sign]\nlogo = "{tmp_path / "logo.gif"}"\n', "sign.logo: logo.gif: not one of"),
    ):
        with pytest.raises(SignConfigError, match=says):
            load_sign_config(write(tmp_path, text))
    big = tmp_path / "big.png"
    big.write_bytes(b"\x89PNG" + b"\0" * (1024 * 1024))
    with pytest.raises(SignConfigError, match="larger than 1 MiB"):
        load_sign_config(write(tmp_path, f'[sign]\nlogo = "{big}"\n'))


def test_a_missing_or_broken_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SignConfigError, match="cannot read: No such file or directory"):
        load_sign_config(tmp_path / "absent.toml")
    with pytest.raises(SignConfigError, match="not valid TOML"):
        load_sign_config(write(tmp_path, "[sign\n"))


def test_the_command_refuses_a_broken_file_in_one_line_and_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace('meter = "#FFD34D"', 'meter = "#333333"'))
    done = subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "sign", "--web", "--config", str(path),
         "--listen", "127.0.0.1:0", "--port", "1"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"progressivectl sign: {path}: sign.colours: meter #333333 on background #000000 has a "
        "contrast of 1.66:1; a sign needs at least 7:1\n"
    )

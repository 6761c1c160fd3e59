"""``[site]``: the time zone and shifts the reports' periods mean, validated with the file."""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

from progressived.config.daemon import daemon_config_from
from progressived.config.site import SiteSection, load_site, site_from
from progressived.config.table import ConfigError
from progressived.link.runtime.config import link_config_from

ROOT = Path(__file__).resolve().parent.parent
SITE = {
    "time_zone": "America/New_York",
    "shifts": [{"name": "graveyard", "start": "22:00"}, {"name": "day", "start": "06:00"},
               {"name": "swing", "start": "14:00"}],
}


def test_a_site_across_midnight_is_one_gaming_day() -> None:
    site = site_from({"site": SITE}, "f.toml")
    assert site.offsets() == [0, 8 * 60, 16 * 60]
    assert site.shift("swing") == 2
    assert site_from({}, "f.toml") == SiteSection()  # absent: UTC, one shift from 00:00


@pytest.mark.parametrize(
    ("site", "says"),
    [
        ({"time_zone": "Mars/Olympus"}, "f.toml: site.time_zone: time_zone 'Mars/Olympus' is "
         "not an IANA time zone"),
        ({"shifts": [{"name": "a", "start": "6:00"}]}, "f.toml: site.shifts[0].start: start "),
        ({"shifts": [{"name": "a", "start": "06:00"}, {"name": "a", "start": "09:00"}]},
         "shift 'a' is named twice"),
        ({"shifts": [{"name": "a", "start": "06:00"}, {"name": "b", "start": "14:00"},
                     {"name": "c", "start": "10:00"}]}, "f.toml: site: shifts: c at 10:00 does "
                                                        "not follow"),
        ({"shifts": []}, "at least one shift"),
        ({"time_zon": "UTC"}, "site.time_zon: unknown key (did you mean 'time_zone'?)"),
    ],
)
def test_a_bad_site_is_refused_naming_the_key(site: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        site_from({"site": site}, "f.toml")
    assert says in str(caught.value)


def test_the_table_and_link_files_validate_their_site(tmp_path: Path) -> None:
    for name, loader in (("progressived.toml", daemon_config_from),
                         ("link.toml", link_config_from)):
        source = ROOT / "config" / name
        data = tomllib.loads(source.read_text(), parse_float=Decimal)
        loader({**data, "site": SITE}, source)
        with pytest.raises(ConfigError, match=r"site\.time_zone"):
            loader({**data, "site": {"time_zone": "Nowhere/City"}}, source)
    path = tmp_path / "site.toml"
    path.write_text('[site]\ntime_zone = "Europe/Paris"\n[table]\nid = "x"\n')
    assert load_site(path).time_zone == "Europe/Paris"

"""A daemon configuration for a table on this machine, written as docs/configuration.md
describes it, so that the rig, the benchmarks and the demo configure the daemon one way."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

Scalar = str | int | float | bool | Decimal | Path
Section = Mapping[str, Scalar]


def _value(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return str(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def render_toml(sections: Mapping[str, Section | Sequence[Section]], header: str = "") -> str:
    """Flat TOML: a mapping is a ``[table]``, a sequence of mappings ``[[array.of.tables]]``."""
    lines = [header] if header else [""]
    for name, body in sections.items():
        tables = [body] if isinstance(body, Mapping) else list(body)
        for table in tables:
            if len(lines) > 1:
                lines.append("")
            lines.append(f"[{name}]" if isinstance(body, Mapping) else f"[[{name}]]")
            lines.extend(f"{key} = {_value(value)}" for key, value in table.items())
    return "\n".join(lines) + "\n"


def _main_meter() -> dict[str, Scalar]:
    return {"id": "main", "rate": 0.15, "reserve_rate": 0.02}


@dataclass(frozen=True)
class RigConfig:
    """What differs between rigs; the broker, pty, ledger and socket come from the rig.

    ``board`` and ``mqtt`` hold keys added after the rig's own (driver and port, host and
    port); ``log`` is the whole ``[log]`` section.
    """

    table: str
    paytable: str = "tcp-sd-1"
    seats: int = 7
    meter: Section = field(default_factory=_main_meter)
    board: Section = field(default_factory=dict)
    mqtt: Section = field(default_factory=dict)
    metrics_port: int = 0
    log: Section = field(default_factory=lambda: {"format": "json"})
    header: str = ""
    meters: Sequence[Section] = ()  # more meters after ``meter``
    link: Section | None = None  # the ``[link]`` section of a table with a linked meter
    slip_printer: Section | None = None  # ``[slips.printer]``: the slips' receipt printer

    def sections(
        self, *, broker_host: str, broker_port: int, link: Path, ledger: Path, control: Path
    ) -> dict[str, Section | Sequence[Section]]:
        sections: dict[str, Section | Sequence[Section]] = {
            "table": {"id": self.table, "seats": self.seats, "paytable": self.paytable},
            "progressive.meters": [self.meter, *self.meters],
            "board": {"driver": "serial", "port": link, **self.board},
            "mqtt": {"host": broker_host, "port": broker_port, **self.mqtt},
            "ledger": {"path": ledger},
            "metrics": {"port": self.metrics_port},
            "control": {"socket": control},
            "log": self.log,
        }
        if self.link is not None:
            sections["link"] = self.link
        if self.slip_printer is not None:
            sections["slips.printer"] = self.slip_printer
        return sections


def write_config(
    directory: Path,
    config: RigConfig,
    *,
    broker_host: str,
    broker_port: int,
    link: Path,
    ledger: Path | None = None,
) -> Path:
    """``directory/progressived.toml``: the ledger (default ``directory/ledger.db``) and the
    control socket (``directory/control.sock``) live beside it."""
    path = directory / "progressived.toml"
    sections = config.sections(
        broker_host=broker_host,
        broker_port=broker_port,
        link=link,
        ledger=ledger or directory / "ledger.db",
        control=directory / "control.sock",
    )
    path.write_text(render_toml(sections, config.header))
    return path

"""The docs cannot drift from the code: each test reads a doc and the code it describes.

* every TOML block in docs/ and README.md says on its first line what it is and is
  validated by the loader the daemon itself uses (a whole ``# progressived.toml`` file; a
  ``# [section] section`` merged into the shipped example; a ``# paytable file``), and so
  are config/progressived.toml and config/keypad.example.toml;
* every key of every configuration model (recursively, the board driver's too) has a row
  in docs/configuration.md with the model's default, every row names a key of a model, and
  every key is read by the code unless its row says it is **not read**;
* every command and flag of ``progressived`` and ``progressivectl`` (their argparse parsers,
  walked) appears in the docs;
* the example payloads of docs/mqtt.md satisfy the doc's own JSON Schemas, and every kind
  the ledger journals is either published (the schema's enum; tests/test_mqtt_schema.py
  checks every published payload against it) or listed as not published;
* docs/protocol.md's frame sizes are the codec's constants, and the bounds the docs give
  for bytes from outside (link.md, mqtt.md, operations.md, simulate.md) are the decoders'
  constants, with every refusal code the decoders can give;
* the module paths docs/architecture.md names exist (except where it says *(target)*), and
  README.md links every doc.

Most checks also feed themselves a drifted doc and assert that they fail.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import tomllib
import types
import typing
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from progressived_drivers import protocol as p
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from progressived.cli import ctl, daemon
from progressived.config.daemon import (
    LedgerSection,
    _DaemonModel,
    daemon_config_from,
    load_daemon_config,
)
from progressived.config.keypad import KeypadMap
from progressived.config.paytables import load_paytable
from progressived.config.table import ConfigError, ProgressiveConfig
from progressived.daemon.link_refusal import CLOSING_FINAL, CLOSING_UNCONSUMED, closure_reason
from progressived.daemon.metrics import LINK_METRICS
from progressived.engine.events import EVENT_TYPES
from progressived.link.runtime.config import (
    LinkDefinitionSection,
    LinkLedgerSection,
    link_config_from,
    load_link_config,
)
from progressived.link.runtime.pairing import pair_problems
from progressived.mqtt.payloads import WAITING_FOR_LINK, event_payload
from progressived.signs.web.config import SignSection, sign_config_from
from tests.conftest import ROOT
from tests.mqtt_schemas import MQTT_DOC, documented_event_kinds, problems
from tests.test_mqtt_schema import engine_events, undocumented_not_published

DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
CONFIG = ROOT / "config" / "progressived.toml"
CONFIG_DOC = ROOT / "docs" / "configuration.md"


# --------------------------------------------------------------------------- TOML blocks


def toml_blocks(text: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", text, flags=re.DOTALL)


def all_toml_blocks() -> list[tuple[str, str]]:
    return [(doc.name, block) for doc in DOCS for block in toml_blocks(doc.read_text())]


def check_toml_block(block: str, folder: Path) -> None:
    """Validate one block by what its first line says it is; raises on any problem."""
    marker = block.splitlines()[0].strip() if block.strip() else ""
    data = tomllib.loads(block, parse_float=Decimal)
    if marker == "# progressived.toml":
        daemon_config_from(data, CONFIG)
    elif match := re.fullmatch(r"# \[([a-z_.]+)\] section", marker):
        section = match.group(1)
        assert list(data) == [section], f"a {section} section holds {list(data)}"
        base = tomllib.loads(CONFIG.read_text(), parse_float=Decimal)
        daemon_config_from({**base, section: data[section]}, CONFIG)
    elif marker == "# link.toml":
        link_config_from(data, ROOT / "config" / "link.toml")
    elif marker == "# archive.toml":
        from progressived.archive.service.config import archive_config_from

        archive_config_from(data, ROOT / "config" / "archive.toml")
    elif marker == "# sign.toml":
        sign_config_from(data, "sign.toml")
    elif match := re.fullmatch(r"# \[([a-z_.]+)\] section of a link's file", marker):
        section, shipped = match.group(1), ROOT / "config" / "link.toml"
        assert list(data) == [section], f"a {section} section holds {list(data)}"
        base = tomllib.loads(shipped.read_text(), parse_float=Decimal)
        link_config_from({**base, section: data[section]}, shipped)
    elif marker == "# paytable file":
        path = folder / f"{data['id']}.toml"
        path.write_text(block)
        load_paytable(path)
    else:
        raise AssertionError(
            f"a TOML block must start with '# progressived.toml', '# link.toml', '# archive.toml', "
            f"'# sign.toml', '# [name] section' or '# paytable file', not {marker!r}"
        )


def test_the_docs_have_toml_blocks_of_every_kind() -> None:
    markers = {block.splitlines()[0] for _, block in all_toml_blocks()}
    assert "# progressived.toml" in markers
    assert "# paytable file" in markers
    assert any(m.endswith("] section") for m in markers)


@pytest.mark.parametrize(("doc", "block"), all_toml_blocks(), ids=[d for d, _ in all_toml_blocks()])
def test_every_toml_block_in_the_docs_validates(doc: str, block: str, tmp_path: Path) -> None:
    check_toml_block(block, tmp_path)


def test_a_drifted_toml_block_is_caught(tmp_path: Path) -> None:
    good = "# [watchdog] section\n[watchdog]\nloop_stall_s = 5\n"
    check_toml_block(good, tmp_path)
    with pytest.raises(ConfigError, match="unknown key"):
        check_toml_block(good.replace("loop_stall_s", "loop_stall"), tmp_path)
    with pytest.raises(AssertionError, match="must start with"):
        check_toml_block("[watchdog]\nloop_stall_s = 5\n", tmp_path)


def test_the_shipped_configuration_files_validate() -> None:
    config = load_daemon_config(CONFIG)
    assert config.params.table_id == "tcp-07"
    keypad = tomllib.loads((ROOT / "config" / "keypad.example.toml").read_text())
    base = tomllib.loads(CONFIG.read_text(), parse_float=Decimal)
    daemon_config_from({**base, "keypad": keypad["keypad"]}, CONFIG)


# --------------------------------------------------------------------------- configuration keys


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X | None``, ``list[X]``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
    return found


def model_fields(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, FieldInfo]]:
    """Every leaf key of ``model``, dotted (a nested model's keys instead of its own)."""
    for name, field in model.model_fields.items():
        nested = _models_in(field.annotation)
        if nested:
            for sub in nested:
                yield from model_fields(sub, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field


def configuration_fields() -> dict[str, FieldInfo]:
    """Every key the daemon's configuration models accept, ``section.key``, with its field."""
    engine_part = ProgressiveConfig.model_fields
    section_models: dict[str, list[type[BaseModel]]] = {
        "table": _models_in(engine_part["table"].annotation),
        "progressive": _models_in(engine_part["progressive"].annotation),
        "keypad": [KeypadMap],
        # the board section's own key (driver) and the configured driver's settings
        "board": [
            *_models_in(_DaemonModel.model_fields["board"].annotation),
            type(load_daemon_config(CONFIG).board),
        ],
    }
    fields: dict[str, FieldInfo] = dict(model_fields(LinkDefinitionSection, "link."))
    fields.update(model_fields(SignSection, "sign."))  # the web sign's own file
    # the link controller's own [ledger] keys (a ledger in a database), beside the table's
    table_ledger = LedgerSection.model_fields
    for name, field in LinkLedgerSection.model_fields.items():
        if name not in table_ledger:
            fields[f"ledger.{name}"] = field
    for section, field in _DaemonModel.model_fields.items():
        models = section_models.get(section) or _models_in(field.annotation)
        assert models, f"no model for the [{section}] section"
        for model in models:
            fields.update(model_fields(model, f"{section}."))
    return fields


def configuration_keys() -> set[str]:
    return set(configuration_fields())


def documented_rows(text: str, row_says: str = "") -> dict[str, str]:
    """``section.key`` -> its default cell, for every row of a key table under a
    ``[section]`` heading (only the rows that contain ``row_says``, when given)."""
    rows: dict[str, str] = {}
    section = ""
    in_table = in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif in_code:
            continue
        elif line.startswith("#"):
            match = re.search(r"`\[\[?([a-z_.]+)\]?\]`", line)
            section = match.group(1) if match else ""
            in_table = False
        elif line.startswith("| key |"):
            in_table = True
        elif in_table and line.startswith("| `") and row_says in line:
            cells = [cell.strip() for cell in line.split("|")]
            rows[f"{section}.{cells[1].strip('`').replace('[]', '')}"] = cells[2]
        elif not line.startswith("|"):
            in_table = False
    return rows


def documented_keys(text: str, row_says: str = "") -> set[str]:
    return set(documented_rows(text, row_says))


def default_problem(field: FieldInfo, cell: str) -> str | None:
    """Why a documented default is not the model's (None when it is)."""
    if field.is_required():
        return None if cell == "required" else f"required, the doc says {cell!r}"
    if cell == "required":
        return "the doc says required; the model has a default"
    default = field.get_default(call_default_factory=False)
    if default is None or field.default_factory is not None:
        return None  # "none", or prose: the client id, the system CAs, the paytable's ...
    value = cell.strip("`")
    if isinstance(default, bool):
        return None if value == str(default).lower() else f"default {default}, doc {cell!r}"
    if isinstance(default, int | float | Decimal):
        ok = re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value) and Decimal(value) == Decimal(default)
        return None if ok else f"default {default}, doc {cell!r}"
    return None if value == str(default) else f"default {default}, doc {cell!r}"


def test_the_key_scan_is_not_vacuous() -> None:
    keys = configuration_keys()
    for key in ("mqtt.tls.ca_certs", "progressive.meters.rate", "board.port", "board.driver"):
        assert key in keys
    assert {"keypad.lock", "ledger.retry_s", "selfcheck.software_sha256"} <= keys
    assert {"sign.colours.meter", "sign.tables.paytable", "sign.links.levels"} <= keys


def test_every_configuration_key_is_documented_and_every_documented_key_exists() -> None:
    code = configuration_keys()
    documented = documented_keys(CONFIG_DOC.read_text())
    assert code - documented == set(), "keys the models accept but docs/configuration.md lacks"
    assert documented - code == set(), "keys docs/configuration.md documents but no model has"


def test_every_documented_default_is_the_models() -> None:
    rows = documented_rows(CONFIG_DOC.read_text())
    fields = configuration_fields()
    wrong = {
        k: why
        for k, cell in rows.items()
        if k in fields and (why := default_problem(fields[k], cell))
    }
    assert wrong == {}
    # drift: a changed default is caught, whatever its type
    assert default_problem(fields["mqtt.keepalive_s"], "16")
    assert default_problem(fields["metrics.enabled"], "false")
    assert default_problem(fields["log.level"], "`debug`")
    assert default_problem(fields["board.port"], "`/dev/ttyUSB0`")


def test_a_dropped_or_invented_key_row_is_caught() -> None:
    text = CONFIG_DOC.read_text()
    dropped = re.sub(r"^\| `exclusive` \|.*\n", "", text, flags=re.MULTILINE)
    assert "board.exclusive" in configuration_keys() - documented_keys(dropped)
    invented = text.replace("| `retry_s` |", "| `retry_every_s` |")
    assert "ledger.retry_every_s" in documented_keys(invented) - configuration_keys()


def unread_keys() -> set[str]:
    """Configuration keys no code reads (no ``.name`` load outside the file loader, which
    only copies sections into the config)."""
    read: set[str] = set()
    for path in [*(ROOT / "progressived").rglob("*.py"), *(ROOT / "drivers").rglob("*.py")]:
        if path == ROOT / "progressived" / "config" / "daemon.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                read.add(node.attr)
    return {k for k in configuration_keys() if k.rsplit(".", 1)[-1] not in read}


def test_every_configuration_key_is_read_or_documented_as_not_read() -> None:
    text = CONFIG_DOC.read_text()
    assert unread_keys() == documented_keys(text, row_says="**not read**")
    # drift: a "not read" note dropped from the doc is caught
    assert documented_keys(text.replace("**not read**", "read"), row_says="**not read**") == set()


# --------------------------------------------------------------------------- commands and flags


def cli_words(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[str]:
    """``prog sub sub`` for every command and ``--flag`` for every visible option."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield " ".join((*path, name))
                yield from cli_words(sub, (*path, name))
        elif action.help != argparse.SUPPRESS:
            yield from (o for o in action.option_strings if o.startswith("--") and o != "--help")


def undocumented_cli(docs: str) -> list[str]:
    missing = []
    for prog, module in (("progressived", daemon), ("progressivectl", ctl)):
        for word in set(cli_words(module.build_parser())):
            if word.startswith("--"):
                found = re.search(re.escape(word) + r"(?![A-Za-z0-9-])", docs)
            else:
                *parents, name = word.split()
                # `prog a b`, or the last word in backquotes (`ledger verify|export`)
                found = re.search(rf"{prog} {re.escape(word)}\b", docs) or re.search(
                    rf"`(?:{prog} )?{re.escape(' '.join(parents))}[ |`]*[a-z|-]*\b{name}\b", docs
                )
            if not found:
                missing.append(f"{prog}: {word}")
    return sorted(missing)


def docs_text() -> str:
    return "\n".join(doc.read_text() for doc in DOCS)


def test_every_command_and_flag_is_documented() -> None:
    words = set(cli_words(ctl.build_parser())) | set(cli_words(daemon.build_parser()))
    assert {"ledger verify", "simulate", "run", "--config", "--deep"} <= words  # not vacuous
    assert undocumented_cli(docs_text()) == []


def test_an_undocumented_flag_is_caught() -> None:
    text = docs_text().replace("--no-integrity", "--no-integrity-check")
    assert "progressivectl: --no-integrity" in undocumented_cli(text)


# --------------------------------------------------------------------------- MQTT and the journal


def test_the_example_payloads_in_mqtt_md_satisfy_its_schemas() -> None:
    examples = [
        json.loads(block)
        for block in re.findall(r"```json\n(.*?)```", MQTT_DOC.read_text(), flags=re.DOTALL)
        if "$schema" not in block
    ]
    meters = [e for e in examples if "meter" in e and "display" in e]
    meter = next(e for e in meters if "link" not in e)
    status = next(e for e in examples if "status" in e)
    assert problems("progressive/table/tcp-07/meter/main", meter) == []
    assert problems("progressive/table/tcp-07/status", status) == []
    assert problems("progressive/table/tcp-07/meter/main", {**meter, "cents": 1.5})
    # A linked meter (docs/link.md): the same payload with the link's id, epoch and lseq.
    linked = next(e for e in meters if "link" in e)
    topic = f"progressive/table/{linked['table']}/meter/{linked['meter']}"
    assert problems(topic, linked) == []
    assert problems(topic, {**linked, "link": {**linked["link"], "epoch": -1}})
    assert problems(topic, {**linked, "link": {"id": "link-a", "epoch": 1}})
    assert problems(topic, {**linked, "link": {**linked["link"], "extra": 1}})
    # A linked meter not heard from yet is closed with the code's reason, never open at $0.00;
    # one the link refused is closed with the code's reason for that refusal.
    waiting = next(e for e in meters if WAITING_FOR_LINK in e.get("closed", []))
    assert (waiting["state"], waiting["cents"], problems(topic, waiting)) == ("closed", 0, [])
    refused = next(e for e in meters if closure_reason("unknown-meter") in e.get("closed", []))
    assert refused["state"] == "closed" and problems(topic, refused) == []


def test_every_link_metric_of_a_linked_table_is_documented() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    assert LINK_METRICS and all(name.startswith("progressive_link_") for name in LINK_METRICS)
    missing = [name for name in LINK_METRICS if f"`{name}`" not in text]
    assert not missing, f"docs/operations.md does not document {missing}"


def test_the_tables_broker_metrics_are_documented() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    for name in ("progressive_broker_connected", "progressive_broker_publish_denied_total"):
        assert f"`{name}`" in text, name


def test_mqtt_md_states_the_loss_bound_backoff_and_client_ids_the_code_uses() -> None:
    """docs/mqtt.md, "Reconnecting" and "Accounts and client ids", against the code."""
    from progressived.mqtt.client import BrokerOptions
    from progressived.mqtt.config import MqttSection
    from progressived.runtime.backoff import Backoff

    text = " ".join(MQTT_DOC.read_text().split())
    section = MqttSection()
    bound = BrokerOptions(keepalive_s=section.keepalive_s).loss_bound_s
    assert "**2 × `keepalive_s` + 2 s**" in text
    assert f"({bound:g} s with the default {section.keepalive_s} s)" in text
    backoff = Backoff(section.reconnect_initial_s, section.reconnect_max_s)
    windows = []
    for _ in range(3):
        step = backoff.step()
        windows.append(f"{step / 2:g}–{step:g} s")
        backoff.next()
    assert f"{', '.join(windows)}, ... then {backoff.max_s / 2:g}–{backoff.max_s:g} s" in text
    # user name = client id for a table (its id), a link controller (its id)
    table = MqttSection(username="tcp-07").broker_options("progressived-tcp-07")
    link = MqttSection().broker_options("link-a", default_username="link-a")
    anonymous = MqttSection().broker_options("progressived-tcp-07")
    assert (table.client_id, link.client_id) == ("tcp-07", "link-a")
    assert anonymous.client_id == "progressived-tcp-07" and "`progressived-<table-id>`" in text
    assert "use_username_as_clientid true" in text  # the broker binds them


def journaled_system_kinds() -> set[str]:
    """The kinds the code passes to a ledger ``record`` (called directly or handed on)."""
    kinds: set[str] = set()
    for path in sorted((ROOT / "progressived").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            args = list(node.args)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "record" and args:
                candidates = [args[0]]
            elif isinstance(node.func, ast.Name) and node.func.id == "Note" and args:
                candidates = [args[0]]  # Note(kind, ...): journaled with a command's events
            else:  # db(ledger.record, "kind", ...), commit(ledger.record, "kind", ...)
                candidates = [
                    args[i + 1]
                    for i, a in enumerate(args[:-1])
                    if isinstance(a, ast.Attribute) and a.attr == "record"
                ]
            for arg in candidates:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    kinds.add(arg.value)
                elif isinstance(arg, ast.JoinedStr):
                    parts = (
                        str(v.value) if isinstance(v, ast.Constant) else "*" for v in arg.values
                    )
                    kinds.add("".join(parts))
    return kinds


def unlisted_journal_kinds(not_published: set[str]) -> set[str]:
    published_engine = {e.kind for e in engine_events() if event_payload("t1", 1, e) is not None}
    documented = documented_event_kinds()
    kinds = journaled_system_kinds() | set(EVENT_TYPES) | {"ledger_created"}
    return {
        k
        for k in kinds - documented - published_engine - not_published
        if not any(re.fullmatch(k.replace("*", "[a-z_]+"), d) for d in documented)
    }


def test_every_journaled_kind_is_published_or_listed_as_not_published() -> None:
    system = journaled_system_kinds()
    assert {"daemon_stopped", "supervisor_key", "ledger_recovered", "start", "stop"} <= system
    assert unlisted_journal_kinds(undocumented_not_published()) == set()
    # drift: a kind dropped from the doc's list is caught
    assert unlisted_journal_kinds(undocumented_not_published() - {"daemon_stopped"}) == {
        "daemon_stopped"
    }


def test_ledger_md_names_every_system_kind() -> None:
    text = (ROOT / "docs" / "ledger.md").read_text()
    para = text[text.index("system kinds:") :].split("\n\n")[0]
    listed = set(re.findall(r"`([a-z_]+)`", para))
    written = journaled_system_kinds() | {"ledger_created"}
    patterns = {k for k in written if "*" in k}
    assert patterns == {"operator_*"}  # operator_close, operator_open
    matched = {k for k in listed for pat in patterns if re.fullmatch(pat.replace("*", ".+"), k)}
    assert written - patterns - listed == set(), "kinds docs/ledger.md does not name"
    assert all(any(re.fullmatch(pat.replace("*", ".+"), k) for k in listed) for pat in patterns)
    assert listed - written - matched == set(), "kinds docs/ledger.md names that nothing writes"


def ledger_md_engine_kinds(text: str) -> set[str]:
    """The kinds docs/ledger.md's "Kinds: every engine event (...)" list names."""
    para = text[text.index("Kinds: every engine event") : text.index("system kinds:")]
    return set(re.findall(r"`([a-z_]+)`", para))


def test_ledger_md_names_every_engine_kind() -> None:
    text = (ROOT / "docs" / "ledger.md").read_text()
    listed = ledger_md_engine_kinds(text)
    assert set(EVENT_TYPES) - listed == set(), "engine kinds docs/ledger.md does not name"
    assert listed - set(EVENT_TYPES) == set(), "engine kinds docs/ledger.md names that do not exist"
    # drift: a kind dropped from the list is caught
    assert "late_bet" not in ledger_md_engine_kinds(text.replace("`late_bet`", "late bet"))


# --------------------------------------------------------------------------- the wire protocol


def test_protocol_md_frame_sizes_are_the_codecs() -> None:
    text = (ROOT / "docs" / "protocol.md").read_text()
    sizes = text[text.index("**Sizes.**") :].split("\n\n")[0]
    assert f"the longest is\n{p.MAX_BODY} (" in sizes or f"the longest is {p.MAX_BODY} (" in sizes
    assert f"**{p.MAX_ENCODED} bytes**" in sizes
    assert f"**{p.MAX_WIRE} bytes**" in sizes
    assert f"a buffer of {p.MAX_ENCODED} bytes" in sizes
    # the longest frame version 1 sends: an ERROR with the longest text
    error = p.BoardErrorReport(code=0, text="x" * p.MAX_TEXT_LEN).encode()
    wire = len(p.encode_frame(p.MsgType.ERROR, 1, error))
    assert f"{wire} bytes on the wire" in sizes
    hello = p.Hello("b" * p.MAX_ID_LEN, 1, p.MAX_SEATS, 1).encode()
    lights = p.Lights((p.LightCode.IDLE,) * p.MAX_SEATS).encode()
    key = p.Key(1, "K" * p.MAX_CODE_LEN).encode()
    assert len(error) > max(len(hello), len(lights), len(key))


def _n(value: int) -> str:
    return f"{value:,}"


def _codes_raised(path: Path, exception: str) -> set[str]:
    """The literal codes ``exception(code, ...)`` is raised with in a module (every string
    in its first argument: ``MessageError(_WIRE_CODES.get(c, "bad-json"), ...)`` too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == exception:
            for part in ast.walk(node.args[0]) if node.args else ():
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    found.add(part.value)
    return found


def link_decoder_codes() -> set[str]:
    """Every code the link's decoder refuses with (its own and the wire decoder's, mapped)."""
    from progressived.link.core import messages
    given = _codes_raised(ROOT / "progressived" / "link" / "core" / "messages.py", "MessageError")
    return given | set(messages._WIRE_CODES.values())


def bound_problems(docs: dict[str, str]) -> list[str]:
    """Where the docs' bounds on outside bytes are not the code's (empty when they agree)."""
    from progressived.core import wirejson
    from progressived.engine import simulate
    from progressived.link.core import messages
    from progressived.runtime import control
    wanted = {
        "link.md": [
            f"at most **{_n(messages.MAX_PAYLOAD)} bytes**",
            f"at most **{wirejson.MAX_DEPTH}** deep",
            _n(wirejson.MAX_INT),
            f"at most {messages.MAX_REASON} characters",
        ],
        "mqtt.md": [f"**{_n(wirejson.MAX_MESSAGE)} bytes**", f"**{wirejson.MAX_DEPTH}** deep"],
        "operations.md": [
            f"at most **{_n(control.MAX_REQUEST)} bytes**",
            f"within\n**{control.REQUEST_TIMEOUT_S:g} s**",
            f"at most {control.MAX_ANSWER // 2**20} MiB",
        ],
        "simulate.md": [
            f"**{_n(simulate.MAX_SCRIPT_BYTES)} bytes**",
            f"**{_n(simulate.MAX_LINE)} characters**",
        ],
    }
    out = [f"{doc}: no {text!r}" for doc, texts in wanted.items() for text in texts
           if text not in docs[doc]]  # fmt: skip
    # Every code the link's decoder gives is in the first row of docs/link.md's refusal codes.
    link = docs["link.md"]
    section = link[link.index("### Refusal codes") :]
    row = section[section.index("\n| `bad-json`") :].split("\n")[1]
    given = link_decoder_codes()
    out += [f"link.md: refusal code {c} missing" for c in sorted(given) if f"`{c}`" not in row]
    # Every code the control socket answers has a row in docs/operations.md.
    ops = docs["operations.md"]
    table = ops[ops.index("**Limits and error answers.**") :].split("\n\n")[2]
    answered = {*wirejson.CODES, *_codes_raised(ROOT / "progressived" / "runtime" / "control.py", "WireError")}
    answered.discard("no-answer")  # the client's, not an answer
    out += [f"operations.md: code {c} missing" for c in sorted(answered)
            if f"| `{c}` |" not in table]  # fmt: skip
    # The link broker's packet bound leaves room for a table topic's largest message.
    size = re.search(r"max_packet_size (\d+)", link)
    if size is None or int(size.group(1)) < wirejson.MAX_MESSAGE + 1024:
        out.append("link.md: max_packet_size below a table topic's message and its topic")
    return out


def test_the_bounds_on_outside_bytes_are_the_decoders() -> None:
    docs = {n: (ROOT / "docs" / n).read_text() for n in ("link.md", "mqtt.md", "operations.md",
                                                         "simulate.md")}  # fmt: skip
    assert given_codes_are_not_vacuous()
    assert bound_problems(docs) == []
    # drift: a changed number, a dropped code row, a smaller packet size are caught
    drifted = dict(docs, **{"simulate.md": docs["simulate.md"].replace("1,000 characters", "999")})
    assert bound_problems(drifted) == ["simulate.md: no '**1,000 characters**'"]
    drifted = dict(docs, **{"operations.md": docs["operations.md"].replace("| `timeout` |", "|")})
    assert bound_problems(drifted) == ["operations.md: code timeout missing"]
    row = "`too-large`, `too-deep` |"
    drifted = dict(docs, **{"link.md": docs["link.md"].replace(row, "`too-large` |")})
    assert bound_problems(drifted) == ["link.md: refusal code too-deep missing"]


def given_codes_are_not_vacuous() -> bool:
    codes = {"bad-json", "bad-field", "bad-type", "out-of-range", "too-large", "too-deep"}
    return link_decoder_codes() == codes


# --------------------------------------------------------------------------- architecture.md


def missing_paths(text: str) -> list[str]:
    """Module paths a doc names that do not exist, except in a block marked ``(target)``."""
    missing = []
    for block in re.split(r"\n\s*\n|\n(?=\* )", text):
        if "(target)" in block:
            continue
        for found in re.findall(r"\b(?:progressived|drivers|tests|systemd|docs)/[\w./-]*", block):
            path = found.rstrip(".")
            if not (ROOT / path).exists():
                missing.append(path)
    return missing


def test_architecture_md_names_modules_that_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert "progressived/ledger/plan.py" in text or "`plan.py`" in text
    assert missing_paths(text) == []
    assert missing_paths(text + "\n\nSee `progressived/nowhere.py`.\n") == [
        "progressived/nowhere.py"
    ]


def test_the_readme_links_every_doc() -> None:
    readme = (ROOT / "README.md").read_text()
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{doc.name})" in readme, doc.name


def packages() -> list[str]:
    """Every package of the product, as a path (``progressived/link/core``)."""
    roots = [ROOT / "progressived", ROOT / "drivers" / "progressived_drivers"]
    return sorted(
        str(init.parent.relative_to(ROOT))
        for root in roots
        for init in root.rglob("__init__.py")
        if "static" not in init.parts
    )


def readme_gaps(readme: str) -> list[str]:
    """Packages and commands the README does not name (its layout and command list)."""
    missing = [f"package {p}" for p in packages() if f"`{p}/`" not in readme]
    for prog, module in (("progressived", daemon), ("progressivectl", ctl)):
        for word in sorted(set(cli_words(module.build_parser()))):
            if word.startswith("--") or " " in word:
                continue  # flags and sub-commands: the docs (test above)
            if not re.search(rf"`{prog} {re.escape(word)}\b", readme):
                missing.append(f"command {prog} {word}")
    return missing


def test_the_readme_names_every_package_and_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(packages()) > 10 and "progressived/link/core" in packages()  # not vacuous
    assert readme_gaps(readme) == []
    assert "package progressived/storage" in readme_gaps(readme.replace("`progressived/storage/`", ""))


# Words of a plan or a ticket, not of the product as it is: docs speak of what is built.
STALE_PROSE = (
    r"\bissue #?\d+",
    r"not supported by this release",
    r"\bwill be\b",
    r"\bto come\b(?!\s+(?:online|back|up)\b)",
    r"what is built so far",
    r"/etc/progressive/",
)


def stale_prose(name: str, text: str) -> list[str]:
    return [
        f"{name}:{text[: m.start()].count(chr(10)) + 1}: {m.group(0)!r}"
        for pattern in STALE_PROSE
        for m in re.finditer(pattern, text, flags=re.IGNORECASE)
    ]


def test_docs_and_code_speak_of_the_product_not_of_tickets_or_plans() -> None:
    found: list[str] = []
    for path in [*DOCS, ROOT / "README.md", *(ROOT / "progressived").rglob("*.py")]:
        found += stale_prose(str(path.relative_to(ROOT)), path.read_text())
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name != "test_docs.py":
            found += [f for f in stale_prose(str(path.relative_to(ROOT)), path.read_text()) if "issue" in f.lower()]
    assert found == []
    assert stale_prose("x.md", "as issue 13 said; linked tables will be supported") == [
        "x.md:1: 'issue 13'",
        "x.md:1: 'will be'",
    ]


# --------------------------------------------------------------------------- the link's refusals


def refusal_table(text: str) -> dict[str, tuple[bool, bool]]:
    """docs/link.md's "Refusal codes": per code, (consumes the sequence, closes the linked
    meters), from the table's third and last columns."""
    section = text.split("### Refusal codes", 1)[1].split("\n### ", 1)[0]
    out: dict[str, tuple[bool, bool]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        for code in re.findall(r"`([a-z-]+)`", cells[0]):
            out[code] = (cells[2].startswith("yes"), cells[4] == "yes")
    return out


def test_link_md_says_which_refusals_close_the_linked_meters_as_the_table_does() -> None:
    table = refusal_table((ROOT / "docs" / "link.md").read_text())
    assert len(table) >= 20  # every code has its row
    closing = {(code, final) for code, (final, closes) in table.items() if closes}
    want = {(c, True) for c in CLOSING_FINAL} | {(c, False) for c in CLOSING_UNCONSUMED}
    assert closing == want
    drifted = (ROOT / "docs" / "link.md").read_text().replace("| no | configuration", "| yes | c")
    assert refusal_table(drifted)["unknown-table"][0] is True  # the parse is not vacuous


def test_the_linked_table_and_link_examples_of_the_docs_pair() -> None:
    """docs/configuration.md's link file and linked table file play together (the check
    ``progressived check-config TABLE --link LINK`` runs), and so does the shipped pair."""
    blocks = [tomllib.loads(b, parse_float=Decimal) for b in toml_blocks(CONFIG_DOC.read_text())]
    link = link_config_from(next(b for b in blocks if "link" in b and "table" not in b), CONFIG)
    tables = [b for b in blocks if "table" in b and "link" in b]
    assert tables, "docs/configuration.md shows a linked table"
    for data in tables:
        assert pair_problems(daemon_config_from(data, CONFIG), link) == []
    shipped = load_daemon_config(ROOT / "config" / "linked-table.toml")
    assert pair_problems(shipped, load_link_config(ROOT / "config" / "link.toml")) == []
    broken = {**tables[0], "table": {**tables[0]["table"], "id": "uth-99"}}
    assert pair_problems(daemon_config_from(broken, CONFIG), link)  # not vacuous

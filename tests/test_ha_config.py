"""The configurations shipped for the replicated link database (config/ha/, docs/ha.md) say
what the rig runs: the same synchronous settings and timings
(progressived/testing/ha/settings.py), the same shape of Patroni file as the rig's nodes
(which Patroni accepts: tests/reliability/test_ha_rig.py runs them), etcd's v2 API on, and three nodes
whose files differ only in their name and addresses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from progressived.testing.ha import settings
from progressived.testing.ha.patroni import PatroniNode, Secrets
from tests.conftest import ROOT

HA = ROOT / "config" / "ha"
NODES = ("db1", "db2", "db3")


def load(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((HA / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def shape(value: object) -> object:
    """The keys of nested mappings (values dropped): a file's shape."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    return type(value).__name__ if not isinstance(value, list) else "list"


def test_each_patroni_file_carries_the_synchronous_settings_and_timings() -> None:
    for node in NODES:
        config = load(f"patroni-{node}.yml")
        assert config["name"] == node and config["scope"] == settings.SCOPE
        assert config["namespace"] == settings.NAMESPACE
        assert config["bootstrap"]["dcs"] == settings.DCS
        parameters = config["postgresql"]["parameters"]
        assert {k: parameters[k] for k in settings.PARAMETERS} == settings.PARAMETERS
        assert config["postgresql"]["parameters"]["synchronous_commit"] == "on"
        assert "etcd3" not in config and len(config["etcd"]["hosts"]) == 3
        assert config["postgresql"]["bin_dir"] == "/usr/lib/postgresql/15/bin"
        auth = config["postgresql"]["authentication"]
        assert {role: auth[role]["username"] for role in auth} == {
            "superuser": settings.SUPERUSER,
            "replication": settings.REPLICATION_USER,
            "rewind": settings.REWIND_USER,
        }
        assert all("password" not in entry for entry in auth.values())  # from the environment
    dcs = settings.DCS
    assert dcs["loop_wait"] + 2 * dcs["retry_timeout"] <= dcs["ttl"]  # type: ignore[operator]


def test_the_shipped_files_have_the_shape_the_rig_runs(tmp_path: Path) -> None:
    node = PatroniNode("db1", tmp_path, ["127.0.0.1:2379"], Secrets("a", "b", "c"), None, 5432, 8008)
    rig = node.config()
    for role in rig["postgresql"]["authentication"].values():
        del role["password"]  # shipped files leave passwords to the environment
    del rig["log"]
    shipped = load("patroni-db1.yml")
    rig_parameters = rig["postgresql"].pop("parameters")
    shipped_parameters = shipped["postgresql"].pop("parameters")
    assert shape(shipped) == shape(rig)
    assert set(settings.PARAMETERS) <= set(rig_parameters) & set(shipped_parameters)


def test_the_nodes_differ_only_in_name_and_addresses() -> None:
    def neutral(node: str) -> str:
        text = (HA / f"patroni-{node}.yml").read_text()
        return re.sub(rf"\b{node}\b(?!:2379)", "dbN", text)

    assert neutral("db1") == neutral("db2") == neutral("db3")
    members = [load(f"etcd-{node}.yml") for node in NODES]
    for node, member in zip(NODES, members, strict=True):
        assert member["name"] == node and member["enable-v2"] is True
        assert member["advertise-client-urls"] == f"http://{node}:2379"
        assert member["initial-cluster"] == members[0]["initial-cluster"]
        assert member["initial-cluster"].count("=http://") == 3
    hosts = load("patroni-db1.yml")["etcd"]["hosts"]
    assert hosts == [m["advertise-client-urls"].removeprefix("http://") for m in members]

"""The power-up self-check: is this the approved software, configuration and ledger?

* the software: a SHA-256 (and a CRC-16, the minimum regulators name) over every source
  and data file of the installed ``progressived`` and ``drivers`` packages and over the
  name and version of every installed library they depend on (so an upgraded or replaced
  library changes it as a changed source file does), compared with ``[selfcheck]
  software_sha256`` when the approved value is configured;
* the configuration: the SHA-256 of the configuration file and of the paytable file;
* the ledger: the hash chain of its last rows recomputed up to the head (the full chain is
  ``progressivectl ledger verify``; the ledger's own recovery already checked the rows
  after its last snapshot).

A failed check keeps the progressive closed and says why; every check is journaled.
"""

from __future__ import annotations

import binascii
import hashlib
import importlib.util
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from progressived.ledger.errors import LedgerError
from progressived.ledger.tail import ledger_head

PACKAGES = ("progressived", "progressived_drivers")
SUFFIXES = {".py", ".toml", ".json"}
DISTRIBUTION = "progressived"  # the installed distribution whose requirements are followed
NOT_INSTALLED = "not installed"


def package_files() -> list[tuple[str, Path]]:
    """(name, path) of every file the software digest covers, in a stable order."""
    out: list[tuple[str, Path]] = []
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                out.append((f"{package}/{path.relative_to(root).as_posix()}", path))
    return out


def dependencies(root: str = DISTRIBUTION) -> dict[str, str]:
    """Installed version of every library ``root`` needs, by normalised name, sorted.

    Follows the installed distributions' requirements (``Requires-Dist``) from ``root``,
    transitively, with their markers evaluated as pip evaluates them here: the core
    dependencies and what they pull in, not the extras (the web sign's aiohttp, the test
    tools), which the daemon does not import. A requirement that is not installed is listed
    as ``not installed``. Without ``root``'s own metadata (a source tree on ``sys.path``)
    the list is empty.
    """
    found: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    followed: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in followed:
            continue
        followed.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            found[name] = NOT_INSTALLED
            continue
        if name != root:
            found[name] = dist.version
        for text in dist.requires or ():
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue  # not ours to judge; pip would have refused to install it
            wanted = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in wanted):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return dict(sorted(found.items()))


def software_digest() -> tuple[str, str, int]:
    """SHA-256 and CRC-16/CCITT (hex) over the installed software, and the file count.

    The records: every package file (``name NUL content NUL``), then every dependency
    (``dependency/NAME NUL VERSION NUL``, in name order).
    """
    sha = hashlib.sha256()
    crc = 0
    files = package_files()
    records = [name.encode() + b"\0" + path.read_bytes() + b"\0" for name, path in files]
    records += [
        f"dependency/{name}".encode() + b"\0" + version.encode() + b"\0"
        for name, version in dependencies().items()
    ]
    for record in records:
        sha.update(record)
        crc = binascii.crc_hqx(record, crc)
    return sha.hexdigest(), f"{crc:04x}", len(files)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class SelfCheckResult:
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    def fail(self, problem: str) -> None:
        self.ok = False
        self.problems.append(problem)


def run_selfcheck(
    *,
    ledger_path: Path,
    config_path: Path | None,
    paytable_path: Path | None,
    expected_software: str | None,
) -> SelfCheckResult:
    """All the checks; never raises (a failure is a result)."""
    result = SelfCheckResult()
    sha, crc, files = software_digest()
    result.detail.update(
        software_sha256=sha, software_crc16=crc, software_files=files, dependencies=dependencies()
    )
    if expected_software and expected_software.lower() != sha:
        result.fail(
            f"software digest {sha[:16]}... is not the approved {expected_software[:16]}..."
        )
    for key, path in (("config_sha256", config_path), ("paytable_sha256", paytable_path)):
        if path is None:
            continue
        try:
            result.detail[key] = file_digest(path)
        except OSError as exc:
            result.fail(f"cannot read {path}: {exc.strerror or exc}")
    try:
        head, head_hash, checked = ledger_head(ledger_path)
        result.detail.update(
            ledger_head_seq=head, ledger_head_hash=head_hash, ledger_rows_checked=checked
        )
    except ValueError as exc:
        result.fail(f"ledger chain: {exc}")
    except LedgerError as exc:  # missing, empty or unreadable: a result, not a traceback
        result.fail(f"ledger: {exc}")
    return result

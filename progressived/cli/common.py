"""What both commands share: exit codes, the argument parser, expected faults, progress.

Expected faults (a missing file or group, another table's ledger, a closed pipe, Ctrl-C)
end with one clear line on standard error and a documented exit code, never a traceback:
the exit codes are a contract (docs/operations.md, "Exit codes").
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from progressived.ledger.errors import LedgerError


class Exit(IntEnum):
    """Exit statuses of ``progressived`` and ``progressivectl`` (docs/operations.md)."""

    OK = 0
    FAILED = 1  # a check failed, the daemon refused, or the daemon stopped on a fault
    USAGE = 2  # bad usage, a bad configuration or input file, the daemon unreachable
    LEDGER_MISSING = 3  # no ledger (or no ledger directory): `progressived init` first
    # another table's ledger, a newer schema, not a ledger; or a configuration that would
    # abandon a local meter's money in it (progressived.ledger.conversion)
    LEDGER_MISMATCH = 4
    LEDGER_UNAVAILABLE = 5  # the ledger cannot be written (permissions, another writer)
    LEDGER_EXISTS = 6  # `progressived init` refused: there is a file at the ledger path
    CANNOT_LISTEN = 7  # a port or control socket it must listen on is taken or not bindable
    # The installation lacks what the command needs: this system's SQLite is older than the
    # ledger's schema needs, or an optional part (the `web` extra) is not installed.
    MISSING_REQUIREMENT = 8
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
    BROKEN_PIPE = 141  # the reader of the output went away, e.g. `| head` (128 + SIGPIPE)


def ledger_status(exc: LedgerError) -> Exit:
    """The exit status for a ledger that cannot be used.

    The ledger's modules are imported here, not at the top: ``progressived`` and
    ``progressivectl`` import this module before :func:`guarded` is in place, and the less
    they load by then, the shorter the moment in which Ctrl-C could still end the process
    with a traceback instead of one line."""
    from progressived.ledger.errors import (  # noqa: PLC0415 - see the docstring
        Fenced,
        LedgerExists,
        LedgerMismatch,
        LedgerMissing,
        LedgerUnavailable,
    )
    from progressived.storage.sqlite_version import SQLiteTooOld  # noqa: PLC0415

    if isinstance(exc, LedgerMissing):
        return Exit.LEDGER_MISSING
    if isinstance(exc, LedgerMismatch):
        return Exit.LEDGER_MISMATCH
    if isinstance(exc, LedgerUnavailable | Fenced):  # Fenced: another writer has it now
        return Exit.LEDGER_UNAVAILABLE
    if isinstance(exc, LedgerExists):
        return Exit.LEDGER_EXISTS
    if isinstance(exc, SQLiteTooOld):
        return Exit.MISSING_REQUIREMENT
    return Exit.FAILED


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class CliParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that reports a misspelled flag as what it is.

    argparse checks required arguments before it looks at unknown ones, so
    ``close --operater ana --reason x`` said "the following arguments are required:
    --operator"; and with abbreviations allowed a prefix silently meant a flag. Here
    abbreviations are off, and a required-argument error is replaced by the unknown
    flag(s) seen, with the closest known flag as a suggestion.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._seen: list[str] = []

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        self._top_level = True
        return super().parse_args(args, namespace)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._seen = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if not getattr(self, "_top_level", False) and self.unknown_flags():
            # A subcommand's parser: say so here, with its usage and a suggestion, rather
            # than the top-level "unrecognized arguments".
            self.error("unrecognized arguments")
        return parsed, extras

    def unknown_flags(self) -> list[str]:
        """Tokens that look like flags this parser (or, before it, its parent) lacks."""
        found: list[str] = []
        for token in self._seen:
            if token == "--":
                break
            if self._subparsers is not None and token in self._subcommands():
                break  # what follows belongs to the subcommand's own parser
            if not token.startswith("-") or token == "-" or _NEGATIVE_NUMBER.match(token):
                continue
            if token.split("=", 1)[0] not in self._option_string_actions:
                found.append(token)
        return found

    def _subcommands(self) -> set[str]:
        names: set[str] = set()
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                names.update(action.choices)
        return names

    def error(self, message: str) -> NoReturn:
        unknown = self.unknown_flags()
        about_arguments = ("the following arguments are required", "unrecognized", "argument ")
        if unknown and message.startswith(about_arguments):
            flag = unknown[0].split("=", 1)[0]
            near = difflib.get_close_matches(flag, list(self._option_string_actions), n=1)
            message = f"unknown flag {flag}" + (f" (did you mean {near[0]}?)" if near else "")
        super().error(message)


def add_completion(sub: Any, parser_of: Callable[[], argparse.ArgumentParser]) -> None:
    """``completion bash|zsh|tcsh``: a shell completion script generated by shtab."""
    p: argparse.ArgumentParser = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or tcsh)",
        description="Print a completion script for this command, generated by shtab. "
        'Bash: eval "$(PROG completion bash)" or save it in '
        "/etc/bash_completion.d/; zsh: save it as _PROG in a directory on $fpath.",
    )
    p.add_argument("shell", choices=("bash", "zsh", "tcsh"))

    def run(args: argparse.Namespace) -> int:
        import shtab  # noqa: PLC0415 - only this command needs it

        parser = parser_of()
        print(shtab.complete(parser, shell=args.shell))
        return Exit.OK

    p.set_defaults(handler=run)


def print_config_error(prog: str, exc: Exception) -> None:
    """A configuration's problems, one line each (``PROG: FILE: key: reason``)."""
    for line in str(exc).splitlines():
        print(f"{prog}: {line}", file=sys.stderr)


def guarded(prog: str, body: Callable[[], int]) -> int:
    """Run a command; Ctrl-C ends it with one line and a closed output pipe (``| head``)
    silently, as the shell's own tools do; never a traceback."""
    try:
        return body()
    except KeyboardInterrupt:
        # CPython marks an interrupt that escaped code run by exec() of a string (as
        # dataclasses does while modules load) as unhandled, and at exit kills the process
        # with SIGINT instead of exiting 130, even though it was handled here. The next
        # such exec clears that mark.
        exec("None")
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # Whatever is still buffered for stdout cannot be written either: point stdout
        # at /dev/null so that the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return Exit.BROKEN_PIPE


@contextmanager
def progress(what: str, unit: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on standard error, only when it is a terminal (never in logs/pipes).

    Yields ``show(done, total)``; a no-op when standard error is not a terminal.
    """
    if not sys.stderr.isatty():
        yield lambda _done, _total: None
        return
    from tqdm import tqdm  # noqa: PLC0415 - only on a terminal

    with tqdm(desc=what, unit=unit, unit_scale=True, leave=False, file=sys.stderr) as bar:

        def show(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        yield show

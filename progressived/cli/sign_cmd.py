"""``progressivectl sign``: a terminal meter sign, or with ``--web`` a sign page server.

Exit status: 0 after ``--count`` updates or Ctrl-C; 2 for bad usage, an unreadable
password/TLS file or a ``--listen`` address that cannot be bound; 3 when the broker refuses
the login or a subscription; 8 for ``--web`` without the ``web`` extra installed. An
unreachable broker is retried (one line on stderr per outage), never an exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from progressived.cli import extras
from progressived.cli.common import Exit
from progressived.mqtt.client import broker_address
from progressived.signs.broker import (
    EXIT_USAGE,
    PASSWORD_ENV,
    BrokerLogin,
    LoginError,
    check_tls_files,
    resolve_password,
)
from progressived.signs.terminal import run_sign
from progressived.signs.web import DEFAULT_PORT
from progressived.signs.web.look import SignConfig


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "sign",
        help="a terminal meter sign subscribed to the broker",
        description="Show one table's meter as a sign would (docs/mqtt.md). Exit status: "
        "0 done, 2 bad usage or file, 3 not authorised, 8 --web without the web extra "
        "installed; an unreachable broker is retried.",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default 1883, or 8883 with --tls")
    p.add_argument(
        "--broker",
        action="append",
        metavar="HOST:PORT",
        help="a broker of a list (repeat it: two brokers, docs/mqtt.md); the sign moves to the "
        "next when its broker is lost; instead of --host/--port",
    )
    p.add_argument("--prefix", default="progressive")
    p.add_argument(
        "--table",
        action="append",
        help="the table id whose meter this sign shows (required without --web; with --web "
        "repeat it to show several tables; only the tables named are ever shown)",
    )
    p.add_argument(
        "--link",
        action="append",
        help="show a linked meter of this link (docs/link.md) instead of a table's; with --web "
        "repeat it to show several links beside the tables given",
    )
    p.add_argument("--meter", default=None, help="meter id to show (main; a link's: pmg)")
    p.add_argument("--plain", action="store_true", help="one line per update instead of big digits")
    p.add_argument("--count", type=int, help="exit after this many updates")
    web = p.add_argument_group("web sign (docs/sign.md)")
    web.add_argument("--web", action="store_true", help="serve the sign as a web page")
    web.add_argument(
        "--listen",
        default=f"127.0.0.1:{DEFAULT_PORT}",
        help=f"HOST:PORT the page is served on (default 127.0.0.1:{DEFAULT_PORT}, loopback)",
    )
    web.add_argument(
        "--config",
        type=Path,
        help="the sign's own file: title, colours, logo, tables and links shown, their names "
        "and paytables (docs/sign.md)",
    )
    web.add_argument(
        "--from",
        dest="from_files",
        type=Path,
        action="append",
        metavar="FILE",
        help="a table's or link controller's configuration file: show its table (or the link "
        "and its member tables) with its paytable; repeat for several; with nothing named, "
        "/etc/progressived/progressived.toml and link.toml if present (docs/sign.md)",
    )
    web.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="pages and requests served at once; more are refused with 503 (1024)",
    )
    web.add_argument(
        "--banner-s",
        type=float,
        default=None,
        help="seconds a winner banner is held (30, or the --config file's banner_s)",
    )
    web.add_argument(
        "--keepalive-s",
        type=int,
        default=5,
        help="MQTT keepalive; the page shows STALE when the broker misses about two (5)",
    )
    login = p.add_argument_group("login (docs/mqtt.md: the broker refuses anonymous signs)")
    login.add_argument("--username", help="the sign's broker user, e.g. sign-lobby")
    login.add_argument(
        "--password-file",
        type=Path,
        help=f"read the password from this file (or set {PASSWORD_ENV}; both stay out of ps)",
    )
    login.add_argument("--password", help="the password on the command line (visible in ps)")
    tls = p.add_argument_group("TLS")
    tls.add_argument("--tls", action="store_true", help="connect with TLS (system CAs by default)")
    tls.add_argument(
        "--cafile", type=Path, help="CA certificate(s) to verify the broker (implies --tls)"
    )
    tls.add_argument("--certfile", type=Path, help="client certificate (implies --tls)")
    tls.add_argument("--keyfile", type=Path, help="client key (implies --tls)")
    tls.add_argument(
        "--tls-insecure", action="store_true", help="do not check the broker's host name"
    )
    p.set_defaults(handler=run)


def login_from(args: argparse.Namespace) -> BrokerLogin:
    """The broker login the options describe; :class:`LoginError` if they cannot be used."""
    use_tls = bool(args.tls or args.cafile or args.certfile or args.keyfile)
    port = args.port if args.port is not None else (8883 if use_tls else 1883)
    brokers = [(args.host, port)]
    if args.broker:
        try:
            brokers = [broker_address(text, port) for text in args.broker]
        except ValueError as exc:
            raise LoginError(f"--broker: {exc}") from None
    login = BrokerLogin(
        host=brokers[0][0],
        port=brokers[0][1],
        fallbacks=tuple(brokers[1:]),
        username=args.username,
        password=resolve_password(args.password, args.password_file),
        tls=use_tls,
        cafile=args.cafile,
        certfile=args.certfile,
        keyfile=args.keyfile,
        tls_insecure=args.tls_insecure,
    )
    if login.password is not None and login.username is None:
        raise LoginError("a password needs --username")
    check_tls_files(login)
    return login


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets) -> (host, port); LoginError if it is not one."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise LoginError(f"--listen wants HOST:PORT, not {text!r}")
    return host, int(port)


def run_web(args: argparse.Namespace, login: BrokerLogin) -> int:
    # Imported here: aiohttp is ~25 MB and 0.2 s that no other progressivectl command needs.
    from progressived.signs.web.server import SignServer, serve  # noqa: PLC0415

    host, port = listen_address(args.listen)
    if (args.banner_s is not None and args.banner_s < 0) or args.keepalive_s < 1:
        raise LoginError("--banner-s must be >= 0 and --keepalive-s >= 1")
    config = SignConfig()
    if args.config is not None:
        # pydantic (validation) only when there is a file to validate.
        from progressived.signs.web.config import SignConfigError, load_sign_config  # noqa: PLC0415

        try:
            config = load_sign_config(args.config)
        except SignConfigError as exc:
            raise LoginError(str(exc)) from None
    config = _with_controller_files(args, config)
    # The command line adds to the file's tables and links; its --banner-s wins.
    tables = tuple(dict.fromkeys([*config.shown("table"), *(args.table or ())]))
    links = tuple(dict.fromkeys([*config.shown("link"), *(args.link or ())]))
    if not tables and not links:
        raise LoginError(
            "name what this sign shows: --table, --link, --config or --from FILE "
            "(no readable /etc/progressived/progressived.toml or link.toml)"
        )
    if args.max_connections is not None and args.max_connections < 1:
        raise LoginError("--max-connections must be at least 1")
    server = SignServer(
        login,
        prefix=args.prefix,
        tables=tables,
        links=links,
        banner_s=config.banner_s if args.banner_s is None else args.banner_s,
        keepalive_s=args.keepalive_s,
        config=config,
    )
    if args.max_connections is not None:
        server.max_connections = args.max_connections
    ready = asyncio.Event()

    async def main() -> int:
        task = asyncio.create_task(serve(server, host, port, ready))
        # SIGTERM (systemd, the demo) stops the server cleanly: status 0, like Ctrl-C.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if ready.is_set():
            where = f"[{host}]" if ":" in host else host
            print(f"sign: serving http://{where}:{port}/ for {login.url}", file=sys.stderr)
            sys.stderr.flush()
        waiter.cancel()
        try:
            status = await task
        except asyncio.CancelledError:
            return 0
        if status:
            print(
                f"sign: broker {login.url} refused this sign: {server.broker_detail}",
                file=sys.stderr,
            )
        return status

    try:
        return asyncio.run(main())
    except OSError as exc:
        print(
            f"progressivectl sign: cannot listen on {args.listen}: {exc.strerror}", file=sys.stderr
        )
        return EXIT_USAGE


def _with_controller_files(args: argparse.Namespace, config: SignConfig) -> SignConfig:
    """The sources of ``--from`` files (or, with nothing named, the shipped paths)."""
    from progressived.signs.web.sources import (  # noqa: PLC0415
        DEFAULT_FILES,
        SourcesError,
        looks_from_files,
        with_sources,
    )

    files = list(args.from_files or ())
    if not files and not args.table and not args.link and not config.sources:
        # Only those this user may read: the table's file is 0640 root:progressived, and a
        # sign running as its own user is then told to name its tables (exit 2), not refused.
        files = [path for path in DEFAULT_FILES if path.is_file() and os.access(path, os.R_OK)]
    if not files:
        return config
    try:
        return with_sources(config, looks_from_files(files))
    except SourcesError as exc:
        raise LoginError(str(exc)) from None


def run_link(args: argparse.Namespace, login: BrokerLogin) -> int:
    """The terminal sign of a linked meter (the link's retained topic only)."""
    from progressived.signs.link import LinkSignView  # noqa: PLC0415

    view = LinkSignView(args.prefix, args.link[0], args.meter or "pmg")
    try:
        return asyncio.run(
            run_sign(
                login, args.prefix, "", view.meter_id, plain=args.plain, count=args.count, view=view
            )
        )
    except KeyboardInterrupt:
        return 0


def run(args: argparse.Namespace) -> int:
    try:
        login = login_from(args)
        if args.web:
            if (missing := extras.web_missing("progressivectl sign --web")) is not None:
                print(missing, file=sys.stderr)
                return Exit.MISSING_REQUIREMENT
            return run_web(args, login)
        if args.link:
            if len(args.link) > 1 or args.table:
                raise LoginError("the terminal sign shows one meter: give --link once, no --table")
            return run_link(args, login)
        if not args.table or len(args.table) > 1:
            raise LoginError("the terminal sign shows one table: give --table once")
    except LoginError as exc:
        print(f"progressivectl sign: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 0
    try:
        return asyncio.run(
            run_sign(
                login,
                args.prefix,
                args.table[0],
                args.meter or "main",
                plain=args.plain,
                count=args.count,
            )
        )
    except KeyboardInterrupt:
        return 0

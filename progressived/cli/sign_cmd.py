"""``progressivectl sign``: a terminal meter sign.

Exit status: 0 after ``--count`` updates or Ctrl-C; 2 for bad usage or an unreadable
password/TLS file; 3 when the broker refuses the login or a subscription. An unreachable
broker is retried (one line on stderr per outage), never an exit.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from progressived.sign import run_sign
from progressived.sign_broker import (
    EXIT_USAGE,
    PASSWORD_ENV,
    BrokerLogin,
    LoginError,
    check_tls_files,
    resolve_password,
)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "sign",
        help="a terminal meter sign subscribed to the broker",
        description="Show one table's meter as a sign would (docs/mqtt.md). Exit status: "
        "0 done, 2 bad usage or file, 3 not authorised; an unreachable broker is retried.",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default 1883, or 8883 with --tls")
    p.add_argument("--prefix", default="progressive")
    p.add_argument("--table", required=True, help="the table id whose meter this sign shows")
    p.add_argument("--meter", default="main", help="meter id to show")
    p.add_argument("--plain", action="store_true", help="one line per update instead of big digits")
    p.add_argument("--count", type=int, help="exit after this many updates")
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
    login = BrokerLogin(
        host=args.host,
        port=args.port if args.port is not None else (8883 if use_tls else 1883),
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


def run(args: argparse.Namespace) -> int:
    try:
        login = login_from(args)
    except LoginError as exc:
        print(f"progressivectl sign: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(
            run_sign(login, args.prefix, args.table, args.meter, plain=args.plain, count=args.count)
        )
    except KeyboardInterrupt:
        return 0

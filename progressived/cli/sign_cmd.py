"""``progressivectl sign``: a terminal meter sign."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from progressived.sign import run_sign


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "sign", help="a terminal meter sign subscribed to the broker"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=1883)
    p.add_argument("--prefix", default="progressive")
    p.add_argument("--meter", default="main", help="meter id to show")
    p.add_argument("--plain", action="store_true", help="one line per update instead of big digits")
    p.add_argument("--count", type=int, help="exit after this many updates")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(
            run_sign(
                args.host, args.port, args.prefix, args.meter, plain=args.plain, count=args.count
            )
        )
    except KeyboardInterrupt:
        return 0

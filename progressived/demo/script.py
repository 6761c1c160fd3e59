"""The demo's scripted rounds and its interactive loop: what a newcomer sees happen.

Each scripted round is announced on screen with what it shows (an envy bonus, a keying
mistake turned off), and the table's events narrate it as it happens; afterwards whatever is
typed goes to the board simulator and is echoed on screen with its answer.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from progressived.signs.screen import Screen

# Default keypad codes (config/keypad.example.toml): tcp-sd-1 hands are H1 akq-spades,
# H2 akq-suited, H3 straight-flush, H4 three-of-a-kind, H5 straight.
ROUNDS: list[tuple[str, list[str]]] = [
    (
        "a straight paid from the tray; the AKQ of spades at seat 3 takes the whole meter, "
        "the supervisor confirms it; ENVY bonuses to seats 1 and 5",
        [
            "bet 1",
            "bet 3",
            "bet 5",
            "key LOCK",
            "unbet 1",
            "unbet 3",
            "unbet 5",
            "key S5",
            "key H5",
            "key S3",
            "key H1",
            "supervisor on",
            "key OK",
            "supervisor off",
            "key RECON",
        ],
    ),
    (
        "the AKQ of hearts at seat 2 pays from the tray; ENVY bonuses to seats 4 and 6",
        [
            "bet 2",
            "bet 4",
            "bet 6",
            "key LOCK",
            "unbet 2",
            "unbet 4",
            "unbet 6",
            "key S2",
            "key H2",
            "key RECON",
        ],
    ),
    (
        "a keying mistake: a straight flush keyed at seat 7 by mistake and turned off with a "
        "second press; then the three of a kind it really was",
        [
            "bet 7",
            "key LOCK",
            "unbet 7",
            "key S7",
            "key H3",
            "key S7",
            "key H3",
            "key S7",
            "key H4",
            "key RECON",
        ],
    ),
]


def play_script(
    count: int, type_line: Callable[[str], None], pump: Callable[[float], None], screen: Screen
) -> int:
    """Play ``count`` scripted rounds, each announced on screen; returns how many."""
    for index in range(count):
        caption, lines = ROUNDS[index % len(ROUNDS)]
        screen.say(f"-- scripted round {index + 1}: {caption}")
        for line in lines:
            type_line(line)
            pump(0.15)
        pump(3.0 if screen.tty else 0.2)  # time to read the round on a terminal
    return count


def await_reconciled(
    events: list[dict[str, Any]], played: int, pump: Callable[[float], None]
) -> int:
    """Wait up to 20 s until ``played`` rounds are reconciled; returns how many are."""
    deadline = time.monotonic() + 20
    while True:
        done = sum(1 for e in events if e.get("kind") == "round_reconciled")
        if done >= played or time.monotonic() > deadline:
            return done
        pump(0.2)


def forward_typing(
    type_line: Callable[[str], None], pump: Callable[[float], None], screen: Screen
) -> None:
    """Forward what is typed to the board simulator until end of input or Ctrl-C."""
    hint = "type board commands: bet 3, key LOCK, key S3, key H1, key RECON, help; Ctrl-C stops"
    screen.footer = hint + "\n> "
    if not screen.tty:
        screen.say(hint)
    lines: queue.Queue[str] = queue.Queue()

    def read_stdin() -> None:
        for typed in sys.stdin:
            lines.put(typed)
        lines.put("")  # end of input

    threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
    while True:
        pump(0.1)
        try:
            line = lines.get_nowait()
        except queue.Empty:
            continue
        if not line:
            pump(1.0)  # the answers to the last lines typed, before stopping
            screen.say("end of input: stopping")
            pump(0)
            return
        if line.strip():
            screen.say(f"> {line.strip()}")
            type_line(line)

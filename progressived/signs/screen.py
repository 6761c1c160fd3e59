"""Drawing a sign and a few lines of console on a terminal: in place on a tty, appended otherwise.

A sign that scrolls a new five-row frame for every meter change buries everything else on
the screen; a redirected log full of ANSI escapes is unreadable. :class:`Screen` therefore
redraws in place (cursor home, clear) only when its output is a terminal, and otherwise
appends each changed frame and each console line as plain text. It is pure apart from
writing to ``out``, so the tests drive it with a ``StringIO``.
"""

from __future__ import annotations

import os
import shutil
from collections import deque
from collections.abc import Callable
from typing import TextIO

HOME_CLEAR = "\x1b[H\x1b[2J"
"""ANSI: cursor to the top-left corner, then erase the whole screen."""


def is_terminal(out: TextIO) -> bool:
    """Whether ``out`` is a terminal (a closed or odd stream is not)."""
    try:
        return out.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def redraw(frame: str, out: TextIO) -> str:
    """``frame`` to write to ``out``: drawn over the last one on a terminal, appended elsewhere."""
    return (HOME_CLEAR if is_terminal(out) else "") + frame + "\n"


def _rows(text: str, width: int) -> int:
    """Terminal rows ``text`` takes when lines wrap at ``width`` columns."""
    return sum(max(1, -(-len(line) // width)) for line in text.split("\n"))


class Screen:
    """A sign frame with the newest console lines under it.

    On a terminal every :meth:`draw` that has something new repaints the whole screen from the
    top-left corner: ``header``, the sign, as many of the newest console lines as fit the
    terminal's height, and ``footer`` (e.g. a prompt, where the cursor stays) — so nothing
    scrolls. Elsewhere it appends the sign frame (when it changed) and the console lines not
    yet written, without escapes.
    """

    def __init__(
        self,
        out: TextIO,
        *,
        tty: bool | None = None,
        header: str = "",
        footer: str = "",
        size: Callable[[], os.terminal_size] = shutil.get_terminal_size,
    ) -> None:
        self.out = out
        self.tty = is_terminal(out) if tty is None else tty
        self.header = header
        self._footer = footer
        self.size = size
        self._sign = ""
        self._drawn_sign = ""
        self._console: deque[str] = deque(maxlen=200)
        self._unwritten: list[str] = []
        self._dirty = False

    @property
    def footer(self) -> str:
        """The last lines on a terminal (e.g. a prompt); setting it redraws."""
        return self._footer

    @footer.setter
    def footer(self, text: str) -> None:
        if text != self._footer:
            self._footer = text
            self._dirty = True

    def sign(self, frame: str) -> None:
        """The sign now shows ``frame``."""
        if frame != self._sign:
            self._sign = frame
            self._dirty = True

    def say(self, line: str) -> None:
        """Add a console line (an answer, an error, a narration)."""
        for part in line.rstrip("\n").splitlines() or [""]:
            self._console.append(part)
            self._unwritten.append(part)
        self._dirty = True

    def draw(self) -> bool:
        """Write what changed; returns whether anything was written."""
        if not self._dirty:
            return False
        self._dirty = False
        if self.tty:
            self.out.write(HOME_CLEAR + self.frame())
        else:
            if self._sign != self._drawn_sign:
                self.out.write(self._sign + "\n")
            for line in self._unwritten:
                self.out.write(line + "\n")
        self._drawn_sign = self._sign
        self._unwritten.clear()
        self.out.flush()
        return True

    def frame(self) -> str:
        """The whole screen as text: header, sign, the console lines that fit, footer."""
        width, height = self.size()
        width = max(width, 20)
        top = (f"{self.header}\n\n" if self.header else "") + self._sign + "\n"
        room = height - _rows(f"{top}\n{self._footer}", width)
        shown: list[str] = []
        for line in reversed(self._console):
            room -= _rows(line, width)
            if room < 0:
                break
            shown.append(line)
        console = "".join(f"{line}\n" for line in reversed(shown))
        return f"{top}\n{console}{self._footer}"

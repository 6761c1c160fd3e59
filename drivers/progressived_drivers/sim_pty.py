"""The board simulator's end of the cable: a pseudo-terminal and the link that names it.

Why a module of its own: :class:`progressived_drivers.board_sim.BoardSimulator` is the board's
protocol behaviour; this is the hardware under it -- a pty master the board reads and
writes, the slave path the driver opens, the ``link`` symlink that plays the part of
``/dev/serial/by-id/...`` (created on plug, removed on unplug), and writes that behave
like a UART (bytes nobody reads are dropped, and counted).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tty
from collections.abc import Callable, Iterable
from pathlib import Path

DEVICE_MODE = 0o660  # a serial adapter's under udev (systemd/99-progressive-board.rules)


class SimPty:
    """A pty that can be plugged and unplugged. Use it inside a running loop."""

    def __init__(
        self,
        link: Path | None,
        on_readable: Callable[[], None],
        on_dropped: Callable[[int], None],
        group: int | None = None,
    ) -> None:
        """``group``: give each pty's slave to this gid with mode 0660, as udev gives a USB
        adapter to ``dialout``; otherwise it stays as ``openpty`` makes it (the caller's,
        group ``tty``, 0620: no other user may open it)."""
        self.link = link
        self.group = group
        self.plugged = False
        self.path: str | None = None
        self._on_readable = on_readable
        self._on_dropped = on_dropped
        self._master: int | None = None
        self._slave: int | None = None
        self._streaming = False
        self._deferred: list[bytes] = []

    def open(self) -> str:
        """Create the pty (and point the link at it); returns the path a driver opens."""
        master, slave = os.openpty()
        tty.setraw(slave)
        if self.group is not None:
            try:
                os.fchown(slave, -1, self.group)
                os.fchmod(slave, DEVICE_MODE)
            except OSError:
                os.close(master)
                os.close(slave)
                raise
        os.set_blocking(master, False)
        self._master, self._slave = master, slave
        self.path = os.ttyname(slave)
        if self.link is not None:
            tmp = self.link.with_name(self.link.name + ".tmp")
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            tmp.symlink_to(self.path)
            tmp.replace(self.link)
        self.plugged = True
        asyncio.get_running_loop().add_reader(master, self._on_readable)
        return str(self.link) if self.link is not None else self.path

    def close(self) -> None:
        """Close the pty and remove the link: the device disappears."""
        if self._master is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._master)
            for fd in (self._master, self._slave):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        self._master = self._slave = None
        self.plugged = False
        if self.link is not None and self.link.is_symlink():
            with contextlib.suppress(FileNotFoundError):
                self.link.unlink()

    def read(self) -> bytes:
        """What the driver wrote, if any (b"" when nothing is there or nobody is connected)."""
        if self._master is None:
            return b""
        try:
            return os.read(self._master, 65536)
        except (BlockingIOError, InterruptedError):
            return b""
        except OSError:
            return b""  # EIO: nobody has the slave open

    def write(self, data: bytes) -> None:
        """Bytes on the line exactly as given; what the pty cannot take now is dropped."""
        if not self.plugged or self._master is None:
            return
        if self._streaming:
            self._deferred.append(bytes(data))
            return
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._master, view)
            except BlockingIOError:
                self._on_dropped(len(view))  # nobody reading: the UART drops
                return
            except OSError:
                return
            view = view[written:]

    async def write_frames(self, frames: Iterable[bytes], piece: int = 4096) -> None:
        """Write many whole frames without dropping any (waits while the pty is full).

        Frames the board sends meanwhile (heartbeats) go on the line between pieces, never
        inside a frame. Used for floods and fuzzing.
        """
        self._streaming = True
        try:
            batch: list[bytes] = []
            size = 0
            for frame in frames:
                batch.append(frame)
                size += len(frame)
                if size >= piece:
                    await self._write_all(b"".join(batch))
                    batch, size = [], 0
            await self._write_all(b"".join(batch))
        finally:
            self._streaming = False

    async def _write_all(self, data: bytes) -> None:
        chunks = [data]
        while chunks:
            view = memoryview(chunks.pop(0))
            while view and self.plugged and self._master is not None:
                try:
                    view = view[os.write(self._master, view) :]
                except BlockingIOError:
                    await asyncio.sleep(0.001)
                except OSError:
                    return
            chunks += self._deferred  # frames the board sent meanwhile, whole
            self._deferred.clear()

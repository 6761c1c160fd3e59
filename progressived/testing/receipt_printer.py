"""A receipt printer for tests: an ESC/POS printer listening on a loopback TCP port.

It keeps every byte it receives, answers the paper sensor's status query (DLE EOT 4) with
"paper adequate" or, after :meth:`TestPrinter.out_of_paper`, "paper end", can drop a
connection after a number of bytes (the printer switched off mid-slip), and can be stopped
and started again on the same port (off for a shift). :func:`decode` turns the bytes back
into receipts: the text lines between two cuts and the QR codes' contents, so a test checks
a printed slip field by field.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from dataclasses import dataclass, field

PAPER_OK = 0x12  # DLE EOT 4's answer: paper adequate
PAPER_END = 0x72  # paper end sensor (python-escpos's RT_MASK_NOPAPER)
STATUS_QUERY = b"\x10\x04\x04"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"  # the docs' pictures

# ESC x n and GS x n commands with one parameter byte that python-escpos sends.
_ESC_ONE = set(b"!EGaMt{-dJVRcr3")
_GS_ONE = set(b"!bBhwHfL")


@dataclass
class Receipt:
    """One printed copy: its text lines and the contents of its QR codes."""

    lines: list[str] = field(default_factory=list)
    qr: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def decode(data: bytes) -> tuple[list[Receipt], Receipt]:
    """The receipts ``data`` holds (each ends at a cut) and what follows the last cut."""
    receipts: list[Receipt] = []
    current, line = Receipt(), bytearray()
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b == 0x1B and i + 1 < n:  # ESC
            i += 2 if data[i + 1] == ord("@") else 3 if data[i + 1] in _ESC_ONE else 2
        elif b == 0x1D and i + 1 < n:  # GS
            c = data[i + 1]
            if c == ord("V"):  # a cut: the receipt ends
                i += 3 if i + 2 < n and data[i + 2] in (0, 1, 48, 49) else 4
                if line:
                    current.lines.append(line.decode("cp437"))
                    line = bytearray()
                receipts.append(current)
                current = Receipt()
            elif c == ord("(") and i + 4 < n:  # GS ( k pL pH fn...: the QR code's store
                size = data[i + 3] + 256 * data[i + 4]
                body = data[i + 5 : i + 5 + size]
                if data[i + 2] == ord("k") and body[:3] == b"1P0":
                    current.qr.append(body[3:].decode("ascii", "replace"))
                i += 5 + size
            else:
                i += 3 if c in _GS_ONE else 2
        elif b == 0x10:  # DLE EOT n: a status query
            i += 3
        elif b == 0x0A:
            current.lines.append(line.decode("cp437"))
            line = bytearray()
            i += 1
        else:
            line.append(b)
            i += 1
    if line:
        current.lines.append(line.decode("cp437"))
    return receipts, current


class TestPrinter:
    """A printer on ``127.0.0.1:port`` (a free port unless given); a context manager."""

    __test__ = False  # not a pytest test class

    def __init__(self, port: int = 0) -> None:
        self.received: list[bytes] = []  # one entry per connection
        self.paper = True
        self.drop_after: int | None = None  # close the next connection after so many bytes
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = port
        self.start()

    def start(self) -> None:
        printer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                printer._serve(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Switch it off: connections are refused until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def out_of_paper(self, out: bool = True) -> None:
        self.paper = not out

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        got = bytearray()
        with self._lock:
            limit, self.drop_after = self.drop_after, None
        answered = 0
        try:
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                if limit is not None and len(got) + len(chunk) >= limit:
                    got += chunk[: limit - len(got)]
                    break  # switched off mid-slip: the rest never arrives
                got += chunk
                while (at := got.find(STATUS_QUERY, answered)) >= 0:
                    answered = at + len(STATUS_QUERY)
                    conn.sendall(bytes([PAPER_OK if self.paper else PAPER_END]))
        except OSError:
            pass
        finally:
            with self._lock:
                self.received.append(bytes(got))
            conn.close()

    def receipts(self) -> list[Receipt]:
        """Every whole copy printed so far, in order (a copy cut short is not one)."""
        with self._lock:
            chunks = list(self.received)
        return [r for chunk in chunks for r in decode(chunk)[0]]

    def __enter__(self) -> TestPrinter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def picture(receipt: Receipt, path: str, *, font: str = FONT) -> None:
    """Draw ``receipt`` as the paper looks (its lines in a monospace font on an 80 mm
    roll's width, then its QR code) into a PNG at ``path``: docs/slips.md's pictures."""
    import qrcode  # noqa: PLC0415 - the docs' pictures only
    from PIL import Image, ImageDraw, ImageFont  # noqa: PLC0415

    face = ImageFont.truetype(font, 18)
    code = qrcode.make(receipt.qr[0], box_size=4).get_image() if receipt.qr else None
    width, tall = 42 * 11 + 40, 22 * len(receipt.lines) + 40
    image = Image.new("RGB", (width, tall + (code.size[1] if code else 0)), "white")
    pen = ImageDraw.Draw(image)
    for row, line in enumerate(receipt.lines):
        pen.text((20, 20 + 22 * row), line, font=face, fill="black")
    if code is not None:
        image.paste(code, ((width - code.size[0]) // 2, tall))
    image.save(path)

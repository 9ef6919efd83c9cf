"""Headless Chromium screenshots of the HTML pages zerda writes, and a PNG decoder to look at their pixels."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page: Path, png: Path, height: int, width: int = 1200) -> bytes:
    """The PNG bytes of ``page`` rendered by headless Chromium in a window of ``width`` x ``height``; the
    browser's profile goes next to ``png``, and nothing is fetched from the network."""
    assert CHROMIUM, "chromium is missing: `make test` installs it (tests/system_packages.sh)"
    subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={png.parent / 'profile'}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return png.read_bytes()


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered scanlines of an 8-bit RGB/RGBA PNG, decoded with zlib and struct only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header, idat = (body if kind == b"IHDR" else header), idat + (body if kind == b"IDAT" else b"")
        pos += 12 + length
    width, height, depth, colour_type = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour_type in (2, 6), "an 8-bit RGB or RGBA screenshot"
    bpp = 3 if colour_type == 2 else 4
    raw, stride, rows, previous = zlib.decompress(idat), width * bpp, [], bytes(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left, up = line[i - bpp] if i >= bpp else 0, previous[i]
            corner = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa_, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa_ <= pb and pa_ <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(r[i : i + 3]) for r in rows for i in range(0, stride, bpp)]

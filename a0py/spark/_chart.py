"""A small line chart written as a PNG with the standard library alone (the
demo's "rate over time" picture; no plotting package is a dependency).

Lines are drawn per series in distinct colours over a light grid; the
y axis is labelled with its maximum and the x axis with its span in seconds,
in a 3x5 digit font drawn here. Names are not drawn: the caller prints the
legend (:data:`COLOURS` order).
"""

from __future__ import annotations

import itertools
import struct
import zlib

COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]
COLOUR_NAMES = ["blue", "orange", "green", "red", "purple", "brown", "pink", "grey", "olive", "cyan"]

# 3x5 glyphs, one string of 15 pixels per character, row by row.
_GLYPHS = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001010010010",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "s": "000011110011110",
    "/": "001001010100100", "k": "100101110101101", "M": "101111111101101", " ": "000000000000000",
}


class _Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, c):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c, thick=1):
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            for t in range(thick):
                self.dot(x0, y0 + t, c)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, s, c=(60, 60, 60), scale=2):
        for ch in s:
            glyph = _GLYPHS.get(ch, _GLYPHS[" "])
            for i, bit in enumerate(glyph):
                if bit == "1":
                    for a in range(scale):
                        for b in range(scale):
                            self.dot(x + (i % 3) * scale + a, y + (i // 3) * scale + b, c)
            x += 4 * scale

    def png(self):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def _short(v):
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    return f"{v:.0f}"


def line_chart(series, path, width=800, height=400):
    """Writes ``series`` (a list of [(x seconds, y value), ...], one per
    line, in :data:`COLOURS` order) as a PNG chart at ``path``."""
    c = _Canvas(width, height)
    left, right, top, bottom = 60, width - 20, 20, height - 40
    points = [p for s in series for p in s]
    x_max = max((x for x, _ in points), default=1.0) or 1.0
    y_max = max((y for _, y in points), default=1.0) or 1.0
    for k in range(5):
        y = bottom - (bottom - top) * k // 4
        c.line(left, y, right, y, (225, 225, 225))
    c.line(left, top, left, bottom, (90, 90, 90))
    c.line(left, bottom, right, bottom, (90, 90, 90))
    c.text(8, top, _short(y_max) + "/s")
    c.text(8, bottom - 10, "0")
    c.text(right - 60, bottom + 12, f"{x_max:.0f} s")
    c.text(left, bottom + 12, "0")
    for idx, s in enumerate(series):
        colour = COLOURS[idx % len(COLOURS)]
        pts = [(left + int((right - left) * x / x_max), bottom - int((bottom - top) * y / y_max)) for x, y in s]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            c.line(x0, y0, x1, y1, colour, thick=2)
        if len(pts) == 1:
            c.line(pts[0][0], pts[0][1], pts[0][0] + 2, pts[0][1], colour, thick=2)
    with open(path, "wb") as f:
        f.write(c.png())
    return path

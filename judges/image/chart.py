"""A PNG chart of a run: best and mean aggregate per iteration, with the plateau marked."""

from __future__ import annotations

import io
from collections.abc import Sequence


def run_chart(best: Sequence[float | None], mean: Sequence[float | None], plateau_at: int | None,
              width: int = 640, height: int = 360) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    left, right, top, bottom = 48, width - 16, 24, height - 36
    draw.rectangle([left, top, right, bottom], outline=(120, 120, 120))
    for score in range(0, 101, 20):
        gy = bottom - (bottom - top) * score / 100
        draw.line([left, gy, right, gy], fill=(230, 230, 230))
        draw.text((8, gy - 6), f"{score:>3}", fill=(90, 90, 90))
    n = max(len(best), 1)

    def x(i: int) -> float:
        return left + (right - left) * (i / max(n - 1, 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return bottom - (bottom - top) * max(0.0, min(100.0, v)) / 100

    for i in range(n):
        draw.text((x(i) - 4, bottom + 8), str(i + 1), fill=(90, 90, 90))
    if plateau_at is not None and 1 <= plateau_at <= n:
        px = x(plateau_at - 1)
        draw.line([px, top, px, bottom], fill=(220, 120, 0), width=2)
        draw.text((px + 4, top + 4), "plateau", fill=(220, 120, 0))
    for series, colour in ((mean, (150, 150, 220)), (best, (20, 90, 200))):
        points = [(x(i), y(v)) for i, v in enumerate(series) if v is not None]
        if len(points) > 1:
            draw.line(points, fill=colour, width=3)
        for px, py in points:
            draw.ellipse([px - 4, py - 4, px + 4, py + 4], fill=colour)
    draw.text((left + 8, height - 18), "best aggregate", fill=(20, 90, 200))
    draw.text((left + 130, height - 18), "mean aggregate", fill=(150, 150, 220))
    draw.text((left + 260, height - 18), "x: iteration", fill=(90, 90, 90))
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()

"""The crosses marking A and B on an image, one per profile (profiles.py picks): drawn with PIL on
pixel (u, v) = (column, row)."""

from __future__ import annotations

from PIL import ImageDraw, ImageFont


def draw_cross(draw: ImageDraw.ImageDraw, point, colour, label: str, arm: int = 10) -> None:
    """A cross of the colour centred on pixel (u, v) = (column, row), white-outlined, labelled."""
    u, v = point
    for width, fill in ((7, (255, 255, 255)), (3, colour)):
        draw.line([(u - arm, v), (u + arm, v)], fill=fill, width=width)
        draw.line([(u, v - arm), (u, v + arm)], fill=fill, width=width)
    font = ImageFont.load_default(size=18)
    draw.text((u + arm + 3, v - arm - 16), label, fill=colour, font=font, stroke_width=2,
              stroke_fill=(255, 255, 255))  # fmt: skip


def draw_cross_source(draw: ImageDraw.ImageDraw, point, colour, label: str, arm: int = 10) -> None:
    """The original's mark: a 3-px cross with `arm` px arms, the label in PIL's default font 15 px
    right of and 15 px above the centre, no outline."""
    u, v = point
    draw.line([(u - arm, v), (u + arm, v)], fill=colour, width=3)
    draw.line([(u, v - arm), (u, v + arm)], fill=colour, width=3)
    draw.text((u + 15, v - 15), label, fill=colour)

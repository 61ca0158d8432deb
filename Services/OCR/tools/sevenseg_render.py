#!/usr/bin/python3
"""Renders the synthetic seven-segment values the OCR service's segment reader is trained on (compose sevenseg).

Each image is one value as a segment display shows it — digits, a minus sign, a decimal point — drawn as
polygons (bevelled hexagons or square-ended bars) with varied digit width, stroke, segment gap, slant and spacing, light on dark or dark on light in
display colours (LCD grey-green, red and orange LEDs, white), with unlit segments faintly visible on some, then
blurred, noised, turned a little, squeezed in perspective and JPEG-compressed. Seeded: the same arguments write
the same files. The trainer (`sevenseg-train`) cuts each into its glyphs with the service's own cutter, so the
network learns what the service will show it.

    /usr/bin/python3 Services/OCR/tools/sevenseg_render.py OUTPUT_DIR [COUNT] [SEED]

Writes value-<n>.png and labels.tsv (file, value). Needs Debian's python3-pil and python3-numpy.
"""
import io
import os
import random
import sys

import numpy

from PIL import Image, ImageDraw, ImageFilter

SEGMENTS = {
    "0": "abcdef", "1": "bc", "2": "abdeg", "3": "abcdg", "4": "bcfg",
    "5": "acdfg", "6": "acdefg", "7": "abc", "8": "abcdefg", "9": "abcdfg", "-": "g",
}
# (background, lit, unlit) per display kind: the unlit segments of an LCD show faintly.
PALETTES = [
    ((170, 182, 160), (30, 36, 30), (150, 162, 142)),
    ((200, 205, 195), (20, 20, 25), (185, 190, 182)),
    ((12, 10, 10), (250, 40, 30), (40, 14, 12)),
    ((8, 8, 8), (255, 150, 20), (30, 20, 8)),
    ((10, 14, 20), (230, 240, 255), (26, 30, 38)),
    ((235, 235, 230), (15, 15, 15), None),
    ((20, 20, 20), (120, 255, 120), None),
    ((40, 60, 110), (230, 235, 255), None),
]


def segment_polygon(name, x, y, w, h, t, gap, slant, shape):
    """Segment `name` of a digit cell at (x, y), w × h, stroke t, `gap` between segments, x shifted by slant × rise:
    a bevelled hexagon (the common LED shape) or a plain bar with square ends (many LCDs)."""
    half, mid = t / 2, y + h / 2

    def horizontal(cy):
        if shape == "bar":
            return [(x + t + gap, cy - half), (x + w - t - gap, cy - half), (x + w - t - gap, cy + half), (x + t + gap, cy + half)]
        return [(x + half + gap, cy), (x + t + gap, cy - half), (x + w - t - gap, cy - half), (x + w - half - gap, cy),
                (x + w - t - gap, cy + half), (x + t + gap, cy + half)]

    def vertical(cx, top, bottom):
        if shape == "bar":
            return [(cx - half, top + half + gap), (cx + half, top + half + gap), (cx + half, bottom - half - gap), (cx - half, bottom - half - gap)]
        return [(cx, top + half + gap), (cx + half, top + t + gap), (cx + half, bottom - t - gap), (cx, bottom - half - gap),
                (cx - half, bottom - t - gap), (cx - half, top + t + gap)]

    points = {
        "a": horizontal(y + half), "g": horizontal(mid), "d": horizontal(y + h - half),
        "f": vertical(x + half, y, mid), "b": vertical(x + w - half, y, mid),
        "e": vertical(x + half, mid, y + h), "c": vertical(x + w - half, mid, y + h),
    }[name]
    return [(px + slant * (y + h - py), py) for px, py in points]


def value_text(rng):
    digits = rng.choice([1, 2, 2, 3, 3, 3, 4, 4, 5])
    text = "".join(rng.choice("0123456789") for _ in range(digits))
    if digits > 1 and rng.random() < 0.55:
        at = rng.randint(1, digits - 1)
        text = text[:at] + "." + text[at:]
    if rng.random() < 0.2:
        text = "-" + text
    return text


def render(text, rng):
    h = rng.randint(28, 72)
    w = h * rng.uniform(0.42, 0.62)
    t = max(2.0, h * rng.uniform(0.06, 0.17))
    gap = h * rng.uniform(0.0, 0.06)
    shape = rng.choice(["hexagon", "bar"])
    spacing = max(h * rng.uniform(0.14, 0.35), t * 2.2)
    slant = rng.choice([0.0, 0.0, rng.uniform(0.04, 0.2)])
    background, lit, unlit = rng.choice(PALETTES)
    if rng.random() < 0.5:
        unlit = None
    glyphs = [c for c in text if c != "."]
    margin = int(h * rng.uniform(0.25, 0.6))
    width = int(margin * 2 + len(glyphs) * (w + spacing) + h * slant + t * 2)
    image = Image.new("RGB", (width, int(h + 2 * margin)), background)
    draw = ImageDraw.Draw(image)
    x, y = margin, margin
    for char in text:
        if char == ".":
            # The point sits in the gap after the previous digit, on the baseline.
            px = x - spacing * 0.5 - t * 0.5
            if shape == "bar":
                draw.rectangle([px, y + h - t, px + t, y + h], fill=lit)
            else:
                draw.ellipse([px, y + h - t, px + t, y + h], fill=lit)
            continue
        if unlit:
            for segment in "abcdefg":
                draw.polygon(segment_polygon(segment, x, y, w, h, t, gap, slant, shape), fill=unlit)
        for segment in SEGMENTS[char]:
            draw.polygon(segment_polygon(segment, x, y, w, h, t, gap, slant, shape), fill=lit)
        x += w + spacing
    if rng.random() < 0.5:
        image = image.rotate(rng.uniform(-4, 4), resample=Image.BILINEAR, expand=True, fillcolor=background)
    if rng.random() < 0.4:
        # Perspective: one side shorter than the other.
        iw, ih = image.size
        squeeze = rng.uniform(0, 0.12) * ih
        left = rng.random() < 0.5
        quad = (0, squeeze if left else 0, 0, ih - (squeeze if left else 0), iw, ih - (0 if left else squeeze), iw, 0 if left else squeeze)
        image = image.transform((iw, ih), Image.QUAD, quad, resample=Image.BILINEAR, fillcolor=background)
    if rng.random() < 0.6:
        image = image.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.4) * h / 40))
    if rng.random() < 0.5:
        noise = numpy.random.default_rng(rng.randrange(1 << 30)).normal(0, rng.uniform(3, 14), (image.size[1], image.size[0], 1))
        image = Image.fromarray(numpy.clip(numpy.asarray(image, dtype=numpy.float32) + noise, 0, 255).astype(numpy.uint8))
    if rng.random() < 0.5:
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=rng.randint(35, 85))
        image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    return image


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    os.makedirs(out, exist_ok=True)
    rng = random.Random(seed)
    rows = []
    for n in range(count):
        text = value_text(rng)
        name = f"value-{n}.png"
        render(text, rng).save(os.path.join(out, name))
        rows.append(f"{name}\t{text}\n")
    with open(os.path.join(out, "labels.tsv"), "w") as f:
        f.writelines(rows)


if __name__ == "__main__":
    main()

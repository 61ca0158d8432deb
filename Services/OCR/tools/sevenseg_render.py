#!/usr/bin/python3
"""Renders the synthetic seven-segment values the OCR service's segment reader is trained on (compose sevenseg).

Each image is one value as a segment display shows it — digits, a minus sign, a decimal point (in the gap, near
either digit) — drawn as polygons whose ends are pointed (bevelled hexagons), square, round or tapered (wider on the
digit's outside), with varied digit width, stroke (thin to heavy), segment gap, slant and spacing, light on dark or
dark on light in display colours jittered, unlit segments faintly visible on some; then photographed: turned up to
13°, in perspective either way, under a glare patch, dim or unevenly lit, blurred, noised, JPEG-compressed down to
quality 20. One picture in six shows no value (labelled "#"): a printed label or unit, a segment pattern that is no
digit, a frame's corner, whose glyphs the network learns to refuse. Seeded: the same arguments write the same files.
The trainer (`sevenseg-train`) cuts each into its glyphs with the service's own cutter, so the network learns what the
service will show it. (The test photos' generator, Tests/SevenSegmentPhotos/generate.py, is kept apart: none of its
code or parameters is used here.)

    /usr/bin/python3 Services/OCR/tools/sevenseg_render.py OUTPUT_DIR [COUNT] [SEED]

Writes value-<n>.png and labels.tsv (file, value). Needs Debian's python3-pil, python3-numpy and fonts-dejavu-core.
"""
import io
import math
import os
import random
import sys

import numpy

from PIL import Image, ImageDraw, ImageFilter, ImageFont

SEGMENTS = {
    "0": "abcdef", "1": "bc", "2": "abdeg", "3": "abcdg", "4": "bcfg",
    "5": "acdfg", "6": "acdefg", "7": "abc", "8": "abcdefg", "9": "abcdfg", "-": "g",
}
# (background, lit) per display kind: LCD grey-green and grey, red, orange and green LEDs, white on dark and blue.
PALETTES = [
    ((170, 182, 160), (30, 36, 30)), ((200, 205, 195), (20, 20, 25)), ((12, 10, 10), (250, 40, 30)),
    ((8, 8, 8), (255, 150, 20)), ((10, 14, 20), (230, 240, 255)), ((235, 235, 230), (15, 15, 15)),
    ((20, 20, 20), (120, 255, 120)), ((40, 60, 110), (230, 235, 255)), ((150, 170, 150), (20, 30, 25)),
]
# What is printed beside a display's digits, for the pictures of non-glyphs.
LABELS = ["TEMP", "HUM", "kg", "lb", "%", "°C", "°F", "V", "A", "W", "kWh", "MAX", "MIN", "SET", "RH", "Hz", "AUTO",
          "mmHg", "BPM", "cm", "Err", "LO", "PM2.5", "CO2", "OK"]
FONTS = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
         "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"]


def segment_polygon(name, x, y, w, h, t, gap, slant, shape, taper):
    """Segment `name` of a digit cell at (x, y), w × h, stroke t, `gap` between segments, x shifted by slant × rise.
    Its end shape: pointed (a bevelled hexagon, the common LED shape), square (many LCDs), round (a capsule), or
    tapered (a trapezoid wider on the digit's outer side by `taper`, as some LCD glass draws them)."""
    mid = y + h / 2
    centre = (x + w / 2, mid)
    lines = {
        "a": ((x, y + t / 2), (x + w, y + t / 2)), "g": ((x, mid), (x + w, mid)), "d": ((x, y + h - t / 2), (x + w, y + h - t / 2)),
        "f": ((x + t / 2, y), (x + t / 2, mid)), "b": ((x + w - t / 2, y), (x + w - t / 2, mid)),
        "e": ((x + t / 2, mid), (x + t / 2, y + h)), "c": ((x + w - t / 2, mid), (x + w - t / 2, y + h)),
    }
    (x1, y1), (x2, y2) = lines[name]
    length = math.hypot(x2 - x1, y2 - y1)
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    # The segment's normal, pointing away from the digit's centre (g has no outside: either).
    nx, ny = -uy, ux
    if (x1 + x2) / 2 * nx + (y1 + y2) / 2 * ny < centre[0] * nx + centre[1] * ny:
        nx, ny = -nx, -ny
    half = t / 2
    inset = gap + half
    ax, ay, bx, by = x1 + ux * inset, y1 + uy * inset, x2 - ux * inset, y2 - uy * inset
    if shape == "pointed":
        points = [(ax - ux * half, ay - uy * half), (ax + nx * half, ay + ny * half), (bx + nx * half, by + ny * half),
                  (bx + ux * half, by + uy * half), (bx - nx * half, by - ny * half), (ax - nx * half, ay - ny * half)]
    elif shape == "round":
        # Half circles around both ends: from the outer side round the tip to the inner.
        points = []
        for cx, cy, sign in ((bx, by, 1), (ax, ay, -1)):
            for k in range(9):
                angle = math.radians(90 - k * 22.5)
                points.append((cx + sign * (ux * math.cos(angle) + nx * math.sin(angle)) * half,
                               cy + sign * (uy * math.cos(angle) + ny * math.sin(angle)) * half))
    elif shape == "tapered":
        outer, inner = half * (1 + taper), half * (1 - taper)
        points = [(ax - ux * half + nx * outer, ay - uy * half + ny * outer), (bx + ux * half + nx * outer, by + uy * half + ny * outer),
                  (bx - ux * inner - nx * inner, by - uy * inner - ny * inner), (ax + ux * inner - nx * inner, ay + uy * inner - ny * inner)]
    else:
        points = [(ax + nx * half, ay + ny * half), (bx + nx * half, by + ny * half), (bx - nx * half, by - ny * half), (ax - nx * half, ay - ny * half)]
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


def palette(rng):
    """Background, lit and unlit colours, each a little off the display kind's own; the unlit segments of an LCD
    show faintly on some (a share of the way from the background to the lit colour)."""
    background, lit = rng.choice(PALETTES)
    jitter = lambda colour: tuple(max(0, min(255, c + rng.randint(-18, 18))) for c in colour)
    background, lit = jitter(background), jitter(lit)
    unlit = None
    if rng.random() < 0.45:
        share = rng.uniform(0.03, 0.15)
        unlit = tuple(int(b + (l - b) * share) for b, l in zip(background, lit))
    return background, lit, unlit


def draw_value(draw, text, rng, margin, h, background, lit, unlit):
    w = h * rng.uniform(0.4, 0.64)
    shape = rng.choice(["pointed", "square", "round", "tapered"])
    t = max(1.6, h * (rng.uniform(0.035, 0.08) if rng.random() < 0.3 else rng.uniform(0.07, 0.17)))
    gap = h * rng.choice([rng.uniform(0.0, 0.02), rng.uniform(0.0, 0.08)])
    taper = rng.uniform(0.15, 0.45)
    spacing = max(h * rng.uniform(0.08, 0.35), t * 1.4)
    slant = rng.choice([0.0, 0.0, rng.uniform(0.04, 0.24)])
    point = t * rng.uniform(0.9, 1.6)
    x, y = margin, margin
    for char in text:
        if char == ".":
            # The point sits in the gap after the previous digit, on the baseline, nearer either digit.
            px = x - spacing * rng.uniform(0.3, 0.75) - point * 0.5
            if shape in ("square", "tapered"):
                draw.rectangle([px, y + h - point, px + point, y + h], fill=lit)
            else:
                draw.ellipse([px, y + h - point, px + point, y + h], fill=lit)
            continue
        if unlit:
            for segment in "abcdefg":
                draw.polygon(segment_polygon(segment, x, y, w, h, t, gap, slant, shape, taper), fill=unlit)
        for segment in SEGMENTS[char]:
            draw.polygon(segment_polygon(segment, x, y, w, h, t, gap, slant, shape, taper), fill=lit)
        x += w + spacing
    return x


def render(text, rng):
    h = rng.randint(26, 76)
    background, lit, unlit = palette(rng)
    glyphs = [c for c in text if c != "."]
    margin = int(h * rng.uniform(0.25, 0.6))
    width = int(margin * 2 + len(glyphs) * h * 1.0 + h * 0.3)
    image = Image.new("RGB", (width, int(h + 2 * margin)), background)
    draw_value(ImageDraw.Draw(image), text, rng, margin, h, background, lit, unlit)
    return photographed(image, background, rng)


def render_junk(rng):
    """A picture with no digit or minus in it, whose every cut glyph the network learns to refuse: printed labels and
    units (as sit beside a display's digits), a segment pattern that is no digit (a fragment of one), a frame's
    corner or an edge."""
    h = rng.randint(26, 76)
    background, lit, unlit = palette(rng)
    margin = int(h * rng.uniform(0.25, 0.6))
    kind = rng.choice(["label", "label", "fragment", "frame"])
    image = Image.new("RGB", (int(margin * 2 + h * 4), int(h + 2 * margin)), background)
    draw = ImageDraw.Draw(image)
    if kind == "label":
        word = rng.choice(LABELS)
        font = ImageFont.truetype(rng.choice(FONTS), int(h * rng.uniform(0.8, 1.2)))
        draw.text((margin, margin - h * 0.15), word, fill=lit, font=font)
        box = draw.textbbox((margin, margin - h * 0.15), word, font=font)
        image = image.crop((0, 0, min(image.size[0], int(box[2] + margin)), image.size[1]))
    elif kind == "fragment":
        shape = rng.choice(["pointed", "square", "round", "tapered"])
        t, w = max(2.0, h * rng.uniform(0.06, 0.16)), h * rng.uniform(0.42, 0.62)
        x = margin
        for _ in range(rng.randint(1, 3)):
            while True:
                lit_segments = "".join(s for s in "abcdefg" if rng.random() < 0.45)
                if lit_segments and sorted(lit_segments) not in [sorted(v) for v in SEGMENTS.values()]:
                    break
            for segment in lit_segments:
                draw.polygon(segment_polygon(segment, x, margin, w, h, t, h * 0.02, 0.0, shape, 0.3), fill=lit)
            x += w + h * 0.3
    else:
        t = max(2, int(h * rng.uniform(0.05, 0.2)))
        x0, y0 = margin + rng.randint(0, h), margin
        draw.line([(x0, y0 + h), (x0, y0), (x0 + h * rng.uniform(0.5, 2), y0)], fill=lit, width=t)
    return photographed(image, background, rng)


def photographed(image, background, rng):
    """As a phone sees it: turned, in perspective, under glare or dim light, blurred, noised, JPEG-compressed."""
    if rng.random() < 0.6:
        image = image.rotate(rng.uniform(-13, 13), resample=Image.BILINEAR, expand=True, fillcolor=background)
    if rng.random() < 0.45:
        # Perspective: one side shorter than the other, left and right or top and bottom.
        iw, ih = image.size
        s = rng.uniform(0, 0.2)
        if rng.random() < 0.5:
            d = s * ih
            quad = (0, d, 0, ih - d, iw, ih, iw, 0) if rng.random() < 0.5 else (0, 0, 0, ih, iw, ih - d, iw, d)
        else:
            d = s * iw * 0.3
            quad = (d, 0, 0, ih, iw, ih, iw - d, 0) if rng.random() < 0.5 else (0, 0, d, ih, iw - d, ih, iw, 0)
        image = image.transform((iw, ih), Image.QUAD, quad, resample=Image.BILINEAR, fillcolor=background)
    pixels = numpy.asarray(image, dtype=numpy.float32)
    ih, iw = pixels.shape[:2]
    if rng.random() < 0.25:
        # Glare: a soft bright patch somewhere over the display.
        cy, cx = rng.uniform(0, ih), rng.uniform(0, iw)
        radius = rng.uniform(0.3, 1.0) * max(ih, iw) * 0.5
        yy, xx = numpy.mgrid[0:ih, 0:iw]
        blob = numpy.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * radius ** 2))[..., None]
        pixels = pixels + (255 - pixels) * blob * rng.uniform(0.2, 0.6)
    if rng.random() < 0.2:
        # Dim light: the levels squeezed toward black.
        pixels = pixels * rng.uniform(0.2, 0.5)
    if rng.random() < 0.2:
        # Light falling off across the picture.
        ramp = numpy.linspace(rng.uniform(0.6, 1.0), rng.uniform(0.6, 1.0), iw)[None, :, None]
        pixels = pixels * ramp
    image = Image.fromarray(numpy.clip(pixels, 0, 255).astype(numpy.uint8))
    if rng.random() < 0.6:
        image = image.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.6) * ih / 80))
    if rng.random() < 0.5:
        noise = numpy.random.default_rng(rng.randrange(1 << 30)).normal(0, rng.uniform(3, 14), (image.size[1], image.size[0], 1))
        image = Image.fromarray(numpy.clip(numpy.asarray(image, dtype=numpy.float32) + noise, 0, 255).astype(numpy.uint8))
    if rng.random() < 0.6:
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=rng.randint(20, 85))
        image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    return image


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    os.makedirs(out, exist_ok=True)
    rng = random.Random(seed)
    rows = []
    for n in range(count):
        # One picture in six shows no value: its glyphs are all non-glyphs (labelled "#").
        if n % 6 == 5:
            text, image = "#", render_junk(rng)
        else:
            text = value_text(rng)
            image = render(text, rng)
        name = f"value-{n}.png"
        image.save(os.path.join(out, name))
        rows.append(f"{name}\t{text}\n")
    with open(os.path.join(out, "labels.tsv"), "w") as f:
        f.writelines(rows)


if __name__ == "__main__":
    main()

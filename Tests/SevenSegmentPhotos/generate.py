#!/usr/bin/python3
"""Renders the seven-segment test photos: devices the segment reader's training renderer never drew.

A thermometer (temperature with its minus sign and decimal point, humidity) and a scale (kilograms with a point),
photographed: each device's own segment shapes, none the training renderer (Services/OCR/tools/sevenseg_render.py,
bevelled hexagons) makes — plain rectangles with wide gaps, round-capped strokes, trapezoids slanted 10°, thin
strokes with a hairline gap — with printed labels, in a device body on a table, under conditions the renderer does
not apply: glare (a bright soft blob across the digits), strong angles (8–12°), keystone perspective, dim light,
and JPEG at quality 30. Seeded: it rewrites the same files.

    /usr/bin/python3 Tests/SevenSegmentPhotos/generate.py [OUTPUT_DIR]   # default: this script's folder

Writes <condition>-<n>.jpg and truth.tsv (file, condition, style, then the values as the display shows them).
Needs Debian's python3-pil and fonts-dejavu-core.
"""
import io
import math
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFilter, ImageFont

LABEL_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
WIDTH, HEIGHT = 720, 480
SEGMENTS = {
    "0": "abcdef", "1": "bc", "2": "abdeg", "3": "abcdg", "4": "bcfg",
    "5": "acdfg", "6": "acdefg", "7": "abc", "8": "abcdefg", "9": "abcdfg", "-": "g",
}
CONDITIONS = ["clean", "glare", "angled", "perspective", "dim", "jpeg"]
STYLES = ["rectangles", "rounded", "trapezoid", "thin"]


def segment_lines(x, y, w, h):
    """Each segment's centre line (two points) in a digit cell."""
    mid = y + h / 2
    return {
        "a": ((x, y), (x + w, y)), "g": ((x, mid), (x + w, mid)), "d": ((x, y + h), (x + w, y + h)),
        "f": ((x, y), (x, mid)), "b": ((x + w, y), (x + w, mid)),
        "e": ((x, mid), (x, y + h)), "c": ((x + w, mid), (x + w, y + h)),
    }


def draw_segment(draw, style, p, q, t, gap, slant, base, ink):
    (x1, y1), (x2, y2) = p, q
    length = math.hypot(x2 - x1, y2 - y1)
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    inset = gap + (t * 0.5 if style != "rounded" else t * 0.6)
    x1, y1, x2, y2 = x1 + ux * inset, y1 + uy * inset, x2 - ux * inset, y2 - uy * inset
    nx, ny = -uy * t / 2, ux * t / 2
    if style == "trapezoid":
        # Wider at the outside edge, as some LCDs draw them.
        quad = [(x1 + nx * 1.3, y1 + ny * 1.3), (x2 + nx * 1.3, y2 + ny * 1.3), (x2 - nx * 0.7, y2 - ny * 0.7), (x1 - nx * 0.7, y1 - ny * 0.7)]
    else:
        quad = [(x1 + nx, y1 + ny), (x2 + nx, y2 + ny), (x2 - nx, y2 - ny), (x1 - nx, y1 - ny)]
    sheared = [(px + slant * (base - py), py) for px, py in quad]
    draw.polygon(sheared, fill=ink)
    if style == "rounded":
        for cx, cy in ((x1, y1), (x2, y2)):
            cx += slant * (base - cy)
            draw.ellipse([cx - t / 2, cy - t / 2, cx + t / 2, cy + t / 2], fill=ink)


def draw_value(draw, text, x, y, h, style, ink, right_edge=None):
    w = h * {"rectangles": 0.5, "rounded": 0.48, "trapezoid": 0.55, "thin": 0.45}[style]
    t = h * {"rectangles": 0.12, "rounded": 0.13, "trapezoid": 0.11, "thin": 0.07}[style]
    gap = h * {"rectangles": 0.035, "rounded": 0.01, "trapezoid": 0.02, "thin": 0.012}[style]
    slant = 0.18 if style == "trapezoid" else 0.0
    pitch = w + h * 0.32
    glyphs = [c for c in text if c != "."]
    if right_edge is not None:
        x = right_edge - len(glyphs) * pitch
    for char in text:
        if char == ".":
            px = x - h * 0.16 - t * 0.6
            draw.ellipse([px, y + h - t * 1.1, px + t * 1.2, y + h + t * 0.1], fill=ink)
            continue
        for segment in SEGMENTS[char]:
            p, q = segment_lines(x, y, w, h)[segment]
            draw_segment(draw, style, p, q, t, gap, slant, y + h, ink)
        x += pitch
    return x


def values_for(rng, device):
    if device == "thermometer":
        temperature = rng.choice([rng.uniform(-19.9, -0.1), rng.uniform(0.1, 39.9)])
        return [f"{temperature:.1f}", f"{rng.randint(12, 95)}"]
    return [f"{rng.uniform(3.0, 149.9):.1f}", f"{rng.uniform(10.0, 45.0):.1f}"]


def render(device, style, condition, values, rng):
    table = tuple(rng.randint(90, 150) for _ in range(3))
    image = Image.new("RGB", (WIDTH, HEIGHT), table)
    draw = ImageDraw.Draw(image)
    body = (rng.randint(200, 240),) * 3 if device == "scale" else (rng.randint(30, 60),) * 3
    draw.rounded_rectangle([70, 40, WIDTH - 70, HEIGHT - 40], radius=40, fill=body)
    lcd, ink = ((176, 188, 166), (25, 30, 25)) if style != "thin" else ((20, 16, 14), (255, 90, 40))
    draw.rectangle([120, 90, WIDTH - 120, HEIGHT - 90], fill=lcd)
    font = ImageFont.truetype(LABEL_FONT, 22)
    labels = ("TEMP", "°C", "HUM", "%") if device == "thermometer" else ("WEIGHT", "kg", "BODY FAT", "%")
    label_ink = (235, 235, 235) if device == "thermometer" else (30, 30, 30)
    draw.text((130, 58), labels[0], font=font, fill=label_ink)
    draw.text((130, HEIGHT - 84), labels[2], font=font, fill=label_ink)
    draw_value(draw, values[0], 0, 112, 108, style, ink, right_edge=WIDTH - 200)
    draw.text((WIDTH - 185, 190), labels[1], font=font, fill=ink)
    draw_value(draw, values[1], 0, 262, 84, style, ink, right_edge=WIDTH - 200)
    draw.text((WIDTH - 185, 320), labels[3], font=font, fill=ink)
    if condition == "glare":
        glare = Image.new("L", (WIDTH, HEIGHT), 0)
        gx, gy = rng.randint(260, 460), rng.randint(140, 300)
        ImageDraw.Draw(glare).ellipse([gx - 120, gy - 60, gx + 120, gy + 60], fill=150)
        glare = glare.filter(ImageFilter.GaussianBlur(35))
        image = Image.composite(Image.new("RGB", (WIDTH, HEIGHT), (255, 255, 250)), image, glare)
    elif condition == "angled":
        image = image.rotate(rng.choice([-1, 1]) * rng.uniform(8, 12), resample=Image.BICUBIC, fillcolor=table)
    elif condition == "perspective":
        squeeze = rng.uniform(40, 70)
        quad = (0, 0, squeeze, HEIGHT, WIDTH - squeeze, HEIGHT, WIDTH, 0) if rng.random() < 0.5 else (squeeze, 0, 0, HEIGHT, WIDTH, HEIGHT, WIDTH - squeeze, 0)
        image = image.transform((WIDTH, HEIGHT), Image.QUAD, quad, resample=Image.BICUBIC, fillcolor=table)
    elif condition == "dim":
        image = image.point(lambda v: int(v * 0.35 + 6))
    image = image.filter(ImageFilter.GaussianBlur(0.8))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=30 if condition == "jpeg" else 88)
    return buffer.getvalue()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(4040)
    rows = []
    for condition in CONDITIONS:
        for n in range(1, 5):
            device = "thermometer" if n % 2 else "scale"
            style = STYLES[(n - 1 + CONDITIONS.index(condition)) % len(STYLES)]
            values = values_for(rng, device)
            name = f"{condition}-{n}.jpg"
            with open(os.path.join(out, name), "wb") as f:
                f.write(render(device, style, condition, values, rng))
            rows.append("\t".join([name, condition, style, device] + values) + "\n")
    with open(os.path.join(out, "truth.tsv"), "w") as f:
        f.write("file\tcondition\tstyle\tdevice\tfirst\tsecond\n")
        f.writelines(rows)


if __name__ == "__main__":
    main()

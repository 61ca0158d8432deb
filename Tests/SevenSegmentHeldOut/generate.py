#!/usr/bin/python3
"""Renders a second held-out set of seven-segment photos, from a generator that is neither the training renderer's
(Services/OCR/tools/sevenseg_render.py) nor Tests/SevenSegmentPhotos' (generate.py there): none of their code or
parameters is used, so a change tuned to either set is checked on displays it never saw.

Its own devices (a multimeter, a thermostat with two lines, an energy meter, a kitchen timer), each with three or
four values in Liberation and Lato labels; its own segment geometry: mitred segments meeting at the digit's corners
(LCD glass), elliptical segments (LED bars), heavy blocks with hairline gaps, slim italic strokes; its own digit
forms (a 7 with or without its left stroke, a 6 and 9 with or without their tails); its own colours (backlit blue,
amber and red LEDs, green VFD, grey LCDs with faint unlit segments); and its own conditions: turns of 4–12° either
way, a diagonal glare streak, a shadow across half the display, noise with blur, a turn under glare. Seeded: it
rewrites the same files.

    /usr/bin/python3 Tests/SevenSegmentHeldOut/generate.py [OUTPUT_DIR]   # default: this script's folder

Writes <condition>-<n>.jpg and truth.tsv (file, condition, style, device, then the values as the display shows
them). Needs Debian's python3-pil, fonts-liberation and fonts-lato.
"""
import io
import math
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONTS = ["/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf",
         "/usr/share/fonts/truetype/lato/Lato-Regular.ttf",
         "/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf"]
WIDTH, HEIGHT = 960, 640
CONDITIONS = ["clean", "turned", "glare", "shadow", "noisy", "turned-glare"]
STYLES = ["mitred", "elliptic", "block", "italic"]
# (display, lit, unlit or None)
COLOURS = [((60, 90, 200), (235, 240, 255), None), ((15, 8, 5), (255, 170, 40), (40, 25, 12)),
           ((10, 5, 5), (255, 50, 40), None), ((5, 30, 30), (90, 255, 210), (15, 50, 45)),
           ((190, 196, 184), (35, 40, 38), (172, 178, 166)), ((215, 215, 205), (10, 10, 10), None)]


def lit_segments(char, forms):
    base = {"0": "abcdef", "1": "bc", "2": "abdeg", "3": "abcdg", "4": "bcfg", "5": "acdfg", "6": "acdefg",
            "7": "abc", "8": "abcdefg", "9": "abcdfg", "-": "g"}[char]
    if char == "7" and forms["seven"]:
        base += "f"
    if char == "6" and not forms["six"]:
        base = base.replace("a", "")
    if char == "9" and not forms["nine"]:
        base = base.replace("d", "")
    return base


def segment_shape(draw, name, x, y, w, h, t, style, colour, italic):
    """Segment `name` of the cell at (x, y), w × h, stroke t, drawn in this generator's own geometry."""
    g = t * (0.08 if style == "block" else 0.25)
    m = y + h / 2
    # Corner points of the cell's outline (outer) and inner edge.
    if name in "agd":
        cy = {"a": y + t / 2, "g": m, "d": y + h - t / 2}[name]
        x0, x1 = x + g, x + w - g
        if style == "mitred":
            pts = [(x0, cy), (x0 + t / 2, cy - t / 2), (x1 - t / 2, cy - t / 2), (x1, cy), (x1 - t / 2, cy + t / 2),
                   (x0 + t / 2, cy + t / 2)]
            if name == "a":
                pts = [(x0, y), (x1, y), (x1 - t, y + t), (x0 + t, y + t)]
            if name == "d":
                pts = [(x0 + t, y + h - t), (x1 - t, y + h - t), (x1, y + h), (x0, y + h)]
        elif style == "elliptic":
            pts = [(x0 + t * 0.4 + (x1 - x0 - t * 0.8) / 2 * (1 + math.cos(a)), cy + t / 2 * math.sin(a))
                   for a in [i * math.pi / 12 for i in range(24)]]
        else:
            pts = [(x0 + t / 2, cy - t / 2), (x1 - t / 2, cy - t / 2), (x1 - t / 2, cy + t / 2), (x0 + t / 2, cy + t / 2)]
    else:
        cx = x + t / 2 if name in "fe" else x + w - t / 2
        y0, y1 = (y + g, m - g) if name in "fb" else (m + g, y + h - g)
        if style == "mitred":
            outer = x if name in "fe" else x + w
            inner = x + t if name in "fe" else x + w - t
            top_in = y0 + (t if name in "fb" else t / 2)
            bot_in = y1 - (t / 2 if name in "fb" else t)
            pts = [(outer, y0), (inner, top_in), (inner, bot_in), (outer, y1)]
        elif style == "elliptic":
            pts = [(cx + t / 2 * math.cos(a), y0 + t * 0.4 + (y1 - y0 - t * 0.8) / 2 * (1 + math.sin(a)))
                   for a in [i * math.pi / 12 for i in range(24)]]
        else:
            pts = [(cx - t / 2, y0 + t / 2), (cx + t / 2, y0 + t / 2), (cx + t / 2, y1 - t / 2), (cx - t / 2, y1 - t / 2)]
    base = y + h
    draw.polygon([(px + italic * (base - py), py) for px, py in pts], fill=colour)


def draw_value(draw, text, right, y, h, style, lit, unlit, forms, cells):
    w = h * {"mitred": 0.52, "elliptic": 0.46, "block": 0.58, "italic": 0.44}[style]
    t = h * {"mitred": 0.13, "elliptic": 0.11, "block": 0.19, "italic": 0.085}[style]
    italic = {"mitred": 0.06, "elliptic": 0.0, "block": 0.0, "italic": 0.21}[style]
    pitch = w + h * 0.26
    glyphs = [c for c in text if c != "."]
    x = right - max(cells, len(glyphs)) * pitch
    # Unlit cells before the value (a display with room for more digits).
    for _ in range(max(0, cells - len(glyphs))):
        if unlit:
            for name in "abcdefg":
                segment_shape(draw, name, x, y, w, h, t, style, unlit, italic)
        x += pitch
    for char in text:
        if char == ".":
            r = t * 0.62
            cx = x - h * 0.13
            draw.rectangle([cx - r, y + h - 2 * r, cx + r, y + h], fill=lit)
            continue
        on = lit_segments(char, forms)
        for name in "abcdefg":
            if name in on:
                segment_shape(draw, name, x, y, w, h, t, style, lit, italic)
            elif unlit:
                segment_shape(draw, name, x, y, w, h, t, style, unlit, italic)
        x += pitch


def values_for(rng, device):
    if device == "multimeter":
        return [f"{rng.uniform(-99.9, 99.9):.2f}".replace("-0.", "-0."), f"{rng.randint(100, 999)}"]
    if device == "thermostat":
        return [f"{rng.uniform(-9.9, 35.0):.1f}", f"{rng.uniform(15.0, 28.0):.1f}", f"{rng.randint(20, 80)}"]
    if device == "energy":
        return [f"{rng.uniform(100, 9999):.1f}", f"{rng.uniform(0.1, 16.0):.2f}"]
    return [f"{rng.randint(0, 59):02d}", f"{rng.randint(10, 99)}"]


LAYOUTS = {
    "multimeter": [("DC V", 150, 1.0), ("RANGE", 380, 0.6)],
    "thermostat": [("ROOM", 120, 0.8), ("SET", 300, 0.55), ("RH %", 420, 0.5)],
    "energy": [("kWh", 140, 0.9), ("kW", 340, 0.7)],
    "timer": [("MIN", 150, 1.0), ("COUNT", 360, 0.7)],
}


def render(device, style, condition, values, rng):
    table = tuple(rng.randint(60, 200) for _ in range(3))
    image = Image.new("RGB", (WIDTH, HEIGHT), table)
    draw = ImageDraw.Draw(image)
    body = tuple(rng.randint(20, 235) for _ in range(3))
    draw.rectangle([80, 50, WIDTH - 80, HEIGHT - 50], fill=body)
    display, lit, unlit = rng.choice(COLOURS)
    draw.rounded_rectangle([130, 95, WIDTH - 130, HEIGHT - 95], radius=12, fill=display)
    forms = {"seven": rng.random() < 0.5, "six": rng.random() < 0.5, "nine": rng.random() < 0.5}
    scale = rng.uniform(0.85, 1.1)
    label_ink = tuple(255 - c for c in body)
    for (label, top, size), value in zip(LAYOUTS[device], values):
        h = 150 * size * scale
        font = ImageFont.truetype(rng.choice(FONTS), int(18 + 6 * size))
        draw.text((150, top + h * 0.3), label, font=font, fill=lit)
        cells = len(value.replace(".", "")) + rng.choice([0, 0, 1])
        draw_value(draw, value, WIDTH - 170, top, h, style, lit, unlit, forms, cells)
    draw.text((100, 58), device.upper(), font=ImageFont.truetype(FONTS[0], 20), fill=label_ink)
    if condition in ("glare", "turned-glare"):
        streak = Image.new("L", (WIDTH, HEIGHT), 0)
        x0 = rng.randint(250, 650)
        ImageDraw.Draw(streak).polygon([(x0, 0), (x0 + 110, 0), (x0 - 90, HEIGHT), (x0 - 200, HEIGHT)], fill=170)
        streak = streak.filter(ImageFilter.GaussianBlur(28))
        image = Image.composite(Image.new("RGB", (WIDTH, HEIGHT), (255, 252, 240)), image, streak)
    if condition == "shadow":
        shade = Image.linear_gradient("L").resize((WIDTH, HEIGHT)).rotate(rng.choice([90, -90, 30]), fillcolor=255)
        dark = image.point(lambda v: int(v * 0.3))
        image = Image.composite(dark, image, shade)
    if condition in ("turned", "turned-glare"):
        image = image.rotate(rng.choice([-1, 1]) * rng.uniform(4, 12), resample=Image.BICUBIC, fillcolor=table)
    if condition == "noisy":
        image = image.filter(ImageFilter.GaussianBlur(1.6))
        noise = Image.effect_noise((WIDTH, HEIGHT), 40).convert("RGB")
        image = Image.blend(image, noise, 0.18)
    else:
        image = image.filter(ImageFilter.GaussianBlur(0.6))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=rng.choice([40, 60, 80]))
    return buffer.getvalue()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(7171)
    devices = list(LAYOUTS)
    rows = []
    for condition in CONDITIONS:
        for n in range(1, 5):
            device = devices[(n - 1 + CONDITIONS.index(condition)) % len(devices)]
            style = STYLES[(n + 2 * CONDITIONS.index(condition)) % len(STYLES)]
            values = values_for(rng, device)
            name = f"{condition}-{n}.jpg"
            with open(os.path.join(out, name), "wb") as f:
                f.write(render(device, style, condition, values, rng))
            rows.append("\t".join([name, condition, style, device] + values) + "\n")
    with open(os.path.join(out, "truth.tsv"), "w") as f:
        f.write("file\tcondition\tstyle\tdevice\tvalues\n")
        f.writelines(rows)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Renders the display photos the OCR tests and README figures use, with their ground truth.

A charger's display photographed again and again: three labelled values ("Napětí 14.38 V", "Proud 2.10 A",
"Nabito 45 %") on a panel in a grey surround, under the conditions a phone gives — several fonts (sans, serif,
mono, narrow and seven-segment digits drawn as polygons), black on white and white on black, the panel shifted
and scaled in the frame, blurred, turned a few degrees. Every image is deterministic (seeded), so the committed
set is what this script writes again.

    /usr/bin/python3 Tests/DisplayPhotos/generate.py [OUTPUT_DIR]   # default: this script's folder
    /usr/bin/python3 Tests/DisplayPhotos/generate.py --czech-set DIR  # the 36 Czech pages of the CER figures

Needs Debian's python3-pil, fonts-dejavu-core and fonts-liberation. Writes <condition>-<n>.png, truth.tsv
(file, condition, font, polarity, dx, dy, scale, blur, degrees, then the three values as the display shows
them), and czech-<n>.png with czech-<n>.txt (rendered Czech lines with diacritics, for the CER figures).
"""
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONTS = {
    "dejavu-sans": "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "dejavu-serif-bold": "/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf",
    "liberation-mono": "/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf",
    "liberation-narrow": "/usr/share/fonts/truetype/liberation/LiberationSansNarrow-Bold.ttf",
}
LABEL_FONT = FONTS["dejavu-sans"]
WIDTH, HEIGHT = 560, 360
LABELS = [("Napětí", "V"), ("Proud", "A"), ("Nabito", "%")]
VALUE_NAMES = [label for label, _ in LABELS]


def values_for(rng):
    return [f"{rng.uniform(11.5, 14.6):.2f}", f"{rng.uniform(0.2, 9.9):.2f}", f"{rng.randint(3, 99)}"]


# Seven segments a–g as in a datasheet: a top, b upper right, c lower right, d bottom, e lower left, f upper left,
# g middle. Each digit lists its lit segments.
SEGMENTS = {
    "0": "abcdef", "1": "bc", "2": "abdeg", "3": "abcdg", "4": "bcfg",
    "5": "acdfg", "6": "acdefg", "7": "abc", "8": "abcdefg", "9": "abcdfg",
}


def segment_polygon(name, x, y, w, h, t):
    """The hexagon of segment `name` in a digit cell at (x, y) of w × h with stroke t."""
    half = t / 2
    mid = y + h / 2

    def horizontal(cy):
        return [(x + half, cy), (x + t, cy - half), (x + w - t, cy - half), (x + w - half, cy),
                (x + w - t, cy + half), (x + t, cy + half)]

    def vertical(cx, top, bottom):
        return [(cx, top + half), (cx + half, top + t), (cx + half, bottom - t), (cx, bottom - half),
                (cx - half, bottom - t), (cx - half, top + t)]

    return {
        "a": horizontal(y + half), "g": horizontal(mid), "d": horizontal(y + h - half),
        "f": vertical(x + half, y, mid), "b": vertical(x + w - half, y, mid),
        "e": vertical(x + half, mid, y + h), "c": vertical(x + w - half, mid, y + h),
    }[name]


def draw_seven_segment(draw, text, x, y, height, ink):
    """Draws digits and a decimal point as segments; returns the x after the last one."""
    w, t, gap = height * 0.5, max(2, height * 0.11), height * 0.16
    for char in text:
        if char == ".":
            draw.rectangle([x - gap * 0.2, y + height - t, x - gap * 0.2 + t, y + height], fill=ink)
            x += t + gap * 0.2
            continue
        for segment in SEGMENTS[char]:
            draw.polygon(segment_polygon(segment, x, y, w, height, t), fill=ink)
        x += w + gap
    return x


def seven_segment_width(text, height):
    w, t, gap = height * 0.5, max(2, height * 0.11), height * 0.16
    return sum(t + gap * 0.2 if c == "." else w + gap for c in text)


def render(font_name, polarity, dx, dy, scale, blur, degrees, values, missing=(), units=None):
    paper, ink = (236, 20) if polarity == "bw" else (24, 228)
    image = Image.new("L", (WIDTH, HEIGHT), 128)
    draw = ImageDraw.Draw(image)
    size = int(round(30 * scale))
    line = int(round(size * 1.6))
    panel_w, panel_h = int(round(400 * scale)), line * 3 + int(round(size * 1.2))
    left = (WIDTH - panel_w) // 2 + dx
    top = (HEIGHT - panel_h) // 2 + dy
    draw.rectangle([left, top, left + panel_w, top + panel_h], fill=paper)
    label_font = ImageFont.truetype(LABEL_FONT, size)
    value_font = None if font_name == "seven-segment" else ImageFont.truetype(FONTS[font_name], size)
    unit_font = label_font if value_font is None else value_font
    pad = int(round(size * 0.6))
    for row, ((label, unit), value) in enumerate(zip(LABELS, values)):
        baseline_top = top + pad + row * line
        draw.text((left + pad, baseline_top), label, font=label_font, fill=ink)
        if label in missing:
            continue
        right = left + panel_w - pad
        unit = (units or {}).get(label, unit)
        unit_width = draw.textlength(unit, font=unit_font)
        unit_x = right - unit_width
        draw.text((unit_x, baseline_top), unit, font=unit_font, fill=ink)
        if value_font is None:
            digit_height = size * 0.95
            width = seven_segment_width(value, digit_height)
            draw_seven_segment(draw, value, unit_x - size * 0.35 - width, baseline_top + size * 0.08, digit_height, ink)
        else:
            width = draw.textlength(value, font=value_font)
            draw.text((unit_x - size * 0.3 - width, baseline_top), value, font=value_font, fill=ink)
    if degrees:
        image = image.rotate(degrees, resample=Image.BICUBIC, fillcolor=128)
    if blur:
        image = image.filter(ImageFilter.GaussianBlur(blur))
    return image


def conditions():
    """(condition, font, polarity, dx, dy, scale, blur, degrees, missing) rows, deterministic."""
    rng = random.Random(25)
    fonts = list(FONTS)
    rows = []
    for n, font in enumerate(fonts):
        rows.append(("clean", font, "bw", 0, 0, 1.0, 0, 0, ()))
    for n, font in enumerate(fonts):
        rows.append(("inverted", font, "wb", 0, 0, 1.0, 0, 0, ()))
    for n, font in enumerate(fonts):
        rows.append(("shifted", font, "bw" if n % 2 == 0 else "wb", rng.choice([-70, -50, 50, 70]),
                     rng.choice([-60, -40, 40, 60]), 1.0, 0, 0, ()))
    for n, font in enumerate(fonts):
        rows.append(("small", font, "bw" if n % 2 else "wb", rng.randint(-40, 40), rng.randint(-30, 30), 0.62, 0, 0, ()))
    for n, font in enumerate(fonts):
        rows.append(("large", font, "wb" if n % 2 else "bw", rng.randint(-5, 5), rng.randint(-5, 5), 1.3, 0, 0, ()))
    for n, font in enumerate(fonts):
        rows.append(("blurred", font, "bw" if n % 2 == 0 else "wb", rng.randint(-30, 30), rng.randint(-20, 20), 1.0,
                     1.6 + 0.3 * n, 0, ()))
    for n, font in enumerate(fonts):
        rows.append(("rotated", font, "bw" if n % 2 else "wb", rng.randint(-30, 30), rng.randint(-20, 20), 1.0, 0,
                     [-3, 2, -2, 3][n], ()))
    for n in range(4):
        rows.append(("seven-segment", "seven-segment", "bw" if n % 2 == 0 else "wb", rng.randint(-30, 30),
                     rng.randint(-20, 20), 1.0 + 0.15 * n, 0.8 * (n % 2), 0, ()))
    return rows


# Special photos the integration tests name: the template's first photo, the same display moved up by one row
# (so position alone would put Proud's value in Napětí's slot), one whose current reads nothing, and one whose
# current shows a volt unit with the display moved up half a row, so that reading fits Proud (its label) and
# Napětí (its unit, and as near) within TemplateMatcher's ambiguity margin: the two-slot case, flagged uncertain.
SPECIAL = [
    ("template", "dejavu-sans", "bw", 0, 0, 1.0, 0, 0, ()),
    ("moved-up-a-row", "dejavu-sans", "bw", 40, -48, 1.0, 0, 0, ()),
    ("no-current", "dejavu-sans", "bw", 0, 0, 1.0, 0, 0, ("Proud",)),
    ("two-slots", "dejavu-sans", "bw", 0, -24, 1.0, 0, 0, ()),
]
# Units drawn instead of the label's own, per special photo.
UNIT_OVERRIDES = {"two-slots": {"Proud": "V"}}

CZECH = [
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Nabíječka ukázala napětí čtrnáct voltů.",
    "Šťastný ježek běží přes louku k řece.",
    "Úterní schůze výboru začíná v devět hodin.",
    "Zvířata v zoo dostávají krmení dvakrát denně.",
    "Učitelka čte dětem pohádku o červené karkulce.",
]


def render_czech(font_path, lines, size=26):
    font = ImageFont.truetype(font_path, size)
    width = int(max(ImageDraw.Draw(Image.new("L", (1, 1))).textlength(l, font=font) for l in lines)) + 60
    height = int(len(lines) * size * 1.7) + 50
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    for n, text in enumerate(lines):
        draw.text((30, 25 + n * size * 1.7), text, font=font, fill=0)
    return image


CZECH_SET_FONTS = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSerif-Italic.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSansNarrow-Regular.ttf",
]


def czech_set(out):
    """The 36 Czech pages the README's CER figures are measured on (not committed: 400 KB): 13, 16 and 20 px,
    six fonts, sharp and blurred (Gaussian 0.7), as cz-N.png with cz-N.txt."""
    os.makedirs(out, exist_ok=True)
    n = 0
    for size in (13, 16, 20):
        for font in CZECH_SET_FONTS:
            for blur in (0, 0.7):
                n += 1
                lines = CZECH[n % 6:] + CZECH[:n % 6]
                image = render_czech(font, lines, size)
                if blur:
                    image = image.filter(ImageFilter.GaussianBlur(blur))
                image.save(os.path.join(out, f"cz-{n}.png"))
                with open(os.path.join(out, f"cz-{n}.txt"), "w", encoding="utf-8") as f:
                    f.write("\n".join(lines) + "\n")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--czech-set":
        czech_set(sys.argv[2])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    rng = random.Random(2026)
    counts = {}
    rows = []
    for condition, font, polarity, dx, dy, scale, blur, degrees, missing in conditions() + SPECIAL:
        values = values_for(rng)
        counts[condition] = counts.get(condition, 0) + 1
        name = f"{condition}-{counts[condition]}.png" if condition not in dict((s[0], 1) for s in SPECIAL) \
            else f"{condition}.png"
        image = render(font, polarity, dx, dy, scale, blur, degrees, values, missing, UNIT_OVERRIDES.get(condition))
        image.save(os.path.join(out, name), optimize=True)
        shown = ["" if label in missing else value for label, value in zip(VALUE_NAMES, values)]
        rows.append([name, condition, font, polarity, str(dx), str(dy), str(scale), str(blur), str(degrees)] + shown)
    with open(os.path.join(out, "truth.tsv"), "w", encoding="utf-8") as f:
        f.write("\t".join(["file", "condition", "font", "polarity", "dx", "dy", "scale", "blur", "degrees"]
                          + VALUE_NAMES) + "\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    czech_fonts = [FONTS["dejavu-sans"], "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
                   FONTS["liberation-mono"]]
    for n, font in enumerate(czech_fonts, start=1):
        lines = CZECH[(n - 1) * 2:] + CZECH[:(n - 1) * 2]
        render_czech(font, lines).save(os.path.join(out, f"czech-{n}.png"), optimize=True)
        with open(os.path.join(out, f"czech-{n}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

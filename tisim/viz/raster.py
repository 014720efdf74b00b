"""A numpy rasterizer for headless pictures: the colours, a ``Canvas`` in world coordinates [m], text written into
pictures (matplotlib's FreeType rasterizes it, no figure), and animated GIFs with a shared palette that keeps the
subject's colours. tisim/viz/drawings.py paints each system with it."""
import math
from pathlib import Path

import imageio.v3 as iio
import numpy as np

BACKGROUND = (255, 255, 255)
INK = (45, 45, 50)
GROUND = (225, 218, 200)
CART = (50, 50, 60)
POLE = (202, 152, 101)
HINGE = (129, 132, 203)
ROD = (70, 70, 75)
BOB = (200, 60, 50)
BOB_LOWER = (60, 110, 190)
BALL = (220, 90, 40)
BLOCK = (70, 120, 180)
MARK = (40, 150, 70)  # targets and goals
MARKER = (20, 20, 20)  # tracked points


class Canvas:
    """An RGB picture of the world rectangle ``bounds`` = (xmin, xmax, ymin, ymax) [m], width x height pixels.

    One scale (pixels per metre) for both axes, so discs stay round; the bounds are centred and the spare axis shows
    more of the world. Shapes are painted in call order with about one pixel of anti-aliasing; colours are (r, g, b)
    in 0..255.
    """

    def __init__(self, width, height, *, bounds=(-1.0, 1.0, -1.0, 1.0), background=BACKGROUND):
        xmin, xmax, ymin, ymax = (float(v) for v in bounds)
        if not (width >= 1 and height >= 1 and xmax > xmin and ymax > ymin):
            raise ValueError(f"Canvas: need width, height >= 1 and xmax > xmin, ymax > ymin; got {width}x{height}, "
                             f"bounds={bounds}")
        self.width, self.height = int(width), int(height)
        self.scale = min(self.width / (xmax - xmin), self.height / (ymax - ymin))  # [px/m]
        self._centre = (0.5 * (xmin + xmax), 0.5 * (ymin + ymax))
        half_w, half_h = 0.5 * self.width / self.scale, 0.5 * self.height / self.scale
        self.view = (self._centre[0] - half_w, self._centre[0] + half_w,
                     self._centre[1] - half_h, self._centre[1] + half_h)  # the world rectangle actually shown [m]
        self._pixels = np.empty((self.height, self.width, 3), np.uint8)
        self._fill_rows(0, background)

    def _fill_rows(self, first, color):
        # one row, then copied down: numpy copies whole rows at once, where a broadcast (r, g, b) loops per pixel
        block = self._pixels[first:]
        if len(block):
            block[0] = color
            block[1:] = block[0]

    def to_pixels(self, points):
        """Points [m] (..., 2) to pixel coordinates (column, row); pixel [i, j] spans [j, j+1) x [i, i+1)."""
        p = np.asarray(points, np.float64)
        column = 0.5 * self.width + (p[..., 0] - self._centre[0]) * self.scale
        row = 0.5 * self.height - (p[..., 1] - self._centre[1]) * self.scale
        return np.stack([column, row], axis=-1)

    def _paint(self, low, high, color, signed_distance):
        """Blend ``color`` into the pixels of the box low..high (pixel coordinates) by coverage clip(0.5 - d, 0, 1),
        where d = signed_distance(columns (1, w), rows (h, 1)) is in pixels, negative inside."""
        c0, r0 = (max(int(math.floor(v)) - 1, 0) for v in low)
        c1, r1 = min(int(math.ceil(high[0])) + 1, self.width), min(int(math.ceil(high[1])) + 1, self.height)
        if c0 >= c1 or r0 >= r1:
            return
        columns = np.arange(c0, c1, dtype=np.float32)[None, :] + 0.5
        rows = np.arange(r0, r1, dtype=np.float32)[:, None] + 0.5
        alpha = np.clip(0.5 - signed_distance(columns, rows), 0.0, 1.0)[..., None]
        region = self._pixels[r0:r1, c0:c1]
        blend = region.astype(np.float32)
        blend += alpha * (np.asarray(color, np.float32) - blend)
        region[:] = blend + 0.5  # round to the nearest level; the blend stays in [0, 255]

    def line(self, p, q, width_px, color):
        """A segment from p to q [m] with round caps, width_px pixels wide."""
        a, b = self.to_pixels([p, q])
        half = 0.5 * float(width_px)
        ba = b - a
        length2 = max(float(ba @ ba), 1e-12)

        def distance(columns, rows):
            pc, pr = columns - a[0], rows - a[1]
            h = np.clip((pc * ba[0] + pr * ba[1]) / length2, 0.0, 1.0)
            return np.hypot(pc - h * ba[0], pr - h * ba[1]) - half

        self._paint(np.minimum(a, b) - half, np.maximum(a, b) + half, color, distance)

    def circle(self, center, radius, color, *, filled=True, width_px=1.5):
        """A disc of ``radius`` [m] about center [m]; with filled=False, its outline, width_px pixels wide."""
        c = self.to_pixels(center)
        r = float(radius) * self.scale
        reach = r + (0.0 if filled else 0.5 * width_px)

        def distance(columns, rows):
            d = np.hypot(columns - c[0], rows - c[1]) - r
            return d if filled else np.abs(d) - 0.5 * width_px

        self._paint(c - reach, c + reach, color, distance)

    def polygon(self, points, color):
        """A filled simple polygon (convex or not) with vertices ``points`` [m], shape (N, 2)."""
        v = self.to_pixels(points)
        edge = np.roll(v, -1, axis=0) - v  # (N, 2): v[k] -> v[k+1]
        length2 = np.maximum((edge * edge).sum(axis=1), 1e-12)

        def distance(columns, rows):
            pc, pr = columns[..., None] - v[:, 0], rows[..., None] - v[:, 1]  # (h, w, N)
            h = np.clip((pc * edge[:, 0] + pr * edge[:, 1]) / length2, 0.0, 1.0)
            nearest = np.hypot(pc - h * edge[:, 0], pr - h * edge[:, 1]).min(axis=-1)
            # even-odd rule: count the edges that straddle the pixel's row and pass to its right
            crosses = ((pr < 0) != (pr < edge[:, 1])) & ((pc * edge[:, 1] - pr * edge[:, 0]) * edge[:, 1] < 0)
            return np.where(crosses.sum(axis=-1) % 2 == 1, -nearest, nearest)

        self._paint(v.min(axis=0), v.max(axis=0), color, distance)

    def rectangle(self, center, size, angle, color):
        """A filled rectangle of size (width, height) [m] about center [m], turned by angle [rad] anticlockwise."""
        (w, h), (cx, cy) = size, center
        corners = 0.5 * np.array([[-w, -h], [w, -h], [w, h], [-w, h]], np.float64)
        cos, sin = math.cos(angle), math.sin(angle)
        self.polygon(corners @ np.array([[cos, sin], [-sin, cos]]) + (cx, cy), color)

    def ground(self, y=0.0, color=GROUND):
        """Fill everything below height y [m], with an ink line along the surface."""
        row = float(self.to_pixels((0.0, y))[1])
        self._fill_rows(min(max(int(math.ceil(row)) + 1, 0), self.height), color)
        self._paint((0.0, row - 1.0), (self.width, row), color, lambda columns, rows: row - rows)
        self.line((self.view[0], y), (self.view[1], y), 1.5, INK)

    def text(self, at, words, color=INK, *, size_px=12, anchor="left", box=True):
        """Write ``words`` with its top left corner (anchor "left") or its top centre ("centre") at ``at``, world
        coordinates [m]; over a pale box unless box=False."""
        column, row = self.to_pixels(at)
        write(self._pixels, words, (column, row), color, size_px=size_px, anchor=anchor, box=box)

    def image(self):
        """The picture as uint8, shape (height, width, 3)."""
        return self._pixels.copy()


_FONT = {}


def text_mask(words, size_px=12):
    """The coverage (h, w), float32 in [0, 1], of ``words`` in DejaVu Sans ``size_px`` pixels high, rasterized by
    matplotlib's FreeType (no figure involved)."""
    from matplotlib.font_manager import FontProperties, findfont
    from matplotlib.ft2font import FT2Font

    if "font" not in _FONT:
        _FONT["font"] = FT2Font(findfont(FontProperties(family="DejaVu Sans")))
    font = _FONT["font"]
    font.set_size(float(size_px), 72)  # points at 72 dpi: one point a pixel
    font.set_text(str(words), 0.0)
    font.draw_glyphs_to_bitmap(antialiased=True)
    return np.asarray(font.get_image(), np.float32) / 255.0


def write(picture, words, at, color=INK, *, size_px=12, anchor="left", box=True):
    """Write ``words`` into ``picture`` (uint8 (H, W, 3), changed in place) with its top left corner, or its top
    centre for anchor="centre", at pixel ``at`` = (column, row), clipped to the picture; box: over a pale box (80%
    white) that keeps the text legible on any background. Returns the picture."""
    mask = text_mask(words, size_px)
    pad = 2 if box else 0
    height, width = mask.shape
    column = int(round(at[0] - (0.5 * width if anchor == "centre" else 0.0)))
    row = int(round(at[1]))
    column = min(max(column, pad), max(picture.shape[1] - width - pad, pad))
    row = min(max(row, pad), max(picture.shape[0] - height - pad, pad))
    if box:
        region = picture[row - pad:row + height + pad, column - pad:column + width + pad]
        region[:] = region * 0.2 + 0.8 * 255.0 + 0.5
    region = picture[row:row + height, column:column + width]
    alpha = mask[:region.shape[0], :region.shape[1], None]
    blend = region.astype(np.float32)
    blend += alpha * (np.asarray(color, np.float32) - blend)
    region[:] = blend + 0.5
    return picture


def caption(pictures, words, *, times=None, size_px=12):
    """The pictures with ``words`` written at their top left, followed by "t = 0.40 s" from ``times`` [s] (one per
    picture) when given; new arrays, the inputs are left as they are."""
    out = []
    for k, picture in enumerate(pictures):
        line = words if times is None else f"{words}   t = {float(times[k]):.2f} s" if words else \
            f"t = {float(times[k]):.2f} s"
        out.append(write(np.array(picture, np.uint8), line, (4, 3), INK, size_px=size_px))
    return out




def _rgb_codes(picture):
    code = picture[..., 0].astype(np.int32) << 16
    code |= picture[..., 1].astype(np.int32) << 8
    code |= picture[..., 2]
    return code


def _decode(codes):
    return np.stack([codes >> 16, (codes >> 8) & 255, codes & 255], axis=-1)


def quantize(pictures, colors, *, keep=()):
    """Map the pictures onto one shared palette of at most ``colors`` entries, exactly and without dithering.

    The palette is chosen for the colours that differ, not only for the frequent ones: the colours of a sample of
    the pictures are grouped in boxes of 16 levels per channel, each box represented by its most frequent exact
    colour, and the boxes are taken greedily, each time the one furthest (in RGB) from every colour taken so far,
    weighted by the log of its pixel count. A small subject on a shaded floor keeps its own colours this way, where
    the most frequent colours would all be the floor's shades; flat-shaded drawings keep their exact fill colours.
    keep: (r, g, b) colours that are always in the palette (a subject's, a caption's). Every pixel goes to the
    nearest palette colour (Euclidean in RGB). Returns (indices uint8 (N, H, W), palette uint8 (K, 3)), K <= colors.
    """
    codes = np.stack([_rgb_codes(np.asarray(p, np.uint8)) for p in pictures])
    sample, counts = np.unique(codes[::max(1, len(codes) // 16)], return_counts=True)
    order = np.argsort(counts, kind="stable")[::-1]  # most frequent first
    sample, counts = sample[order], counts[order]
    rgb = _decode(sample)
    boxes = (rgb[:, 0] >> 4) << 8 | (rgb[:, 1] >> 4) << 4 | rgb[:, 2] >> 4
    _, first = np.unique(boxes, return_index=True)  # each box's most frequent colour
    totals = np.bincount(boxes, weights=counts, minlength=4096)
    candidates = rgb[first].astype(np.float64)
    weight = np.log1p(totals[boxes[first]])
    chosen = [np.asarray(c, np.float64) for c in keep][:colors]
    if not chosen:
        chosen.append(candidates[np.argmax(weight)])
    nearest = np.min([((candidates - c) ** 2).sum(axis=1) for c in chosen], axis=0)
    while len(chosen) < colors and nearest.max() > 0:
        pick = int(np.argmax(nearest * weight))
        chosen.append(candidates[pick])
        nearest = np.minimum(nearest, ((candidates - candidates[pick]) ** 2).sum(axis=1))
    palette = np.round(np.array(chosen)).astype(np.int64)
    # a lookup table over all 2^24 colours, filled only where a picture uses one (16 MB, no sort of every pixel)
    seen = np.zeros(1 << 24, bool)
    seen[codes] = True
    used = np.flatnonzero(seen)
    table = np.zeros(1 << 24, np.uint8)
    for start in range(0, len(used), 65536):  # in chunks: (used, palette, 3) stays small
        part = _decode(used[start:start + 65536])
        table[used[start:start + 65536]] = ((part[:, None, :] - palette[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
    return table[codes], palette.astype(np.uint8)


def save_gif(path, frames, *, fps=25, max_frames=None, colors=64, keep=(BACKGROUND, INK, MARK)):
    """Write an endlessly looping GIF of uint8 frames (H, W, 3) at fps frames per second; returns the path.

    max_frames: keep at most this many frames, evenly spaced, with longer delays so the clip lasts as long.
    colors: size of the one palette shared by all frames (2..256), chosen by ``quantize`` with the colours ``keep``
    always in it (the background, the captions' ink, the marks'). Viewers clamp delays under 20 ms: keep fps <= 50.
    Pillow stores identical consecutive frames once, with their delays added.
    """
    pictures = [np.asarray(f, np.uint8) for f in frames]
    if not pictures:
        raise ValueError("save_gif: frames is empty")
    if not (2 <= colors <= 256 and fps > 0 and (max_frames is None or max_frames >= 1)):
        raise ValueError(f"save_gif: need 2 <= colors <= 256, fps > 0 and max_frames >= 1 (or None); got colors="
                         f"{colors}, fps={fps}, max_frames={max_frames}")
    delay = 1000.0 / fps  # [ms]
    if max_frames is not None and len(pictures) > max_frames:
        kept = np.unique(np.round(np.linspace(0, len(pictures) - 1, max_frames)).astype(int))
        delay *= len(pictures) / len(kept)
        pictures = [pictures[i] for i in kept]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    indices, palette = quantize(pictures, colors, keep=keep)
    # indexed frames with one global palette: Pillow's own RGB -> P conversion would cost ~10 ms a frame
    iio.imwrite(path, indices, mode="P", palette=palette.tobytes(), extension=".gif", plugin="pillow",
                duration=int(round(delay)), loop=0)
    return path


def side_by_side(frames_a, frames_b, *, gap=4):
    """Pair frames left | right with a gap of background pixels; the shorter sequence repeats its last frame."""
    if not frames_a or not frames_b:
        raise ValueError("side_by_side: both frame lists must be non-empty")
    height = max(frames_a[0].shape[0], frames_b[0].shape[0])

    def padded(picture):
        out = np.full((height, picture.shape[1], 3), BACKGROUND, np.uint8)
        out[:picture.shape[0]] = picture
        return out

    spacer = np.full((height, gap, 3), BACKGROUND, np.uint8)
    count = max(len(frames_a), len(frames_b))
    return [np.concatenate([padded(frames_a[min(i, len(frames_a) - 1)]), spacer,
                            padded(frames_b[min(i, len(frames_b) - 1)])], axis=1) for i in range(count)]

"""The Pathfinder renderer: one image of the "snakes2" generator (Kim, Linsley et al., ICLR 2020;
drewlinsley/pathfinder at ab9c130), the variant LRA generated its Pathfinder and Path-X sets with.

An image shows two target snakes (chains of short dashes, "paddles", seeded near each other),
shorter distractor snakes, and two circular markers. Label 1: both markers sit on the two ends of
one target snake; label 0: one sits on the start of one target snake and the other on the end of
the other one. ``draw(params, contour_length, rng)`` renders one image and returns it with the
generator's own record of what it drew (``Drawing``): the paddles of both target paths from their
origin tip to their terminal tip, which tips got the markers, the distractors.

Primitives (coordinates are (row, col), ``dir(a) = (sin a, cos a)``,
``tr(p, a, d) = ceil(p + d dir(a))`` per component, orientations integer degrees in [-180, 180)):

* Paddle ``(p, a, c)``: on a supersampled patch of side ``2 (L + ceil(t) + m) aa + 1`` a PIL line of
  width ``round(t aa)`` and value 255 runs from the centre to ``tr(centre, a, L aa)``. Intensity:
  the patch Lanczos-downsampled to side ``2 (L + ceil(t) + m) + 1`` (through uint8) / 255 * c.
  Footprint: the supersampled line grey-dilated by Disk(m aa), downsampled the same way, / 255.
  Both are pasted (as float32, like the original) centred on ``p`` and clipped at the edges.
* Disk(r): the points x^2 + y^2 <= r^2 of a (2r + 1)^2 grid.

Rendering (steps A-D of the 2019 generator, drewlinsley/pathfinder):

A. Two target snakes of C paddles, retried from scratch until both grow completely. Seed 1: tail
   drawn uniformly from the pixels where the occupancy mask M (a ``padding`` border, plus a band of
   2 ``seed_distance`` for this seed), dilated OpenCV-style by the saturated footprint of a paddle
   drawn from (L+m+1, L+m+1) on a (2(L+m)+1)^2 patch, is <= 0.3; head ``tr(T, a, L)``, pivot
   ``tr(H, a + pi, L + m)``, both inside the image, else redraw (3 tries). Seed 2: tail
   ``round(T1 + seed_distance dir(phi))``, in-bounds checks only. Seeds have contrast rho mu. Then
   C - 1 times (one rho per step, snake 1 then snake 2): new pivot ``Q = tr(P, a, L + 2m)``;
   candidates on the circle of radius R = L + m around Q (angle steps of 360 / (2 pi R) degrees,
   truncated to int, in-bounds, unique); weight ``max(cos(min(kappa delta, pi/2)), 0)^2 (1 - M'(q))``
   with M' = M grey-dilated by Disk(m) and delta the turn angle; a paddle from q pointing back to
   Q is kept if max(M + footprint) < 1.8 (3 samples). A kept paddle merges the snake's previous
   footprint into M (so joints may touch). After growing, only snake 2's last footprint is merged
   (the original's quirk).
B. N_d = B // C_d distractor snakes of C_d = C // 3 paddles, contrast mu, 1-pixel seed band, each
   given up to 5 attempts (rolled back on failure) and skipped if all fail; a seed fails when fewer
   than 1% of the pixels have M <= 0.3.
C. Markers: o ~ U{0, 1}; circles of radius r on origin tip o and on terminal tip o (label 1) or
   1 - o (label 0), each drawn on a (W aa)^2 canvas centred at tip * aa and Lanczos-downsampled.
D. F = max(image, markers); saved with scipy's ``imsave`` byte scaling:
   ``uint8(clip((F - min F) * 255 / (max F - min F)) + 0.5)``.

The random draws come from a ``numpy.random.Generator``; the original drew from numpy's global
state, so the images match its distribution, not its bits.

The seed quirk. The original finds free tails with ``cv2.dilate`` on a float64 mask, whose border
value for a dilation is -DBL_MAX; the seed kernel is anchored one pixel off the paddle's tail, so
for most orientations some image pixel has every tap outside the image, comes out as -DBL_MAX, and
the original's ``find_available_coordinates`` then reports no free position (its ``min < 0``
branch): the seed fails outright. At 32x32 only the orientations -150..-121 degrees can seed a
snake (Path-X with m = 2 loses 6 of 360, m = 3 none). This restricts target snake 1's first dash
and leaves PF32 with about 1.2 of its 5 distractor snakes. ``free_tails`` reproduces it exactly
(checked against OpenCV 5 on random masks and kernels).

Statistics (PF32, hard, 300 images, this renderer): mean pixel 20.3 (sd 2.1) of 255, non-zero
fraction 0.346 (sd 0.040), 1.2 distractor snakes per image; the 2019 generator with LRA's
parameters: 20.2 (sd 2.1) and 0.340 (sd 0.039) (2019 generator, LRA's settings). Paddle peaks 0.46
(PF32) and 0.98 (PF128) at contrast 1; the markers are the two brightest 3x3 blobs in about 98% of
the images, as in the original.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np
from PIL import Image, ImageDraw

__all__ = ["DIFFICULTIES", "PARAMS", "Drawing", "Params", "draw", "metadata_fields"]

_LANCZOS = Image.Resampling.LANCZOS
_MAX_PADDLE_TRIALS = 3  # the wrapper's max_paddle_retrial = 2, tried while count <= 2
_MAX_DISTRACTOR_TRIALS = 5  # max_distractor_contour_retrial = 4
_MAX_TARGET_ATTEMPTS = 10_000  # step A is retried until it succeeds; this only guards a hang
_FREE = 0.3  # a pixel is free when the (dilated) mask is <= this
_COLLISION = 1.8
_MIN_AVAILABLE = 0.01  # distractor seeds stop when fewer than 1% of the pixels are free


@dataclass(frozen=True)
class Params:
    """The generator's settings for one resolution (LRA's ``data/pathfinder.py`` docstrings)."""

    window: int
    padding: int  # border band set in the occupancy mask
    aa: int  # antialias scale
    margins: tuple[int, ...]  # paddle margin m, drawn per image
    seed_distance: int
    marker_radius: float
    paddle_length: int  # L
    thickness: float  # t; t * aa must be an integer
    continuity: float  # kappa
    snake_contrast: float  # mu
    paddle_contrast: float  # rho (targets only)
    distractor_budget: int  # B: N_d = B // C_d distractor snakes


PARAMS: dict[int, Params] = {
    32: Params(32, 1, 2, (1,), 7, 1.5, 2, 0.5, 1.0, 2, 0.75, 20),
    64: Params(64, 1, 2, (1,), 12, 2.5, 5, 1, 1.8, 0.8, 1.0, 22),
    128: Params(128, 1, 2, (2, 3), 20, 3, 5, 1.5, 1.8, 0.9, 1.0, 35),
    256: Params(256, 22, 2, (3,), 27, 5, 5, 2, 1.8, 1.0, 1.0, 30),
}

# difficulty -> (contour length C, the archive's folder name)
DIFFICULTIES: dict[str, tuple[int, str]] = {
    "easy": (6, "curv_baseline"),
    "intermediate": (9, "curv_contour_length_9"),
    "hard": (14, "curv_contour_length_14"),
}

Point = tuple[int, int]
Paddle = tuple[Point, Point]  # (start, end) along the snake's direction of growth


@dataclass(frozen=True)
class Drawing:
    """One rendered image and the generator's record of it.

    ``paths[s]``: the paddles of target snake s, each (start, end), from its origin tip
    (``paths[s][0][0]``, where it was seeded) to its terminal tip (``paths[s][-1][1]``).
    ``marked``: the two marked tips as (snake, end), end 0 = origin, 1 = terminal; the first is
    always an origin tip. Label 1 iff both are on the same snake.
    """

    image: np.ndarray  # uint8[W, W], the saved pixels
    label: int
    margin: int
    paths: tuple[tuple[Paddle, ...], tuple[Paddle, ...]]
    marked: tuple[tuple[int, int], tuple[int, int]]
    distractors: tuple[tuple[Paddle, ...], ...]  # the distractor snakes drawn
    attempts: int  # tries of step A

    def tip(self, snake: int, end: int) -> Point:
        return self.paths[snake][0][0] if end == 0 else self.paths[snake][-1][1]

    @property
    def marker_tips(self) -> tuple[Point, Point]:
        return self.tip(*self.marked[0]), self.tip(*self.marked[1])


def metadata_fields(params: Params, contour_length: int, margin: int) -> list[str]:
    """Fields 5-11 of a metadata line: kappa, C, C_d, L, t, m, number of rho values."""
    return [str(float(params.continuity)), str(contour_length), str(contour_length // 3),
            str(params.paddle_length), str(params.thickness), str(margin), "1"]


# ----------------------------------------------------------------------------------------------
# Primitives


def _tr(p: tuple[float, float], angle: float, dist: float) -> Point:
    return (math.ceil(p[0] + float(dist) * math.sin(angle)),
            math.ceil(p[1] + float(dist) * math.cos(angle)))


def _frozen(array: np.ndarray) -> np.ndarray:
    """Cached arrays are shared by every caller: make them read-only."""
    array = np.array(array)
    array.flags.writeable = False
    return array


def _flip(angle: float) -> float:
    return angle + math.pi if angle < 0 else angle - math.pi


@cache
def _disk_offsets(radius: int) -> tuple[np.ndarray, np.ndarray]:
    r = np.arange(-radius, radius + 1)
    rows, cols = np.nonzero(r[:, None] ** 2 + r[None, :] ** 2 <= radius ** 2)
    return _frozen(rows - radius), _frozen(cols - radius)


def _dilate_binary(on: np.ndarray, offsets: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """OpenCV-style dilation of a bool image: out[y, x] = any(on[y + dy, x + dx]) over the offsets
    (no kernel flip; outside the image counts as off)."""
    if len(offsets[0]) == 0:
        return np.zeros_like(on)
    pad = int(max(np.abs(offsets[0]).max(), np.abs(offsets[1]).max()))
    h, w = on.shape
    padded = np.zeros((h + 2 * pad, w + 2 * pad), bool)
    padded[pad:pad + h, pad:pad + w] = on
    out = np.zeros_like(on)
    for dy, dx in zip(offsets[0].tolist(), offsets[1].tolist()):
        out |= padded[pad + dy:pad + dy + h, pad + dx:pad + dx + w]
    return out


def _half(params: Params, margin: int) -> int:
    return params.paddle_length + math.ceil(params.thickness) + margin


@lru_cache(maxsize=8192)
def _paddle_patches(angle: float, params: Params, margin: int) -> tuple[np.ndarray, np.ndarray]:
    """(line uint8[S, S], footprint float32[S, S]) of a paddle drawn from the patch centre."""
    aa, length = params.aa, params.paddle_length
    half = _half(params, margin)
    centre = half * aa
    head = _tr((centre, centre), angle, length * aa)
    big = Image.new("L", (2 * centre + 1, 2 * centre + 1), 0)
    ImageDraw.Draw(big).line([(centre, centre), (head[1], head[0])], fill=255,
                             width=round(params.thickness * aa))
    side = 2 * half + 1
    line = np.asarray(big.resize((side, side), _LANCZOS))
    dilated = _dilate_binary(np.asarray(big) > 0, _disk_offsets(margin * aa))
    footprint = np.asarray(Image.fromarray(dilated.astype(np.uint8) * np.uint8(255))
                           .resize((side, side), _LANCZOS))
    return _frozen(line), _frozen((footprint / 255.0).astype(np.float32))


@lru_cache(maxsize=8192)
def _intensity(angle: float, params: Params, margin: int, contrast: float) -> np.ndarray:
    line, _ = _paddle_patches(angle, params, margin)
    return _frozen((line / 255.0 * contrast).astype(np.float32))


def _window(p: Point, half: int, shape: tuple[int, int]):
    """(image slices, patch slices) of a (2 half + 1)^2 patch centred on p, clipped; or None."""
    r0, c0 = p[0] - half, p[1] - half
    top, left = max(r0, 0), max(c0, 0)
    bottom, right = min(p[0] + half, shape[0] - 1), min(p[1] + half, shape[1] - 1)
    if top > bottom or left > right:
        return None
    return ((slice(top, bottom + 1), slice(left, right + 1)),
            (slice(top - r0, bottom - r0 + 1), slice(left - c0, right - c0 + 1)))


@lru_cache(maxsize=4096)
def _seed_kernel(angle: float, params: Params, margin: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets of the seed kernel K: the saturated footprint (== 1) of a paddle drawn from
    (L+m+1, L+m+1) on a (2(L+m)+1)^2 patch, relative to the patch centre (the dilation anchor)."""
    anchor = params.paddle_length + margin
    side = 2 * anchor + 1
    _, footprint = _paddle_patches(angle, params, margin)
    kernel = np.zeros((side, side), np.float32)
    placed = _window((anchor + 1, anchor + 1), _half(params, margin), kernel.shape)
    if placed is not None:
        kernel[placed[0]] = footprint[placed[1]]
    rows, cols = np.nonzero(kernel == 1.0)
    return _frozen(rows - anchor), _frozen(cols - anchor)


@lru_cache(maxsize=4096)
def _seed_kernel_reaches_everywhere(angle: float, params: Params, margin: int) -> bool:
    """Whether every pixel of the image has at least one tap of the seed kernel inside the image.

    The original dilates the float64 mask with ``cv2.dilate``, whose constant border for a
    dilation is -DBL_MAX: a pixel whose taps all fall outside the image comes out as -DBL_MAX,
    and ``find_available_coordinates`` then reports no free position at all (its ``min < 0``
    branch). The kernel is anchored one pixel off the paddle's tail, so for most orientations its
    saturated taps lie on one side of the anchor and the seed fails outright: at 32x32 only the
    orientations -150..-121 degrees can seed a snake (PF128 with m = 2 loses 6 of 360). This is
    what limits PF32 to about one distractor snake per image, as in LRA's images."""
    offsets = _seed_kernel(angle, params, margin)
    if len(offsets[0]) == 0:  # cv2 fills part of the image with -DBL_MAX for an empty kernel too
        return False
    window = params.window
    return bool(_dilate_binary(np.ones((window, window), bool), offsets).all())


@lru_cache(maxsize=1024)
def _circle(window: int, tip: Point, radius: float, aa: int) -> np.ndarray:
    """uint8[W, W]: a disc of radius ``radius * aa`` centred at ``tip * aa`` on the supersampled
    canvas, Lanczos-downsampled."""
    big = window * aa
    rows = np.arange(big) - tip[0] * aa
    cols = np.arange(big) - tip[1] * aa
    disc = rows[:, None] ** 2 + cols[None, :] ** 2 <= (radius * aa) ** 2
    image = Image.fromarray(disc.astype(np.uint8) * np.uint8(255))
    return _frozen(np.asarray(image.resize((window, window), _LANCZOS)))


@lru_cache(maxsize=1 << 15)
def _circle_candidates(centre: Point, radius: int, window: int, margin: int):
    """The candidate heads around ``centre``: (coords int[N, 2] sorted by (row, col), their
    angles seen from the centre, their flat indices int[N, 1] in the mask padded by m), or None
    when no point of the circle is inside the image."""
    step = 360.0 / (2 * radius * np.pi)
    theta = np.arange(0, 360, step) * np.pi / 180
    rows = centre[0] + radius * np.sin(theta)
    cols = centre[1] + radius * np.cos(theta)
    inside = (rows < window) & (rows >= 0) & (cols < window) & (cols >= 0)
    if not inside.any():
        return None
    coords = np.unique(np.stack([rows[inside], cols[inside]], 1).astype(np.int64), axis=0)
    delta = coords - np.array(centre)
    angles = np.arctan2(delta[:, 0], delta[:, 1])
    flat = (coords[:, :1] + margin) * (window + 2 * margin) + coords[:, 1:] + margin
    return _frozen(coords), _frozen(angles), _frozen(flat)


def _byte_scale(image: np.ndarray) -> np.ndarray:
    """scipy.misc.imsave's conversion of a float image: min..max -> 0..255, rounded half up."""
    low, high = float(image.min()), float(image.max())
    scale = 255.0 / ((high - low) or 1.0)
    return (np.clip((image - low) * scale, 0, 255) + 0.5).astype(np.uint8)


# ----------------------------------------------------------------------------------------------
# Drawing


class _Snake:
    """A growing snake: its pivot, orientation, pending footprint and the paddles drawn."""

    __slots__ = ("angle", "paddles", "pending", "pivot")

    def __init__(self, pivot: Point, angle: float, pending, paddles: list[Paddle]):
        self.pivot, self.angle, self.pending, self.paddles = pivot, angle, pending, paddles


class _Canvas:
    def __init__(self, params: Params, margin: int, rng: np.random.Generator):
        self.p, self.margin, self.rng = params, margin, rng
        w = params.window
        self.image = np.zeros((w, w))
        # The mask lives inside a zero band of width m, so that M' (M dilated by Disk(m)) can be
        # read at any candidate without bounds checks.
        self.padded_mask = np.zeros((w + 2 * margin, w + 2 * margin))
        self.mask = self.padded_mask[margin:margin + w, margin:margin + w]
        pad = params.padding
        self.mask[:pad, :] = self.mask[-pad:, :] = 1
        self.mask[:, :pad] = self.mask[:, -pad:] = 1
        self.half = _half(params, margin)
        dy, dx = _disk_offsets(margin)
        self.disk = dy * (w + 2 * margin) + dx  # Disk(m) as flat offsets in the padded mask

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        return self.image.copy(), self.mask.copy()

    def restore(self, saved: tuple[np.ndarray, np.ndarray]) -> None:
        self.image[...], self.mask[...] = saved

    # -- paddles

    def paint(self, start: Point, angle: float, contrast: float):
        """Draw a paddle into the image; return its footprint as (image slices, patch) or None."""
        placed = _window(start, self.half, self.image.shape)
        if placed is None:
            return None
        where, part = placed
        np.maximum(self.image[where], _intensity(angle, self.p, self.margin, contrast)[part],
                   out=self.image[where])
        return where, _paddle_patches(angle, self.p, self.margin)[1][part]

    def merge(self, footprint) -> None:
        if footprint is not None:
            where, patch = footprint
            np.maximum(self.mask[where], patch, out=self.mask[where])

    def collides(self, start: Point, angle: float) -> bool:
        placed = _window(start, self.half, self.mask.shape)
        if placed is None:
            return False  # max(M) <= 1 < 1.8 outside any footprint
        where, part = placed
        footprint = _paddle_patches(angle, self.p, self.margin)[1][part]
        return not float((self.mask[where] + footprint).max()) < _COLLISION

    def in_image(self, *points: Point) -> bool:
        w = self.p.window
        return all(0 <= r < w and 0 <= c < w for r, c in points)

    # -- seeds

    def free_tails(self, angle: float, band: int) -> np.ndarray:
        """int[N, 2]: the free tail positions (row-major order) for a paddle of this angle; none
        when the seed kernel does not reach every pixel (the original's -DBL_MAX border quirk)."""
        if not _seed_kernel_reaches_everywhere(angle, self.p, self.margin):
            return np.zeros((0, 2), np.int64)
        occupied = self.mask > _FREE
        occupied[:band, :] = occupied[-band:, :] = True
        occupied[:, :band] = occupied[:, -band:] = True
        blocked = _dilate_binary(occupied, _seed_kernel(angle, self.p, self.margin))
        return np.argwhere(~blocked)

    def draw_angle(self) -> float:
        return int(self.rng.integers(-180, 180)) * math.pi / 180

    def seed(self, band: int, contrast: float, *, stop_with_availability: bool) -> _Snake | None:
        """A snake's first paddle, its tail drawn among the free positions (up to 3 tries)."""
        for _ in range(_MAX_PADDLE_TRIALS):
            angle = self.draw_angle()
            if stop_with_availability and \
                    np.count_nonzero(self.mask <= _FREE) / self.mask.size < _MIN_AVAILABLE:
                return None
            free = self.free_tails(angle, band)
            if len(free) == 0:
                return None
            tail = tuple(int(v) for v in free[int(self.rng.integers(0, len(free)))])
            if (snake := self._first_paddle(tail, angle, contrast)) is not None:
                return snake
        return None

    def seed_near(self, tail1: Point, contrast: float) -> _Snake | None:
        """Target snake 2's seed: a tail ``seed_distance`` from snake 1's, no occupancy test."""
        distance = self.p.seed_distance
        for _ in range(_MAX_PADDLE_TRIALS):
            angle = self.draw_angle()
            phi = int(self.rng.integers(0, 360)) * math.pi / 180
            tail = (int(np.round(tail1[0] + distance * math.sin(phi))),
                    int(np.round(tail1[1] + distance * math.cos(phi))))
            if (snake := self._first_paddle(tail, angle, contrast)) is not None:
                return snake
        return None

    def _first_paddle(self, tail: Point, angle: float, contrast: float) -> _Snake | None:
        """Paint a snake's first paddle from ``tail`` if its head and pivot are inside the image."""
        length = self.p.paddle_length
        head = _tr(tail, angle, length)
        pivot = _tr(head, _flip(angle), length + self.margin)
        if not self.in_image(head, pivot):
            return None
        return _Snake(pivot, angle, self.paint(tail, angle, contrast), [(tail, head)])

    # -- growing

    def _candidates(self, centre: Point, angle: float):
        """Candidate heads on the circle around ``centre`` and their cumulative weights."""
        found = _circle_candidates(centre, self.p.paddle_length + self.margin, self.p.window,
                                   self.margin)
        if found is None:
            return None
        coords, angles, flat = found
        turn = np.abs(angles - angle)
        turn = np.minimum(np.minimum(turn, 2 * np.pi - turn) * self.p.continuity, 0.5 * np.pi)
        weights = np.maximum(np.cos(turn), 0) ** 2
        # M' = M grey-dilated by Disk(m), read at the candidates only.
        near = self.padded_mask.ravel()[flat + self.disk]
        pmf = (1 - near.max(axis=1)) * weights
        total = pmf.sum()
        if total < 1e-4:
            return None
        return coords, angles, np.cumsum(pmf / total)

    def extend(self, snake: _Snake, contrast: float) -> bool:
        length, margin = self.p.paddle_length, self.margin
        centre = _tr(snake.pivot, snake.angle, length + 2 * margin)
        found = self._candidates(centre, snake.angle)
        if found is None:
            return False
        coords, angles, cmf = found
        for _ in range(_MAX_PADDLE_TRIALS):
            index = int(np.argmax(cmf - self.rng.random() > 0))
            angle = float(angles[index])
            head = (int(coords[index, 0]), int(coords[index, 1]))
            back = _flip(angle)
            if not self.collides(head, back):
                footprint = self.paint(head, back, contrast)
                self.merge(snake.pending)
                snake.pivot, snake.angle, snake.pending = centre, angle, footprint
                snake.paddles.append((_tr(head, back, length), head))
                return True
        return False


def _two_snakes(params: Params, margin: int, contour_length: int, rng: np.random.Generator):
    canvas = _Canvas(params, margin, rng)
    mu, rho = params.snake_contrast, params.paddle_contrast
    first = canvas.seed(2 * params.seed_distance, rho * mu, stop_with_availability=False)
    if first is None:
        return None
    second = canvas.seed_near(first.paddles[0][0], rho * mu)
    if second is None:
        return None
    for _ in range(contour_length - 1):
        for snake in (first, second):
            if not canvas.extend(snake, rho * mu):
                return None
    canvas.merge(second.pending)  # the original merges only the last snake's last footprint
    return canvas, (tuple(first.paddles), tuple(second.paddles))


def _distractor(canvas: _Canvas, length: int) -> tuple[Paddle, ...] | None:
    mu = canvas.p.snake_contrast
    snake = canvas.seed(1, mu, stop_with_availability=True)
    if snake is None:
        return None
    for _ in range(length - 1):
        if not canvas.extend(snake, mu):
            return None
    canvas.merge(snake.pending)
    return tuple(snake.paddles)


def draw(params: Params, contour_length: int, rng: np.random.Generator) -> Drawing:
    """Render one image (steps A-D) with draws from ``rng``."""
    label = int(rng.integers(0, 2))
    margin = params.margins[int(rng.integers(0, len(params.margins)))]
    attempts = 1
    while (drawn := _two_snakes(params, margin, contour_length, rng)) is None:
        if attempts == _MAX_TARGET_ATTEMPTS:
            raise RuntimeError(f"no pair of target snakes of {contour_length} paddles fits in "
                               f"{_MAX_TARGET_ATTEMPTS} attempts")
        attempts += 1
    canvas, paths = drawn

    distractor_length = contour_length // 3
    distractors = []
    for _ in range(params.distractor_budget // distractor_length):
        for _ in range(_MAX_DISTRACTOR_TRIALS):
            saved = canvas.snapshot()
            snake = _distractor(canvas, distractor_length)
            if snake is not None:
                distractors.append(snake)
                break
            canvas.restore(saved)  # roll back the failed attempt

    origin = int(rng.integers(0, 2))
    terminal = origin if label == 1 else 1 - origin
    marked = ((origin, 0), (terminal, 1))
    tips = [paths[origin][0][0], paths[terminal][-1][1]]
    circles = [_circle(params.window, tip, params.marker_radius, params.aa) for tip in tips]
    markers = np.maximum(*circles).astype(np.float64) / 255
    image = _byte_scale(np.maximum(canvas.image, markers))
    return Drawing(image=image, label=label, margin=margin, paths=paths, marked=marked,
                   distractors=tuple(distractors), attempts=attempts)

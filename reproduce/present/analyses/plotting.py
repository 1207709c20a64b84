"""Figure helpers shared by the analyses: one legend outside the panels, text wrapped to fit, a layout check.

* :func:`legend_outside` — one legend for a figure (every panel's entries, each label once) to the right of a
  panel, the per-panel legends removed, the figure widened by the legend's width (the panels keep theirs);
* :func:`footer` — a small line under the panels naming what the title leaves out (data set, profile, seeds);
* :func:`fit_text` — the figure's title, panel titles, axis labels and categorical tick labels wrapped (and
  tick labels rotated) until each fits the space it has, the figure grown until every panel is at least
  :data:`MIN_AXES_IN` wide and tall, then ``tight_layout``; every figure function of
  ``reproduce.present.analyses``, :mod:`reproduce.present.report` and :mod:`reproduce.present.qualitative` ends with it;
* :func:`layout_problems` — what a reader would see as broken: two text elements (titles, axis labels,
  tick labels, legends, annotations) overprinting each other, text leaving the canvas, a legend entry
  listed twice, an annotation or legend drawn over the data, a title of more lines than :data:`MAX_TITLE_LINES`, a
  panel smaller than :data:`MIN_AXES_IN`, or a y label wrapped to more than :data:`MAX_YLABEL_LINES` lines.
  ``tests/reproduce/present/test_figure_layout.py`` renders every figure function on planted data and asks it for
  an empty list.

Bounding boxes come from matplotlib's renderer (``artist.get_window_extent(renderer)``, display pixels).
"""

from __future__ import annotations

import itertools
import textwrap
import warnings

from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.patches import Rectangle
from matplotlib.transforms import Bbox

from reproduce.present.analyses import bands

LEGEND_RIGHT = dict(loc="upper left", bbox_to_anchor=(1.01, 1))
# seaborn draws its 95% confidence bands from a fresh, unseeded generator unless given a seed: every figure's
# bootstrap intervals use this one, so the same results draw the same pixels
BOOT_SEED = bands.SEED
#: seaborn keyword arguments of every 95 % band: ``sns.lineplot(..., **BANDS)`` — seaborn's ("ci", 95) interval with
#: this seed, computed by :func:`bands.ci95` in one reduction instead of seaborn's 1,000 calls per band
BANDS = dict(errorbar=bands.ci95, seed=BOOT_SEED)
# how far seaborn moves the series of one categorical x apart: small enough that a point stays by its tick (at 0.3 a
# β₂ = 0.5 read as 0.45 and 0.54 on an axis whose ticks look numeric), large enough that the bars do not overlap
DODGE = 0.15
MIN_WRAP = 8  # characters: text is never wrapped narrower than this
MIN_AXES_IN = 2.5  # inches: the least width and height of a panel (an axes with its axis drawn, not a colour bar)
MAX_TITLE_LINES = {False: 1, True: 2}  # lines of a figure title: one panel, several panels (a wrapped suptitle)
MAX_YLABEL_LINES = 3  # lines of a y label: more reads one word a line
FOOTER_SIZE = 7  # points: the footer line under the panels


# --- legends ---------------------------------------------------------------------------------------------
def legend_outside(fig, ax=None, fontsize: float = 8, title: str | None = None):
    """One legend for ``fig``: every visible axis's entries, each label once (the first handle wins; labels
    starting with ``_`` skipped), upper left just right of ``ax`` (default: the last visible axis of the top
    row of panels); per-axis and figure legends removed. Returns ``fig``."""
    entries: dict = {}
    visible = [a for a in fig.axes if a.get_visible()]
    for a in visible:
        for h, lab in zip(*a.get_legend_handles_labels()):
            if lab and not lab.startswith("_"):
                entries.setdefault(lab, h)
        if a.get_legend() is not None:
            a.get_legend().remove()
    for leg in list(fig.legends):
        leg.remove()
    if not entries or not visible:
        return fig
    if ax is None:
        top = max(a.get_position().y1 for a in visible)
        ax = max((a for a in visible if abs(a.get_position().y1 - top) < 1e-6), key=lambda a: a.get_position().x1)
    leg = ax.legend(list(entries.values()), list(entries), fontsize=fontsize, title=title, **LEGEND_RIGHT)
    _widen_for(fig, leg)
    return fig


def _widen_for(fig, legend) -> None:
    """Widen ``fig`` by the width of ``legend`` (placed right of the panels) so that ``tight_layout`` leaves the
    panels their width instead of shrinking them to make room; called again, the earlier widening is replaced."""
    w, h = fig.get_size_inches()
    before = getattr(fig, "_legend_room_in", 0.0)
    room = legend.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi + 0.15
    fig.set_size_inches(w - before + room, h)
    fig._legend_room_in = room


# --- the footer ------------------------------------------------------------------------------------------
def footer(fig, text: str, fontsize: float = FOOTER_SIZE):
    """A small grey line at the bottom left of ``fig`` under its panels: what a one-line title leaves out (data set,
    profile, seeds) for a figure that stands alone; wrapped to the figure's width and kept clear of the panels by
    :func:`fit_text`. A second call replaces the first. Returns ``fig`` (text fitted)."""
    old = getattr(fig, "_footer", None)
    if old is not None:
        old.remove()
    fig._footer = fig.text(0.005, 0.005, text, ha="left", va="bottom", fontsize=fontsize, color="0.35")
    return fit_text(fig)


# --- wrapping --------------------------------------------------------------------------------------------
def wrap(text: str, width: int) -> str:
    """``text`` re-wrapped to lines of at most ``width`` characters (words kept whole; a single longer word
    stays on its own line); existing line breaks are dropped first."""
    flat = " ".join(text.split())
    return textwrap.fill(flat, max(int(width), MIN_WRAP), break_long_words=False, break_on_hyphens=False)


def _fit_one(text_artist, renderer, available: float, along: str = "width") -> bool:
    """Wrap ``text_artist`` until its extent ``along`` ("width" or "height", pixels) is at most ``available``.
    Returns whether it changed."""
    s = text_artist.get_text()
    if not s or not text_artist.get_visible() or available <= 0:
        return False
    changed = False
    for _ in range(6):
        box = text_artist.get_window_extent(renderer)
        size = box.width if along == "width" else box.height
        if along == "height":  # a rotated label: its length runs along the height
            size = box.height
        if size <= available:
            break
        longest = max(len(line) for line in text_artist.get_text().split("\n"))
        width = int(longest * available / size * 0.95)
        if width >= longest:
            width = longest - 1
        if width < MIN_WRAP:
            break
        text_artist.set_text(wrap(s, width))
        changed = True
    return changed


def _visible_ticklabels(axis):
    """The tick labels ``axis`` draws: visible, non-empty, at a tick inside the view interval."""
    lo, hi = sorted(axis.get_view_interval())
    span = hi - lo
    out = []
    for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
        loc = tick.get_loc()
        if loc is None or not (lo - 1e-9 * abs(span) <= loc <= hi + 1e-9 * abs(span)):
            continue
        for lab in (tick.label1, tick.label2):
            if lab.get_visible() and lab.get_text().strip() and tick.get_visible():
                out.append(lab)
    return out


def _fit_xticklabels(ax, renderer) -> bool:
    """Word x tick labels (categories) wider than their slot: wrapped to the slot (fixed as the axis' labels,
    so a redraw keeps them); when a word is still wider, rotated (30°, 45°, 90°: the least at which neighbours
    no longer touch)."""
    ticks = [t for t in ax.xaxis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
    words = [t.get_text() for t in ticks if "$" not in t.get_text()]  # mathtext (10⁻³ …) is a number
    if len(ticks) < 2 or not any(c.isalpha() for w in words for c in w):
        return False
    slot = 0.85 * ax.get_window_extent(renderer).width / len(ticks)  # a visible gap between neighbours
    widest = max(t.get_window_extent(renderer).width for t in ticks)
    if widest <= slot:
        return False
    rotated = ticks[0].get_rotation() % 360
    if rotated:  # rotated already (by an earlier round or the caller): rotate further only while neighbours touch
        boxes = [t.get_window_extent(renderer) for t in ticks]
        if rotated >= 90 or not any(_overlap(a, b, 1.0) for a, b in zip(boxes, boxes[1:])):
            return False
        return _rotate_xticklabels(ax, renderer, [a for a in (30, 45, 90) if a > rotated])
    longest = max(len(line) for t in ticks for line in t.get_text().split("\n"))
    width = max(MIN_WRAP, int(longest * slot / widest))
    locs = ax.get_xticks()
    texts = [t.get_text() for t in ax.xaxis.get_ticklabels()]
    ax.set_xticks(locs, labels=[wrap(t, width) if t.strip() else t for t in texts])
    ax.figure.canvas.draw()
    if max(t.get_window_extent(renderer).width for t in ax.xaxis.get_ticklabels() if t.get_text().strip()) > slot:
        _rotate_xticklabels(ax, renderer, (30, 45, 90))
    return True


def _rotate_xticklabels(ax, renderer, angles) -> bool:
    """Rotate the x tick labels by the first of ``angles`` at which neighbours no longer touch (else the last)."""
    for angle in angles:
        ax.tick_params(axis="x", labelrotation=angle)
        for t in ax.xaxis.get_ticklabels():
            t.set_horizontalalignment("right" if angle < 90 else "center")
            t.set_rotation_mode("anchor" if angle < 90 else "default")
        ax.figure.canvas.draw()
        shown = [t.get_window_extent(renderer) for t in ax.xaxis.get_ticklabels() if t.get_text().strip()]
        if not any(_overlap(a, b, 1.0) for a, b in zip(shown, shown[1:])):
            break
    return bool(angles)


def fit_text(fig, rounds: int = 4):
    """Make every text of ``fig`` fit its space: the figure title to the figure's width, each panel's title
    and x label to the panel's width, its y label to the panel's height, categorical x tick labels to their
    slot (:func:`_fit_xticklabels`); ``tight_layout`` after each round (sizes change as text wraps).
    Returns ``fig``."""
    _tight(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for _ in range(rounds):
        changed = False
        fig_w = fig.bbox.width
        if fig._suptitle is not None:
            changed |= _fit_one(fig._suptitle, renderer, 0.98 * fig_w)
        if getattr(fig, "_footer", None) is not None:
            changed |= _fit_one(fig._footer, renderer, 0.98 * fig_w)
        for ax in fig.axes:
            if not ax.get_visible() or not ax.axison:
                continue
            box = ax.get_window_extent(renderer)
            for title in (ax.title, ax._left_title, ax._right_title):
                changed |= _fit_one(title, renderer, box.width)
            changed |= _fit_one(ax.xaxis.label, renderer, box.width)
            changed |= _fit_one(ax.yaxis.label, renderer, box.height, along="height")
            changed |= _fit_xticklabels(ax, renderer)
        changed |= _make_room(fig, renderer)
        if not changed:
            break
        _tight(fig)
        fig.canvas.draw()
    return fig


def panels(fig) -> list:
    """The panels of ``fig``: visible axes with their axis drawn, colour bars left out."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison and not hasattr(ax, "_colorbar")]


def _make_room(fig, renderer) -> bool:
    """Grow ``fig`` until its smallest panel is :data:`MIN_AXES_IN` wide and tall: by the shortfall times the
    number of panel columns (rows), since ``tight_layout`` shares the added inches among them. Returns whether it
    grew."""
    axes = panels(fig)
    if not axes:
        return False
    grow = []
    for along, edge in (("width", "x0"), ("height", "y0")):
        sizes = [getattr(ax.get_window_extent(renderer), along) / fig.dpi for ax in axes]
        lines = len({round(getattr(ax.get_position(), edge), 2) for ax in axes})
        grow.append(max(0.0, MIN_AXES_IN + 0.02 - min(sizes)) * lines)
    if not any(g > 0.005 for g in grow):
        return False
    w, h = fig.get_size_inches()
    fig.set_size_inches(w + grow[0], h + grow[1])
    return True


def _tight(fig) -> None:
    if isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        return
    rect = (0, 0, 1, 1)
    foot = getattr(fig, "_footer", None)
    if foot is not None:  # the panels start above the footer
        fig.canvas.draw()
        height = foot.get_window_extent(fig.canvas.get_renderer()).height + 4
        rect = (0, min(0.3, height / fig.bbox.height), 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "not compatible with tight_layout" for colorbar grids
        fig.tight_layout(rect=rect)


# --- the layout check ------------------------------------------------------------------------------------
def _name(artist, what: str) -> str:
    text = artist.get_text() if hasattr(artist, "get_text") else ""
    text = " ".join(str(text).split())
    return f"{what} {text[:40]!r}" if text else what


def text_boxes(fig, renderer) -> list[tuple[str, object, object]]:
    """Every drawn text element of ``fig`` as ``(description, artist, Bbox in display pixels)``: figure title
    and figure texts, figure legends, and per visible axis its titles, axis labels, drawn tick labels, texts
    (annotations) and legend (one box for the whole legend)."""
    out = []

    def add(artist, what):
        if artist is None or not artist.get_visible():
            return
        if hasattr(artist, "get_text") and not str(artist.get_text()).strip():
            return
        box = artist.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            out.append((_name(artist, what), artist, box))

    if fig._suptitle is not None:
        add(fig._suptitle, "figure title")
    for t in fig.texts:
        if (
            t is not fig._suptitle
            and t is not getattr(fig, "_supxlabel", None)
            and t is not getattr(fig, "_supylabel", None)
        ):
            add(t, "figure text")
    for leg in fig.legends:
        add(leg, "figure legend")
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"axes {i}"
        for title in (ax.title, ax._left_title, ax._right_title):
            add(title, f"{where} title")
        if ax.axison:
            add(ax.xaxis.label, f"{where} x label")
            add(ax.yaxis.label, f"{where} y label")
            for lab in _visible_ticklabels(ax.xaxis):
                add(lab, f"{where} x tick")
            for lab in _visible_ticklabels(ax.yaxis):
                add(lab, f"{where} y tick")
        for t in ax.texts:
            add(t, f"{where} annotation")
        if ax.get_legend() is not None:
            add(ax.get_legend(), f"{where} legend")
    return out


def _overlap(a, b, tol: float) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def _data_paths(ax):
    """Display-space paths of the data of ``ax``: its lines (with their markers' points) and bar patches."""
    paths = []
    for line in ax.lines:
        if line.get_visible() and len(line.get_xydata()) > 0:
            paths.append(("line", line.get_transform().transform_path(line.get_path())))
    for p in ax.patches:
        if isinstance(p, Rectangle) and p.get_visible() and p.get_height() != 0:
            paths.append(("bar", p.get_transform().transform_path(p.get_path())))
    return paths


def layout_problems(fig, tol: float = 1.0) -> list[str]:
    """What is broken in ``fig`` once drawn, one sentence each (empty: nothing): two text elements of
    :func:`text_boxes` overlapping by more than ``tol`` pixels both ways (a legend's own entries and the
    legend itself are one element), a text element reaching outside the canvas, a legend naming an entry twice,
    or an annotation or a legend drawn over a line or bar of an axis it sits on."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = text_boxes(fig, renderer)
    problems = []
    for (na, _, a), (nb, _, b) in itertools.combinations(boxes, 2):
        if _overlap(a, b, tol):
            problems.append(f"{na} overlaps {nb}")
    canvas = fig.bbox
    for name, _, box in boxes:
        if box.x0 < canvas.x0 - tol or box.y0 < canvas.y0 - tol or box.x1 > canvas.x1 + tol or box.y1 > canvas.y1 + tol:
            problems.append(f"{name} leaves the canvas ({box.x0:.0f}, {box.y0:.0f}, {box.x1:.0f}, {box.y1:.0f})")
    for leg in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_visible())]:
        names = [t.get_text() for t in leg.get_texts()] if leg is not None else []
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            problems.append(f"legend lists {twice} more than once")

    problems += size_problems(fig, renderer)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        covers = [(_name(t, "annotation"), t) for t in ax.texts if t.get_visible() and t.get_text().strip()]
        if ax.get_legend() is not None:
            covers.append(("legend", ax.get_legend()))
        data = _data_paths(ax)
        for name, artist in covers:
            box = artist.get_window_extent(renderer)
            inner = Bbox.from_extents(box.x0 + tol, box.y0 + tol, box.x1 - tol, box.y1 - tol)
            for kind, path in data:
                if path.intersects_bbox(inner, filled=kind == "bar"):
                    problems.append(f"{name} is drawn over a {kind} of the data")
                    break
    return problems


def size_problems(fig, renderer=None) -> list[str]:
    """What is too big or too small in ``fig`` (drawn), one sentence each: a figure title of more lines than
    :data:`MAX_TITLE_LINES` (one for a single panel, two for several), a panel (:func:`panels`) narrower or lower than
    :data:`MIN_AXES_IN`, a y label wrapped to more than :data:`MAX_YLABEL_LINES` lines."""
    renderer = renderer or fig.canvas.get_renderer()
    axes = panels(fig)
    problems = []
    if fig._suptitle is not None and fig._suptitle.get_text().strip():
        n, most = len(fig._suptitle.get_text().split("\n")), MAX_TITLE_LINES[len(axes) > 1]
        if n > most:
            problems.append(f"figure title runs to {n} lines (at most {most})")
    for i, ax in enumerate(fig.axes):
        if ax not in axes:
            continue
        box = ax.get_window_extent(renderer)
        w, h = box.width / fig.dpi, box.height / fig.dpi
        if min(w, h) < MIN_AXES_IN - 0.005:
            problems.append(f"axes {i} is {w:.2f} × {h:.2f} in (at least {MIN_AXES_IN:g} × {MIN_AXES_IN:g})")
        n = len(ax.get_ylabel().split("\n")) if ax.get_ylabel().strip() else 0
        if n > MAX_YLABEL_LINES:
            problems.append(f"axes {i} y label runs to {n} lines (at most {MAX_YLABEL_LINES})")
    return problems

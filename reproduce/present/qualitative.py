"""Qualitative retrieval views: what "more coherent" looks like (BCLS Figs. 6–7, ladder Figs. 4–5,
listwise Fig. 10), from cached test embeddings — no training.

Everything reads a run's rankings of its test split (:class:`reproduce.present.rankings.Ranking`: from its test
embeddings — float16 in old cache entries, float32 in new ones, both computed in float32 — or, for a run imported
without them, the top candidates its archive carried) and the test split itself:

* :func:`disagreement_rank` — the stated rule that picks the examples: queries ordered by the
  overlap of the two arms' top-k lists (smallest overlap first), ties by query index;
* :func:`top_k_table` — the top-k of each arm for one query with each candidate's relevance
  (Sentence-BERT, true relevance on the synthetic world, …) and its expert score when judged;
* :func:`figure_qualitative` — per image the photo and the top-k captions under each arm, each
  caption coloured by its relevance, with its expert score;
* :func:`explorer` — an ipywidgets browser (``notebooks/07_explore.ipynb``) built on the same
  functions; :func:`render_query_html` is its static view;
* :func:`figure_disagreement` — :func:`figure_qualitative` of a study's runs
  (:func:`reproduce.present.view_runs.study_views`, re-exported here).

Ranking: candidates in descending similarity, ties broken by the lower candidate index (a stable
sort), for both the tables and the rule.
"""

from __future__ import annotations

import base64
import html
import io
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.patches import Rectangle
from PIL import Image

from reproduce.spec.labels import YARDSTICKS
from reproduce.present.rankings import QUERIES, as_ranking, similarity, top_k_indices
from reproduce.present.view_runs import MissingRun as MissingRun, arm_embeddings, arm_rankings, study_views

CMAP = "viridis"


# --------------------------------------------------------------------------------------------------
# Similarities and the selection rule
# --------------------------------------------------------------------------------------------------
def disagreement_rank(sim_a, sim_b, k: int = 5, query: str = "image") -> pd.DataFrame:
    """Queries ordered by how much two arms disagree: ``overlap`` = |top-k(A) ∩ top-k(B)| ascending
    (0 = no common candidate), ties by query index. Columns ``query``, ``overlap``. Each arm is a similarity
    matrix or a :class:`~reproduce.present.rankings.Ranking`."""
    ra, rb = as_ranking(sim_a), as_ranking(sim_b)
    if ra.shape != rb.shape:
        raise ValueError(f"the two similarity matrices differ in shape: {ra.shape} vs {rb.shape}")
    ta, tb = ra.top(query, k), rb.top(query, k)
    overlap = (ta[:, :, None] == tb[:, None, :]).any(axis=2).sum(axis=1)
    order = np.lexsort((np.arange(len(overlap)), overlap))
    return pd.DataFrame({"query": order, "overlap": overlap[order]})


# --------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------
def expert_scores(human) -> pd.Series:
    """Mean judged score per (image_idx, caption_idx) of a judgements table (``split.extras["expert"]``:
    columns ``image_idx``, ``caption_idx``, ``score``); duplicates of a pair are averaged."""
    if human is None:
        return pd.Series(dtype=float, index=pd.MultiIndex.from_arrays([[], []], names=["image_idx", "caption_idx"]))
    missing = {"image_idx", "caption_idx", "score"} - set(human.columns)
    if missing:
        raise ValueError(f"judgements table lacks column(s) {sorted(missing)}; has {list(human.columns)}")
    return human.groupby(["image_idx", "caption_idx"])["score"].mean()


def _relevance_columns(relevance) -> dict[str, np.ndarray]:
    if relevance is None:
        return {}
    if isinstance(relevance, np.ndarray):
        return {"sbert": relevance}
    return dict(relevance)


def top_k_table(
    sims: dict, split, query_idx: int, k: int = 5, query: str = "image", relevance=None, human=None
) -> pd.DataFrame:
    """The top-``k`` of each arm for one query, one row per (arm, rank); ``sims``: ``{arm: similarity matrix or
    Ranking}``.

    Columns: ``arm``, ``rank`` (1-based), ``image_idx``, ``caption_idx`` (the ranked candidate with the
    query), ``text`` (the candidate caption, or the candidate image's id), ``gt`` (the caption was
    written for the image), ``similarity``, one column per ``relevance`` name (a matrix images ×
    captions, e.g. ``{"sbert": …, "true": …}``; a bare matrix is named ``sbert``) and ``expert`` (the
    mean expert score of the pair, NaN when not judged)."""
    rels = _relevance_columns(relevance)
    exp = expert_scores(human)
    img_of = split.image_of_caption
    n_q = split.n_images if query == "image" else split.n_captions
    if not 0 <= query_idx < n_q:
        raise ValueError(f"{query} query index {query_idx} out of range: the split has {n_q} {query}s")
    rows = []
    for arm, sim in sims.items():
        ranking = as_ranking(sim)
        if ranking.shape != (split.n_images, split.n_captions):
            raise ValueError(
                f"arm {arm!r}: similarity shape {ranking.shape} does not match the split "
                f"({split.n_images} images × {split.n_captions} captions)"
            )
        top, value = ranking.top(query, k, [query_idx])[0], ranking.values(query, k, [query_idx])[0]
        for r, (c, v) in enumerate(zip(top, value), start=1):
            i, j = (query_idx, int(c)) if query == "image" else (int(c), query_idx)
            row = {
                "arm": arm,
                "rank": r,
                "image_idx": i,
                "caption_idx": j,
                "text": split.captions[j] if query == "image" else split.image_ids[i],
                "gt": bool(img_of[j] == i),
                "similarity": float(v),
            }
            row.update({name: float(m[i, j]) for name, m in rels.items()})
            row["expert"] = float(exp.get((i, j), np.nan))
            rows.append(row)
    return pd.DataFrame(rows)


def query_text(split, query_idx: int, query: str = "image") -> str:
    return split.image_ids[query_idx] if query == "image" else split.captions[query_idx]


def disagreement_table(
    sims: dict, split, arm_a: str, arm_b: str, k: int = 5, query: str = "image", n: int = 10
) -> pd.DataFrame:
    """The ``n`` queries where ``arm_a`` and ``arm_b`` disagree most (:func:`disagreement_rank`),
    with the query's text (image id or caption)."""
    d = disagreement_rank(sims[arm_a], sims[arm_b], k, query).head(n)
    d[query] = [query_text(split, int(q), query) for q in d["query"]]
    return d.rename(columns={"overlap": f"common in top {k}"}).reset_index(drop=True)


def image_path(split, image_idx: int, images_dir=None) -> Path | None:
    """The photo of a test image (``images_dir / image_id``) or None (no folder, no such file —
    the synthetic world has no photos)."""
    if images_dir is None:
        return None
    p = Path(images_dir) / str(split.image_ids[image_idx])
    return p if p.is_file() else None


# --------------------------------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------------------------------
_SHORT = {"sbert": "SBERT", "true": "r*", "cider": "CIDEr"}


def _rel_name(name: str) -> str:
    return {
        "sbert": "Sentence-BERT relevance ((1 + cos)/2 to the image's captions, 0…1)",
        "true": "true relevance r* (0…1, seen by no loss)",
    }.get(name, YARDSTICKS.get(name, name))


def figure_qualitative(
    sims: dict,
    split,
    image_idx,
    k: int = 5,
    relevance=None,
    colour_by: str | None = None,
    human=None,
    images_dir=None,
    rule: str = "",
    wrap: int = 44,
):
    """Per test image (rows): the photo (or its id when there is none) and the top-``k`` captions of
    each arm (columns), each caption's marker coloured by its relevance ``colour_by`` (default: the
    first of ``relevance``), with the value, the expert score when judged (``E 3.3``) and ★ for a
    caption written for the image. ``rule`` says how the images were picked (goes in the caption)."""
    rels = _relevance_columns(relevance)
    if not rels:
        raise ValueError("figure_qualitative needs a relevance matrix to colour the captions by")
    colour_by = colour_by or next(iter(rels))
    if colour_by not in rels:
        raise ValueError(f"colour_by={colour_by!r} is not one of the relevance names {list(rels)}")
    image_idx = [int(i) for i in image_idx]
    arms = list(sims)
    norm = mcolors.Normalize(0.0, 1.0) if rels[colour_by].min() >= 0 else mcolors.Normalize(-1.0, 1.0)
    cmap = plt.get_cmap(CMAP)
    style = dict(k=k, rels=rels, colour_by=colour_by, norm=norm, cmap=cmap, have_expert=human is not None, wrap=wrap)
    fig, gs = _qualitative_grid(len(image_idx), len(arms))
    for r, qi in enumerate(image_idx):
        _draw_query_image(fig.add_subplot(gs[r, 0]), split, qi, images_dir)
        tab = top_k_table(sims, split, qi, k, "image", rels, human)
        for c, arm in enumerate(arms, start=1):
            ax = fig.add_subplot(gs[r, c])
            _draw_captions(ax, tab[tab.arm == arm], arm if r == 0 else None, **style)
    cax = fig.add_subplot(gs[len(image_idx), 1:])
    cb = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), cax=cax, orientation="horizontal")
    cb.set_label(f"marker colour: {_rel_name(colour_by)}", fontsize=8)
    cb.ax.tick_params(labelsize=7)
    explain = _figure_caption(k, rule, rels, human is not None)
    fig.text(0.5, 0.06, textwrap.fill(explain, 150), ha="center", va="top", fontsize=8)
    return fig


def _qualitative_grid(n_rows: int, n_arms: int):
    """The figure of :func:`figure_qualitative` and its grid: a narrow image column, one column per arm, a row per
    image and a thin last row for the colour bar."""
    fig = plt.figure(figsize=(3.0 + 4.6 * n_arms, 2.9 * n_rows + 1.5))
    gs = fig.add_gridspec(
        n_rows + 1,
        1 + n_arms,
        width_ratios=[0.9] + [1.6] * n_arms,
        height_ratios=[1.0] * n_rows + [0.09],
        hspace=0.25,
        wspace=0.05,
        bottom=0.11,
    )
    return fig, gs


def _draw_query_image(ax, split, qi: int, images_dir) -> None:
    """Test image ``qi`` in ``ax``: its photo (at most 400 px) titled with its index and id, or, without a photo,
    its index, id and first three captions as text."""
    ax.set_axis_off()
    p = image_path(split, qi, images_dir)
    if p is not None:
        with Image.open(p) as im:
            im = im.convert("RGB")
            im.thumbnail((400, 400))
            ax.imshow(np.asarray(im))
        ax.set_title(f"test image {qi}\n{split.image_ids[qi]}", fontsize=7)
        return
    refs = "\n".join(
        textwrap.fill(f"• {split.captions[c]}", 34) for c in np.flatnonzero(split.image_of_caption == qi)[:3]
    )
    ax.text(
        0.5,
        0.5,
        f"test image {qi}\n{split.image_ids[qi]}\n(no photo; its captions:)\n{refs}",
        ha="center",
        va="center",
        fontsize=7,
        transform=ax.transAxes,
    )


def _caption_meta(row, rels: dict, have_expert: bool) -> str:
    """``SBERT 0.71 · r* 0.64 · E 3.3 ★``: a caption's relevance values, its expert score when judged and ★ when it
    was written for the image."""
    return (
        " · ".join(f"{_SHORT.get(n, n)} {row[n]:.2f}" for n in rels)
        + (f" · E {row['expert']:.1f}" if have_expert and np.isfinite(row["expert"]) else "")
        + (" ★" if row["gt"] else "")
    )


def _draw_captions(ax, sub: pd.DataFrame, title, *, k, rels, colour_by, norm, cmap, have_expert, wrap) -> None:
    """One arm's top-``k`` captions for one image (``sub``: its rows of :func:`top_k_table`) in ``ax``, top-down by
    rank: a marker coloured by relevance ``colour_by`` and the wrapped caption with :func:`_caption_meta`;
    ``title`` (the arm) over the first row only."""
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_axis_off()
    if title is not None:
        ax.set_title(title, fontsize=10, fontweight="bold")
    h = 1.0 / k
    for _, row in sub.iterrows():
        y = 1.0 - (row["rank"] - 0.5) * h
        v = row[colour_by]
        ax.add_patch(
            Rectangle((0.0, y - 0.32 * h), 0.05, 0.64 * h, color=cmap(norm(v)), transform=ax.transAxes, clip_on=False)
        )
        meta = _caption_meta(row, rels, have_expert)
        txt = textwrap.fill(f"{int(row['rank'])}. {row['text']}", wrap)
        ax.text(
            0.07,
            y,
            f"{txt}\n   [{meta}]",
            va="center",
            ha="left",
            fontsize=7,
            transform=ax.transAxes,
            linespacing=1.1,
        )


def _figure_caption(k: int, rule: str, rels: dict, have_expert: bool) -> str:
    """The text under :func:`figure_qualitative`: what is shown, how the images were picked (``rule``) and what
    each value beside a caption means."""
    return (
        f"Top-{k} captions retrieved for each test image (image→text) under each arm. "
        + (rule + " " if rule else "")
        + "[…]: "
        + ", ".join(f"{_SHORT.get(n, n)} = {_rel_name(n)}" for n in rels)
        + (
            " · E: mean expert score of the pair (1 = does not describe the image … 4 = describes it), "
            "shown when the pair was judged"
            if have_expert
            else ""
        )
        + " · ★: a caption written for this image (ground truth)."
    )


# --------------------------------------------------------------------------------------------------
# Static HTML view and the interactive explorer
# --------------------------------------------------------------------------------------------------
def _colour_hex(v: float, lo: float) -> str:
    x = (v - lo) / (1.0 - lo)
    return mcolors.to_hex(plt.get_cmap(CMAP)(min(max(x, 0.0), 1.0)))


def _table_html(tab: pd.DataFrame, rel_names: list[str], query: str, lows: dict, split=None, images_dir=None) -> str:
    head = (
        ["#", "caption" if query == "image" else "image", "GT", "similarity"]
        + [_SHORT.get(n, n) for n in rel_names]
        + ["expert"]
    )
    out = [
        "<table style='border-collapse:collapse;font-size:12px'><tr>"
        + "".join(f"<th style='padding:2px 6px;text-align:left'>{html.escape(h)}</th>" for h in head)
        + "</tr>"
    ]
    for _, row in tab.iterrows():
        thumb = _photo_html(image_path(split, int(row["image_idx"]), images_dir), 90) if query == "caption" else ""
        cells = [
            str(int(row["rank"])),
            thumb + html.escape(str(row["text"])),
            "★" if row["gt"] else "",
            f"{row['similarity']:.3f}",
        ]
        rc = []
        for n in rel_names:
            v = row[n]
            fg = "white" if (v - lows[n]) / (1 - lows[n]) < 0.6 else "black"
            rc.append(f"<td style='padding:2px 6px;background:{_colour_hex(v, lows[n])};color:{fg}'>{v:.2f}</td>")
        ex = "" if not np.isfinite(row["expert"]) else f"{row['expert']:.2f}"
        out.append(
            "<tr>"
            + "".join(f"<td style='padding:2px 6px'>{c}</td>" for c in cells)
            + "".join(rc)
            + f"<td style='padding:2px 6px'>{ex}</td></tr>"
        )
    return "".join(out) + "</table>"


def _photo_html(path: Path | None, size: int = 220) -> str:
    if path is None:
        return ""

    with Image.open(path) as im:
        im = im.convert("RGB")
        im.thumbnail((size, size))
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=80)
    return f"<img src='data:image/jpeg;base64,{base64.b64encode(buf.getvalue()).decode()}'/>"


def render_query_html(
    sims: dict,
    split,
    arm_a: str,
    arm_b: str,
    query: str = "image",
    query_idx: int = 0,
    k: int = 5,
    relevance=None,
    human=None,
    images_dir=None,
) -> str:
    """HTML: the query (photo or caption) and the two arms' top-``k`` side by side (for a caption query
    with a thumbnail of each candidate photo when there are photos), relevance cells coloured (darker =
    less relevant), expert scores where judged, ★ ground truth."""
    for a in (arm_a, arm_b):
        if a not in sims:
            raise KeyError(f"arm {a!r} has no embeddings here; arms: {list(sims)}")
    rels = _relevance_columns(relevance)
    lows = {n: 0.0 if m.min() >= 0 else -1.0 for n, m in rels.items()}
    tab = top_k_table({arm_a: sims[arm_a], arm_b: sims[arm_b]}, split, query_idx, k, query, rels, human)
    if query == "image":
        q = f"<b>image query {query_idx}</b> ({html.escape(str(split.image_ids[query_idx]))})<br>" + _photo_html(
            image_path(split, query_idx, images_dir)
        )
    else:
        q = (
            f"<b>caption query {query_idx}</b> (of image {split.image_of_caption[query_idx]}): "
            f"“{html.escape(split.captions[query_idx])}”"
        )
    overlap = len(
        set(tab[tab.arm == arm_a].caption_idx if query == "image" else tab[tab.arm == arm_a].image_idx)
        & set(tab[tab.arm == arm_b].caption_idx if query == "image" else tab[tab.arm == arm_b].image_idx)
    )
    cols = "".join(
        f"<div style='margin-right:16px'><b>{html.escape(a)}</b>"
        f"{_table_html(tab[tab.arm == a], list(rels), query, lows, split, images_dir)}</div>"
        for a in (arm_a, arm_b)
    )
    note = (
        f"{overlap} of the top {k} in common. Relevance: "
        + ", ".join(f"{_SHORT.get(n, n)} = {_rel_name(n)}" for n in rels)
        + ("; expert: mean of 3 expert scores, 1–4, blank when not judged" if human is not None else "")
        + "; ★ ground truth."
    )
    return f"<div>{q}<div style='display:flex;margin-top:6px'>{cols}</div><small>{html.escape(note)}</small></div>"


def explorer(sims: dict, split, relevance=None, human=None, images_dir=None, k: int = 5, n_list: int = 10):
    """An ipywidgets browser: pick two arms, an image or caption query (or one of the ``n_list`` queries
    where the arms disagree most), and see both rankings side by side (:func:`render_query_html`)."""
    # optional: the interactive explorer only
    import ipywidgets as w

    arms = list(sims)
    if len(arms) < 2:
        raise ValueError(f"the explorer compares two arms; got {arms}")
    arm_a = w.Dropdown(options=arms, value=arms[0], description="arm A")
    arm_b = w.Dropdown(options=arms, value=arms[1], description="arm B")
    kind = w.ToggleButtons(options=list(QUERIES), value="image", description="query")
    idx = w.BoundedIntText(value=0, min=0, max=split.n_images - 1, description="index")
    worst = w.Dropdown(description="disagree most", style={"description_width": "initial"})
    view, listing = w.HTML(), w.HTML()

    def refresh_list(*_):
        d = disagreement_table(sims, split, arm_a.value, arm_b.value, k, kind.value, n_list)
        worst.options = [
            (f"{q}: {t[:60]} ({c} common)", int(q))
            for q, t, c in zip(d["query"], d[kind.value], d[f"common in top {k}"])
        ]
        listing.value = f"<b>{kind.value} queries where the two arms share fewest of their top {k}</b>" + d.to_html(
            index=False
        )
        idx.max = (split.n_images if kind.value == "image" else split.n_captions) - 1

    def refresh_view(*_):
        view.value = render_query_html(
            sims, split, arm_a.value, arm_b.value, kind.value, idx.value, k, relevance, human, images_dir
        )

    def pick(change):
        if change["new"] is not None:
            idx.value = change["new"]

    for wd in (arm_a, arm_b, kind):
        wd.observe(refresh_list, names="value")
    for wd in (arm_a, arm_b, kind, idx):
        wd.observe(refresh_view, names="value")
    worst.observe(pick, names="value")
    refresh_list()
    refresh_view()
    return w.VBox([w.HBox([arm_a, arm_b]), w.HBox([kind, idx]), worst, view, listing])


# --------------------------------------------------------------------------------------------------
# A study's runs (reproduce.present.view_runs) drawn
# --------------------------------------------------------------------------------------------------
RULE = (
    "Images: the {n} test images whose top-{k} captions under the two arms have the fewest captions in "
    "common (ties: lower image index)."
)


def figure_disagreement(views: dict, n: int = 3, k: int = 5, **kw):
    """:func:`figure_qualitative` of the ``n`` images where the first two arms of ``views`` (from
    :func:`study_views`) disagree most in their top ``k`` (:func:`disagreement_rank`), with that rule
    stated in the caption. Returns ``(figure, picked image indices)``."""
    arms = list(views["sims"])
    pick = disagreement_rank(views["sims"][arms[0]], views["sims"][arms[1]], k, "image").head(n)["query"].tolist()
    fig = figure_qualitative(
        views["sims"],
        views["split"],
        pick,
        k=k,
        relevance=views["relevance"],
        human=views["human"],
        images_dir=views["images_dir"],
        rule=RULE.format(n=n, k=k),
        **kw,
    )
    return fig, pick


__all__ = [
    "arm_embeddings",
    "arm_rankings",
    "disagreement_rank",
    "disagreement_table",
    "explorer",
    "expert_scores",
    "figure_disagreement",
    "figure_qualitative",
    "image_path",
    "render_query_html",
    "similarity",
    "study_views",
    "top_k_indices",
    "top_k_table",
]

"""Planted inputs and fingerprints of four outputs of ``reproduce/``: the ledger (``ledger_rows.build_ledger``), the
claim rows of the ladder and Unified notebooks (``analyses.ladder_claims.claim_rows``,
``analyses.unified_claims.claim_rows`` / ``identity_claim_rows``) and the qualitative figure
(``qualitative.figure_qualitative``).

The inputs are built here from fixed random generators (no run, no cache, no committed result), wide enough to
reach every branch of those functions: declared primaries, legacy-matched primaries (one stated the other way
round), interval-only rows, identity and equivalence rows without a tolerance, collapsed arms (claim-file column
and mapping, predicted-to-fail arm included), null pairs, a data set outside the registry, two error cases.
:func:`fingerprints` gives one sha256 per output of a canonical text: floats at ``digits`` significant digits
(``None``: ``repr``, every bit). ``tests/reproduce/present/test_output_fingerprints.py`` compares them with
``tests/data/output_fingerprints.json``, recorded before the functions were split into named steps;
``benchmarks/check_output_identity.py`` prints the exact ones.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from PIL import Image  # noqa: E402

from coherent_itr.data.base import CaptionedImages  # noqa: E402
from reproduce.protocol import claim_rows, ledger_rows
from reproduce.present import page
from reproduce.present import qualitative  # noqa: E402
from reproduce.spec import claims as registry  # noqa: E402
from reproduce.present.analyses import ladder_claims, unified, unified_claims  # noqa: E402
from reproduce.protocol.claim_files import ClaimResult  # noqa: E402

SEEDS = (0, 1, 2)


# --- canonical text ----------------------------------------------------------------------------------------
def _num(x, digits):
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    return repr(x) if digits is None else format(x, f".{digits}g")


def canonical(obj, digits: int | None = 12):
    """``obj`` with every float as text (``digits`` significant digits; None: ``repr``), JSON-ready."""
    if isinstance(obj, pd.DataFrame):
        return {"columns": [str(c) for c in obj.columns], "rows": canonical(obj.to_dict("split")["data"], digits)}
    if isinstance(obj, pd.Series):
        return canonical(obj.tolist(), digits)
    if isinstance(obj, dict):
        return {str(k): canonical(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [canonical(v, digits) for v in obj]
    if isinstance(obj, np.ndarray):
        return canonical(obj.tolist(), digits)
    if isinstance(obj, (bool, np.bool_)) or obj is None:
        return None if obj is None else bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _num(obj, digits)
    return str(obj)


def digest(obj, digits: int | None = 12) -> str:
    text = json.dumps(canonical(obj, digits), ensure_ascii=False)  # keys in their order: a dict's order is output
    return hashlib.sha256(text.encode()).hexdigest()


# --- the ledger --------------------------------------------------------------------------------------------
def _arm_names(arm) -> list[str]:
    return list(arm) if isinstance(arm, tuple) else [arm]


def _metric_names(m) -> list[str]:
    return [str(x) for x in (m if isinstance(m, tuple) else (m,))]


def _planted_results(p, dataset: str, rng, n_seeds: int) -> pd.DataFrame:
    """Study.results-like rows (arm, seed, metric columns) for the arms and metrics of primary ``p``."""
    arms = list(dict.fromkeys(_arm_names(p.arm_a) + [a for b in _arm_names(p.arm_b) for a in _arm_names(b)]))
    cols = _metric_names(p.metric_for(dataset))
    if p.co_metric is not None:
        cols += _metric_names(p.co_metric_for(dataset))
    rows = []
    for k, arm in enumerate(arms):
        base = rng.normal(100.0 if "rsum" in cols else 0.5, 5.0) + 2.0 * (k == 0)
        for s in range(n_seeds):
            rows.append({"arm": arm, "seed": s, **{c: base + rng.normal(0.0, 1.5) for c in cols}})
    return pd.DataFrame(rows)


def _declared_primaries(rng) -> list[dict]:
    """``claim_rows.primary_row`` for every two-arm claim on the synthetic world and every other one on
    Flickr8k but B1 and X1 (the rest left to a legacy row or a placeholder); one with a per-query variance."""
    rows = []
    arm_claims = [c for c in registry.CLAIMS.values() if c.primary.measure == "arms"]
    for i, c in enumerate(arm_claims):
        for data in ("synthetic", "flickr8k"):
            if data == "flickr8k" and (i % 2 or c.id in ("B1", "X1")):
                continue
            df = _planted_results(c.primary, data, rng, 5 if i % 3 == 0 else 3)
            rows.append({**claim_rows.primary_row(c.id, data, df), "_file": f"{c.notebook}/claims_{data}.csv"})
    rows[0].update(query_var=0.75, test_images=1000)
    return rows


def _page_rows(paper: str, notebook: str, data: str, kwargs: list[dict]) -> list[dict]:
    pg = page.Page(paper, notebook, "default", data, study=None)
    for r in kwargs:
        pg.claim(**r)
    return [{**c.row(), "_file": f"{paper}/claims_{data}.csv"} for c in pg.claims]


def _row(cid, metric, arms, effects, data="synthetic", statement="s", kind="direction", notebook="01_bcls", **kw):
    """A claim-file row (``kind`` written after the notebook's preliminary verdict, which needs a tolerance)."""
    r = ClaimResult(cid, "BCLS", "T", statement, metric, data, arms, effects, notebook=notebook).row()
    return {**r, "kind": kind, "_file": f"{notebook}/claims_{data}.csv", **kw}


def _edge_rows(rng) -> list[dict]:
    """Rows for the branches the notebooks' rows leave out."""
    old = {  # an older claim file: interval only, no per-seed effects, stated the other way round
        "id": "X1",
        "paper": "Overview",
        "statement": "s",
        "metric": "rsum",
        "dataset": "flickr8k",
        "arms": "Triplet (all negatives) vs VSE++ (Triplet-HN)",
        "n_seeds": 3,
        "effect": -6.0,
        "ci_low": -9.5,
        "ci_high": -2.5,
        "kind": "direction",
        "notebook": "00_overview",
        "_file": "overview/claims_flickr8k.csv",
    }
    return [
        _row("B1", "rsum", "Triplet-SN vs Triplet-HN", list(rng.normal(8.0, 2.0, 3)), data="flickr8k"),
        _row("B1", "mean val_rsum, epochs 1..1", "Triplet-SN vs Triplet-HN", [300.0, 310.0, 320.0]),
        _row("B2", "rsum", "BCLS vs Triplet-SN", [1.0, -2.0, 0.5], role="exploratory"),
        _row("B2", "rsum", "BCLS − Triplet-SN", [1.0, 2.5, 0.5], collapsed="True", collapse_reason="gap 0.001"),
        _row("B3", "rsum", "BCLS − Triplet-HN", [4.0, 3.0], collapsed=True),
        _row("B3", "rsum", "a − b", [4.0]),
        _row("B4", "cs100_i2t_true", "a vs b", [0.01, 0.03, 0.02], kind="identity"),
        _row("B4", "rsum", "a vs b", [0.5, -0.5, 0.2], kind="equivalence"),
        {**_row("B4", "rsum", "a vs b", [0.5, -0.5, 0.1]), "kind": "equivalence", "tolerance": 3.0},
        _row("B4", "share of rows", "per batch", [0.5, -0.5, 0.1], kind="equivalence"),
        _row("B4", "rsum", "a vs b", [1e-12, 2e-12], kind="identity", tolerance=1e-10, test_images=500),
        _row("B5", "rsum", "a vs b", [2.0, 2.5, 1.5], kind="bigger"),
        {**_row("Z9", "rsum", "a vs b", [1.0, 2.0, 3.0], data="coco"), "paper": float("nan")},
        {**_row("B6", "rsum", "a vs b", [1.0, 2.0]), **dict.fromkeys(("paper", "notebook", "source"), float("nan"))},
        {**_row("Z9", "i2t_r1", "a vs b", [0.1, 0.2, 0.4], data="coco"), "note": "a note", "source": "Fig. 1"},
        old,
    ]


def ledger_inputs(seed: int = 0) -> list[dict]:
    """Claim-file rows (dicts with ``_file``) of every kind that
    :func:`reproduce.protocol.ledger_rows.build_ledger` reads."""
    rng = np.random.default_rng(seed)
    rows = _declared_primaries(rng)
    rows += _page_rows("ladder", "02_ladder", "synthetic", ladder_cases()["synthetic"])
    rows += _page_rows("ladder", "02_ladder", "flickr8k", ladder_cases()["flickr8k"])
    rows += _page_rows("unified", "05_unified", "synthetic", unified_cases()["warm-up 1 epoch"])
    return rows + _edge_rows(rng)


def _collapsed_mapping() -> dict:
    """Collapsed arms of three primaries: an arm the claim does not predict to fail, the arm it does, and one
    arm of a list."""
    out = {}
    for c in registry.CLAIMS.values():
        p = c.primary
        if p.measure != "arms":
            continue
        if p.predicted_to_fail:
            out[("synthetic", p.predicted_to_fail)] = "gap 0.0002 (predicted to fail)"
        elif c.id in ("B1", "L1"):
            out[("synthetic", _arm_names(p.arm_b)[0])] = f"gap 0.0003 ({c.id})"
        elif isinstance(p.arm_b, tuple) and len(out) < 6:
            out[("flickr8k", p.arm_b[-1])] = "gap 0.0004 (an arm of a list)"
    return out


def ledger_cases() -> dict:
    """The ledger of :func:`ledger_inputs` without and with collapsed arms, on the registry's data sets and on one
    more; and the messages of the two inputs it refuses."""
    rows = ledger_inputs()
    out = {
        "plain": ledger_rows.build_ledger(rows),
        "collapsed": ledger_rows.build_ledger(rows, collapsed=_collapsed_mapping()),
        "no collapse": ledger_rows.build_ledger(rows, collapsed={}),
        "datasets": ledger_rows.build_ledger(rows, datasets=("flickr8k", "coco")),
    }
    legacy = _row("B1", "rsum", "Triplet-SN vs Triplet-HN", [6.0, 5.5, 6.2])
    wrong = {**_row("B1", "other", "x vs y", [1.0, 2.0, 3.0]), "role": "primary"}
    for name, bad in (("two primaries", [legacy, legacy]), ("false primary", [wrong])):
        try:
            ledger_rows.build_ledger(bad)
            out[name] = "no error"
        except ValueError as e:
            out[name] = f"ValueError: {e}"
    return out


# --- the notebooks' claim rows -----------------------------------------------------------------------------
LADDER_METRICS = [f"cs{k}_{d}_{y}" for y in ("sbert", "true") for k in (100, 200, 1000) for d in ("i2t", "t2i")]
LADDER_METRICS += ["rsum", "i2t_map"]
LADDER_GROUPS = {
    "table1": ["VSE++", "Ladder (manual)", "Ladder (adaptive)"],
    "beta2": [f"{s} β₂={b:g}" for b in (0.0, 0.25, 0.5) for s in ("manual", "auto(2,2)")],
    "levels": ["L=1", "L=2", "L=3"],
    "lminmax": ["(1,1)", "(2,2)", "(3,3)", "(2,4)", "(2,5)"],
}


def _ladder_frames(rng, yard: str) -> dict:
    """Study.results per ladder group; ``yard``: "true" (cs…_true columns), "expert" (one expert column instead)
    or "" (no independent yardstick)."""
    out = {}
    for g, arms in LADDER_GROUPS.items():
        rows = [
            {"arm": a, "seed": s, **{m: rng.normal(50.0, 10.0) for m in LADDER_METRICS}} for a in arms for s in SEEDS
        ]
        df = pd.DataFrame(rows)
        if yard != "true":
            df = df.drop(columns=[m for m in LADDER_METRICS if m.endswith("_true")])
        if yard == "expert":
            df["expert_kendall_nongt"] = rng.normal(0.3, 0.05, len(df))
        out[g] = df
    return out


def _fig6(rng, n: int) -> dict:
    stats = pd.DataFrame({"overdispersion": rng.uniform(0.8, 1.8, n), "rows ≠ modal levels (%)": rng.uniform(0, 40, n)})
    return {"stats": stats, "batch_size": 128, "theta": 0.4}


def ladder_cases(seed: int = 1) -> dict:
    """``analyses.ladder_claims.claim_rows`` on the synthetic world (yardstick r*), on Flickr8k (expert rows) and
    without an independent yardstick."""
    rng = np.random.default_rng(seed)
    return {
        "synthetic": ladder_claims.claim_rows(
            _ladder_frames(rng, "true"), "true", "true relevance r*", "synthetic", _fig6(rng, 5)
        ),
        "flickr8k": ladder_claims.claim_rows(
            _ladder_frames(rng, "expert"), "expert", "Flickr8k expert judgements", "flickr8k", _fig6(rng, 4)
        ),
        "no yardstick": ladder_claims.claim_rows(_ladder_frames(rng, ""), "true", "r*", "synthetic", _fig6(rng, 3)),
    }


HIST_COLS = ["train_loss", "val_rsum", "val_pos_sim", "val_hardneg_sim", "pos_sim", "hardneg_sim"]
HIST_COLS += ["grad_anchor", "grad_hardneg", "grad_negatives"]


def _hist(rng, epochs: int, warm: int) -> pd.DataFrame:
    """Histories of the three Table 1 arms; Triplet-HN warms up for ``warm`` epochs; Unified seed 2 stops early."""
    rows = []
    for arm in unified.ARMS:
        for s in SEEDS:
            for e in range(1, epochs + 1):
                if arm == "Unified" and s == 2 and e == epochs:
                    continue
                vals = {c: abs(rng.normal(0.5 + 0.1 * e, 0.1)) for c in HIST_COLS}
                rows.append({"arm": arm, "seed": s, "epoch": e, "warmup": arm == "Triplet-HN" and e <= warm, **vals})
    return pd.DataFrame(rows)


def _unified_results(rng, gammas: bool) -> pd.DataFrame:
    arms = [("table1", a) for a in unified.ARMS] + [("margin", f"m={m:g}") for m in (0.0, 0.1, 0.2, 0.4)]
    if gammas:
        arms += [("gamma", a) for a in ("γ=20", "γ=60", "γ=100", unified.INF)]
    rows = [
        {"group": g, "arm": a, "seed": s, "rsum": rng.normal(200.0, 8.0), "collapsed": False}
        for g, a in arms
        for s in SEEDS
    ]
    return pd.DataFrame(rows)


def _ident(rng) -> pd.DataFrame:
    """An identity frame like ``unified.identity_frame``'s: every identity, a gap crossing its bound once."""
    rows = []
    uid = "Unified(m=0.2, γ) → Triplet-HN"
    for seed in range(3):
        gaps = sorted(rng.uniform(-0.002, 0.6, len(unified.ID_GAMMAS)), reverse=seed != 1)
        for gamma, gap in zip(unified.ID_GAMMAS, gaps):
            rows.append(
                dict(identity=uid, gamma=gamma, seed=seed, gap=gap, bound=0.5, value_dev=gap / 10, grad_dev=0.0)
            )
            rows.append(
                dict(
                    identity="Triplet-SN(γ) → Triplet-HN",
                    gamma=gamma,
                    seed=seed,
                    gap=rng.uniform(0, 0.02),
                    bound=0.015,
                    value_dev=rng.uniform(0, 1e-5),
                    grad_dev=0.0,
                )
            )
        for gamma in (10.0, 60.0, 100.0):
            rows.append(
                dict(
                    identity="γ·Unified(m=0) = VLC",
                    gamma=gamma,
                    seed=seed,
                    gap=0.0,
                    value_dev=seed * 1e-15,
                    grad_dev=2e-15,
                )
            )
        for name in ("Kendall j=i slice (continuous r) = Triplet(all neg., m=0)", "Kendall (binary r) = Triplet"):
            rows.append(dict(identity=name, seed=seed, gap=0.0, value_dev=rng.uniform(0, 1e-15), grad_dev=1e-16))
        for name in ("Ladder(β₂=0, HC) = Triplet-HN", "Ladder(β₂=0, all) = Triplet"):
            rows.append(
                dict(identity=name, seed=seed, gap=0.0, value_dev=0.0, grad_dev=0.0, control_dev=rng.uniform(0.1, 1))
            )
    return pd.DataFrame(rows)


def unified_cases(seed: int = 2) -> dict:
    """``analyses.unified_claims.claim_rows`` with a one-epoch warm-up, with a warm-up as long as training (the curve
    primaries not testable) and no scale sweep; and ``identity_claim_rows`` alone."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, epochs, warm, gammas in (("warm-up 1 epoch", 4, 1, True), ("warm-up all epochs", 3, 3, False)):
        df = _unified_results(rng, gammas)
        t1 = df[df.group == "table1"]
        hist = _hist(rng, epochs, warm)
        out[name] = unified_claims.claim_rows(
            hist, t1, unified.margin_sweep(df), unified.gamma_sweep(df), _ident(rng), 60.0 if gammas else 40.0
        )
    out["identity rows"] = unified_claims.identity_claim_rows(_ident(rng))
    return out


# --- the qualitative figure --------------------------------------------------------------------------------
def _artist(a) -> dict:
    d = {"type": type(a).__name__, "visible": a.get_visible()}
    if hasattr(a, "get_text"):
        d.update(
            text=a.get_text(),
            position=list(a.get_position()),
            fontsize=a.get_fontsize(),
            ha=a.get_ha(),
            va=a.get_va(),
            color=list(to_rgba(a.get_color())),
            linespacing=a.get_linespacing(),
        )
    if hasattr(a, "get_facecolor") and hasattr(a, "get_xy"):
        d.update(facecolor=list(to_rgba(a.get_facecolor())), xy=list(np.ravel(a.get_xy())))
        if hasattr(a, "get_width"):
            d.update(width=a.get_width(), height=a.get_height(), clip_on=a.get_clip_on())
    if hasattr(a, "get_array") and hasattr(a, "get_extent"):
        arr = np.asarray(a.get_array())
        d.update(shape=list(arr.shape), sha256=hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest())
    return d


def figure_structure(fig) -> dict:
    """What a figure draws, renderer-free: size, every axes (position, title, limits, axis on/off) with its
    texts, patches and images, and the figure's own texts."""
    axes = []
    for ax in fig.axes:
        axes.append(
            {
                "position": list(ax.get_position().bounds),
                "title": ax.get_title(),
                "title_fontsize": ax.title.get_fontsize(),
                "title_weight": str(ax.title.get_fontweight()),
                "xlim": list(ax.get_xlim()),
                "ylim": list(ax.get_ylim()),
                "axison": ax.axison,
                "xlabel": ax.get_xlabel(),
                "texts": [_artist(t) for t in ax.texts],
                "patches": [_artist(p) for p in ax.patches],
                "images": [_artist(i) for i in ax.images],
                "collections": len(ax.collections),
            }
        )
    return {"size": list(fig.get_size_inches()), "axes": axes, "texts": [_artist(t) for t in fig.texts]}


def _split(n_img=6, cpi=5, seed=3) -> CaptionedImages:
    rng = np.random.default_rng(seed)
    caps = [
        f"caption {k} of image {k // cpi}: " + " ".join(["word"] * int(rng.integers(2, 20))) for k in range(n_img * cpi)
    ]
    return CaptionedImages(
        "toy/test", rng.normal(size=(n_img, 4)).astype(np.float32), caps, [f"img{i}.png" for i in range(n_img)], cpi
    )


def qualitative_cases(seed: int = 4) -> dict:
    """``qualitative.figure_qualitative`` with photos (one missing), two relevances, expert scores, a rule;
    and without photos or experts, coloured by a signed relevance — the figures as
    :func:`figure_structure` and as Agg-rendered pixels."""
    rng = np.random.default_rng(seed)
    split = _split()
    sims = {a: rng.normal(size=(6, 30)) for a in ("VSE++", "BCLS", "Ladder")}
    rel = {"sbert": rng.uniform(size=(6, 30)), "true": rng.uniform(size=(6, 30))}
    human = pd.DataFrame({"image_idx": [0, 1, 2], "caption_idx": [0, 7, 11], "score": [3.0, 1.5, 2.25]})
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(6):
            arr = np.zeros((60, 80, 3), dtype=np.uint8)
            arr[..., i % 3] = 40 * i
            arr[: 10 * i, :, (i + 1) % 3] = 200
            Image.fromarray(arr).save(Path(tmp) / f"img{i}.png")
        (Path(tmp) / "img5.png").unlink()
        photos = dict(relevance=rel, colour_by="true", human=human, images_dir=tmp, rule="Images: smallest overlap.")
        no_photos = dict(relevance={"cider": rng.uniform(-1, 1, size=(6, 30))}, k=3, wrap=30)
        calls = {
            "photos": dict(sims=sims, split=split, image_idx=[0, 2, 5], **photos),
            "no photos": dict(
                sims={"A": sims["VSE++"], "B": sims["BCLS"]}, split=split, image_idx=np.array([4, 1]), **no_photos
            ),
        }
        for name, kw in calls.items():
            fig = qualitative.figure_qualitative(**kw)
            fig.canvas.draw()
            out[name] = figure_structure(fig)
            out[f"{name} (pixels)"] = hashlib.sha256(bytes(fig.canvas.buffer_rgba())).hexdigest()
            plt.close(fig)
    for name, kw in (("no relevance", {}), ("unknown colour", dict(relevance=rel, colour_by="cider"))):
        try:
            plt.close(qualitative.figure_qualitative(sims, split, [0], **kw))
            out[name] = "no error"
        except ValueError as e:
            out[name] = f"ValueError: {e}"
    return out


# --- fingerprints ------------------------------------------------------------------------------------------
def outputs() -> dict:
    """Every output, by name."""
    out = {f"ledger: {k}": v for k, v in ledger_cases().items()}
    out |= {f"ladder_claims.claim_rows: {k}": v for k, v in ladder_cases().items()}
    out |= {f"unified: {k}": v for k, v in unified_cases().items()}
    out |= {f"figure_qualitative: {k}": v for k, v in qualitative_cases().items()}
    return out


def fingerprints(digits: int | None = 12, pixels: bool = False) -> dict:
    """sha256 of every output's canonical text (see :func:`canonical`); the rendered pixels only with ``pixels``
    (they depend on the fonts and the FreeType of the machine)."""
    return {k: digest(v, digits) for k, v in outputs().items() if pixels or not k.endswith("(pixels)")}


def record(path: Path = Path(__file__).parent / "data" / "output_fingerprints.json", commit: str = "") -> None:
    """Write the fingerprints (12 significant digits) that
    ``tests/reproduce/present/test_output_fingerprints.py`` checks."""
    data = {"recorded_at": commit, "digits": 12, "fingerprints": fingerprints(12)}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    import subprocess

    record(
        commit=subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    )

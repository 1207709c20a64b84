"""Relevance statistics that set or explain loss hyper-parameters (issue 14 items 5 and 6).

**Ladder θ calibrated to the relevance model in use** (CVSE++, Ladder paper Secs. IV-A, V-B). θ₁ = 0.40
was set for the paper's Sentence-BERT; this study's MiniLM gives other cosines. The paper ties the
number of ladders to the *scope of interest* N: "with a small scope-of-interest, e.g. top-100, only a
few ladders are required, e.g. L = 2 … the low-level ladder is responsible for the ranking order of
the very top candidates, e.g. top-1 ~ top-100; the high-level ladder … top-100 ~ top-200" (Sec. V-B),
and measures it with CS@100 / CS@200 on the COCO 1K test: 1,000 images × 5 captions = 5,000
candidates per image query, 5 of them ground truth. Level 1 (rel ≥ θ₁) is then the ≈ 100 − 5 = 95
most relevant of the 4,995 non-GT candidates, level 2 (θ₂ ≤ rel < θ₁, L = 3) the next 100:

    share(rel ≥ θ₁) = 95 / 4995 ≈ 1.9 %,    share(rel ≥ θ₂) = 195 / 4995 ≈ 3.9 %

so θ₁ (θ₂) is the 1 − 1.9 % (1 − 3.9 %) quantile of the off-diagonal relevance the loss sees in its
training batches. This is a derivation from the paper's text, not a fit to any result; it assumes the
paper's θ put its level 1 where its scope of interest is (the paper never states the share directly).
:func:`theta_table` shows the relevance distribution against θ (share of pairs above, rows with an
empty level 1) for the notebook.

**SAM margins** (SAM Eq. 7): α = (φ(G_p, c⁺) − φ(G_p, c⁻)) / τ. With φ = CIDEr-D and the candidate
among the references, φ(positive) ≥ 2, so many margins exceed the code's clamp at 1;
:func:`margin_distribution` measures it on real batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

# scope of interest (CVSE++ Sec. V-B) on the COCO 1K test: 5,000 candidates, 5 GT → level shares
COCO1K_CANDIDATES, COCO1K_GT = 5000, 5
SCOPE_SHARES = (
    (100 - COCO1K_GT) / (COCO1K_CANDIDATES - COCO1K_GT),
    (200 - COCO1K_GT) / (COCO1K_CANDIDATES - COCO1K_GT),
)
PAPER_THETAS = (0.40, 0.35)  # Ladder paper Sec. IV-A (θ₁, Sentence-BERT) and Sec. V-B (θ₂)


def training_batches(
    n_images: int, captions_per_image: int, batch_size: int = 128, n_batches: int = 50, seed: int = 0
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(image_idx, caption_idx) of ``n_batches`` random batches drawn as the training loop draws them with
    ``sampling="captions"`` (a random permutation of every caption, cut into batches)."""
    if n_images < 1 or captions_per_image < 1 or batch_size < 2 or n_batches < 1:
        raise ValueError(
            f"training_batches: need n_images, captions_per_image, n_batches ≥ 1 and batch_size ≥ 2, "
            f"got {n_images}, {captions_per_image}, {n_batches}, {batch_size}"
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(n_images * captions_per_image)
    n = min(n_batches, len(order) // batch_size)
    for b in range(n):
        cap = order[b * batch_size : (b + 1) * batch_size]
        yield cap // captions_per_image, cap


def off_diagonal(matrices: Iterable[np.ndarray]) -> np.ndarray:
    """Every off-diagonal entry of square batch matrices, concatenated (float64)."""
    out = []
    for m in matrices:
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError(f"off_diagonal: expected square matrices, got shape {m.shape}")
        out.append(m[~np.eye(m.shape[0], dtype=bool)])
    if not out:
        raise ValueError("off_diagonal: no matrices given")
    return np.concatenate(out)


def calibrated_theta(values: np.ndarray, share: float) -> float:
    """θ such that a fraction ``share`` of ``values`` is ≥ θ: the (1 − share) quantile (numpy "higher"
    method, so θ is an observed value and ``mean(values ≥ θ) ≥ share``)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0 or not np.isfinite(values).all():
        raise ValueError(f"calibrated_theta: values must be non-empty and finite (got {values.size} values)")
    if not 0 < share < 1:
        raise ValueError(f"calibrated_theta: share must be in (0, 1), got {share!r}")
    return float(np.quantile(values, 1.0 - share, method="higher"))


def calibrated_thetas(matrices: Iterable[np.ndarray], shares=SCOPE_SHARES) -> tuple[float, ...]:
    """(θ₁, θ₂, …) at the scope-of-interest shares (see the module docstring) for batch relevance matrices."""
    values = off_diagonal(matrices)
    return tuple(calibrated_theta(values, s) for s in shares)


def theta_table(matrices: list[np.ndarray], thetas) -> pd.DataFrame:
    """For every θ: the share of off-diagonal pairs with rel ≥ θ and the share of batch rows (queries) whose
    level 1 is empty (no non-positive candidate reaches θ — the ladder then degenerates to the triplet)."""
    mats = [np.asarray(m, dtype=np.float64) for m in matrices]
    values = off_diagonal(mats)
    rows = []
    for t in thetas:
        empty = np.concatenate([~((m >= t) & ~np.eye(m.shape[0], dtype=bool)).any(axis=1) for m in mats])
        rows.append(
            {
                "theta": float(t),
                "share_pairs_at_or_above": float((values >= t).mean()),
                "share_rows_empty_level1": float(empty.mean()),
            }
        )
    return pd.DataFrame(rows)


def relevance_batches(provider, n_images: int, captions_per_image: int, **kw) -> list[np.ndarray]:
    """The relevance matrices a loss sees on random training batches (``provider.batch``)."""
    return [np.asarray(provider.batch(i, c)) for i, c in training_batches(n_images, captions_per_image, **kw)]


def margin_distribution(phi_matrices: Iterable[np.ndarray], tau: float) -> dict:
    """SAM margins α = (φ_pp − φ_pj) / τ over every off-diagonal pair j of each batch (the distribution a
    uniformly random negative draws from; SAM Eq. 7, i2t direction, ``phi[p, j] = φ(G_p, c_j)``):
    median, mean, quartiles, share > 1 (the authors' clamp bites), share < 0, and the count."""
    if not tau > 0:
        raise ValueError(f"margin_distribution: tau must be > 0, got {tau!r}")
    alphas = []
    for m in phi_matrices:
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError(f"margin_distribution: expected square φ matrices, got shape {m.shape}")
        a = (np.diag(m)[:, None] - m) / tau
        alphas.append(a[~np.eye(m.shape[0], dtype=bool)])
    if not alphas:
        raise ValueError("margin_distribution: no matrices given")
    a = np.concatenate(alphas)
    return {
        "tau": float(tau),
        "n": int(a.size),
        "median": float(np.median(a)),
        "mean": float(a.mean()),
        "q25": float(np.quantile(a, 0.25)),
        "q75": float(np.quantile(a, 0.75)),
        "share_above_1": float((a > 1).mean()),
        "share_below_0": float((a < 0).mean()),
    }


def _captions_only_train(data: str, n_images: int | None = 1500, seed: int = 0):
    """Flickr8k's training captions without image features (relevance needs captions only; the features
    take minutes to extract cold) — of a random ``n_images`` subset (None: all 6,000): random batch pairs
    of a random subset have the distribution of random pairs of the whole split (a same-image pair in a
    batch is 4 / 7,499 vs 4 / 29,999 likely — both negligible), at a quarter of the Sentence-BERT cost."""
    from coherent_itr.data.base import CaptionedImages
    from coherent_itr.data.flickr8k import flickr8k_index

    names, caps = flickr8k_index()["train"]
    cpi = len(caps) // len(names)
    keep = (
        np.arange(len(names))
        if n_images is None
        else np.sort(np.random.default_rng(seed).choice(len(names), min(n_images, len(names)), replace=False))
    )
    return CaptionedImages(
        f"{data}/train (captions only, {len(keep)} images)",
        np.zeros((len(keep), 1), np.float32),
        [caps[i * cpi + k] for i in keep for k in range(cpi)],
        [names[i] for i in keep],
        captions_per_image=cpi,
    )


def measure(
    data: str = "synthetic", data_scale: str = "default", n_batches: int = 50, batch_size: int = 128, seed: int = 0
) -> dict:
    """θ calibration (Sentence-BERT, paired cosine) and SAM margins (CIDEr-D, candidate included) on
    ``n_batches`` random training batches of ``data``; what the ladder / SAM notebooks show."""
    from coherent_itr import data as data_mod

    tr = _captions_only_train(data) if data == "flickr8k" else data_mod.load_splits(data, scale=data_scale).train
    sb = data_mod.relevance_provider("sbert", tr, mode="paired", scale="cosine")
    rel = relevance_batches(
        sb, tr.n_images, tr.captions_per_image, batch_size=batch_size, n_batches=n_batches, seed=seed
    )
    thetas = calibrated_thetas(rel)
    table = theta_table(rel, sorted({*PAPER_THETAS, *thetas}))
    ci = data_mod.relevance_provider("cider", tr, include_candidate=True)
    phi = relevance_batches(
        ci, tr.n_images, tr.captions_per_image, batch_size=batch_size, n_batches=n_batches, seed=seed
    )
    return {
        "data": data,
        "thetas": thetas,
        "shares": SCOPE_SHARES,
        "theta_table": table,
        "sam_margins": {t: margin_distribution(phi, t) for t in (3.0, 5.0, 10.0)},
    }


if __name__ == "__main__":
    import sys

    d = sys.argv[1] if len(sys.argv) > 1 else "synthetic"
    r = measure(d)
    print(d, "calibrated thetas", r["thetas"])
    print(r["theta_table"].to_string())
    for t, m in r["sam_margins"].items():
        print("SAM", t, m)

"""Seeded evaluation problems whose outputs ``tests/lib/metrics/test_metrics_pinned.py`` pins bit for bit.

Every yardstick kind of the study (two pseudo-label matrices, true relevance with its positive set,
expert and crowd judgements, an extra positive set), folds, float32 ties, the authors' CS candidates,
τ-b, the scipy Kendall backend, chunking, and every public single-metric function.

``python tests/pinned_evaluate.py`` rewrites the pinned values, ``tests/data/pinned_values.json`` (only
when a metric is *meant* to change; the values in the repository came from the code before the
metric registry, commit 810033d).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from coherent_itr import metrics


def problem(seed: int, n_img: int = 12, cpi: int = 5, float32: bool = False):
    rng = np.random.default_rng(seed)
    n_cap = n_img * cpi
    img = np.arange(n_cap) // cpi
    z = rng.normal(size=(n_img, 6))
    cap = z[img] + 0.7 * rng.normal(size=(n_cap, 6))
    sim = (z + 0.3 * rng.normal(size=z.shape)) @ cap.T / 6
    rel = {
        "sbert": np.clip((np.tanh(z @ cap.T / 6) + 1) / 2 + 0.05 * rng.normal(size=sim.shape), 0, 1),
        "cider": rng.uniform(size=sim.shape) * (rng.uniform(size=sim.shape) < 0.4),
    }
    true = np.round(np.clip((np.tanh(z @ z[img].T / 6) + 1) / 2, 0, 1) * 4) / 4  # discrete: ties

    def judged(scores):
        k = len(scores)
        return pd.DataFrame(
            {"image_idx": rng.integers(0, n_img, k), "caption_idx": rng.integers(0, n_cap, k), "score": scores}
        )

    human = {"expert": judged(rng.integers(1, 5, 80).astype(float)), "crowd": judged(rng.uniform(size=60))}
    extra = rng.random(sim.shape) < 0.1
    if float32:
        sim, true = (np.round(a, 2).astype(np.float32) for a in (sim, true))
        rel = {k: np.round(v, 2).astype(np.float32) for k, v in rel.items()}
    return sim, img, rel, true, human, extra


def scenarios() -> dict[str, dict[str, float]]:
    out = {}
    sim, img, rel, true, human, extra = problem(0)
    study = dict(rel=rel, true_rel=true, human=human, true_positive_threshold=0.8)
    out["study"] = metrics.evaluate(sim, img, **study)
    out["study_extra_positives"] = metrics.evaluate(sim, img, positives={"extra": extra}, **study)
    s2 = problem(1, n_img=14)
    out["study_folds"] = metrics.evaluate(
        s2[0], s2[1], rel=s2[2], true_rel=s2[3], human=s2[4], true_positive_threshold=0.75, fold_size=6
    )
    sim, img, rel, true, human, extra = problem(2, float32=True)
    out["float32_variants"] = metrics.evaluate(
        sim,
        img,
        rel=rel["sbert"],
        true_rel=true,
        human=human["expert"],
        positives={"extra": (extra, None)},
        ks=(1, 3),
        cs_ks=(4, 30),
        cs_candidates="one_per_image",
        tau_variant="b",
        ndcg_ks=(5, None),
        ncs_ks=(2, 7),
        sr_ks=(3, 6),
        sr_ms=(2, 9),
        true_positive_threshold=0.75,
        human_positives_include_gt=True,
        chunk=7,
        kendall_backend="scipy",
    )
    out["minimal"] = metrics.evaluate(sim, img)
    out["no_tau_no_cs"] = metrics.evaluate(sim, img, rel, cs_ks=(), tau_variant=None, ndcg_ks=(), ncs_ks=(), sr_ks=())
    sim, img, rel, true, human, extra = problem(3)
    r = rel["sbert"]
    single = {}
    single.update({f"cs_all:{k}": v for k, v in metrics.coherent_score(sim, img, r, ks=(5, 20)).items()})
    single.update(
        {f"cs_one:{k}": v for k, v in metrics.coherent_score(sim, img, r, ks=(5,), candidates="one_per_image").items()}
    )
    for variant in ("a", "b"):
        single.update({f"tau_{variant}:{k}": v for k, v in metrics.kendall_tau(sim, img, true, variant).items()})
    single.update({f"ndcg:{k}": v for k, v in metrics.ndcg(sim, img, r, ks=(3, None), directions=("t2i",)).items()})
    for remove in (False, True):
        for ideal in (False, True):
            res = metrics.ncs(sim, img, true, ks=(1, 4), remove_gt=remove, restrict_to_ideal=ideal, chunk=5)
            single.update({f"ncs_{remove}_{ideal}:{k}": v for k, v in res.items()})
    for remove in (False, True):
        res = metrics.semantic_recall(sim, img, true, ks=(2, 5), ms=(3, 8), remove_gt=remove)
        single.update({f"sr_{remove}:{k}": v for k, v in res.items()})
    pos = true >= 0.75
    res = metrics.positive_set_metrics(sim, img, pos, positives_t2i=extra, with_ap=True)
    single.update({f"pos:{k}": v for k, v in res.items()})
    single["i2t_map"] = metrics.i2t_map(sim, img)
    out["single_functions"] = single
    return out


if __name__ == "__main__":
    import json
    import subprocess
    from pathlib import Path

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    about = (
        f"Outputs of tests/pinned_evaluate.scenarios() computed by the code of commit {commit} "
        "(python tests/pinned_evaluate.py); float reprs round-trip exactly."
    )
    pinned = {name: {k: float(v) for k, v in rec.items()} for name, rec in scenarios().items()}
    out = Path(__file__).parent / "data" / "pinned_values.json"
    out.write_text(json.dumps({"about": about, "pinned": pinned}, indent=1) + "\n")

"""Every training run the study needs, per paper, as named arms (claims.md ids in comments).

An :class:`Arm` is a named set of :class:`~coherent_itr.config.Config` overrides; a profile adds
data, model size, epochs and seeds. Two notebooks asking for the same arm (or two arms with the
same settings) share one run: :func:`plan` deduplicates by config.

Pseudo labels per family follow the papers: Sentence-BERT cosine in [−1, 1] of the paired
caption for BCLS and the ladder; its (1 + s)/2 mapping for the listwise loss; CIDEr-D against the
anchor image's 5 references (candidate included, as the SAM code) for SAM.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from coherent_itr import losses
from coherent_itr.config import Config

from .profiles import Profile

SBERT = dict(relevance="sbert", relevance_params={"mode": "paired", "scale": "cosine"})
SBERT_UNIT = dict(relevance="sbert", relevance_params={"mode": "paired", "scale": "unit"})
CIDER = dict(relevance="cider", relevance_params={"include_candidate": True})
GAMMA = 60.0  # Unified paper: γ = 50–60; its sweeps (Fig. 5a) use 60
# groups of arms that sweep a parameter around a paper's default (a profile may give them fewer seeds)
SWEEP_GROUPS = frozenset({"alpha", "beta", "beta2", "levels", "lminmax", "grid", "tau", "margin", "gamma"})


@dataclass(frozen=True)
class Arm:
    paper: str
    group: str
    name: str
    overrides: dict = field(default_factory=dict)

    def configs(self, profile: Profile) -> list[Config]:
        """One config per seed of the profile (``profile.sweep_seeds`` for a sweep group when set). A
        loss with its own ``seed`` parameter (SAM's random sampler) gets the run's seed, so seeds
        differ in its sampling too."""
        base = dict(data=profile.data, data_scale=profile.data_scale, **profile.model)
        seeds = profile.sweep_seeds if (self.group in SWEEP_GROUPS and profile.sweep_seeds) else profile.seeds
        out = []
        for s in seeds:
            cfg = {**base, **self.overrides, "seed": s}
            if "seed" in losses.parameters(cfg["loss"]):
                cfg["loss_params"] = {**cfg.get("loss_params", {}), "seed": s}
            out.append(Config(**cfg))
        return out


def _arm(paper, group, name, loss, params=None, **extra) -> Arm:
    return Arm(paper, group, name, dict(loss=loss, loss_params=params or {}, **extra))


# --- the shared arms of the fair comparison (X1) ------------------------------------------------
def overview_arms() -> list[Arm]:
    p = "overview"
    return [
        _arm(p, "x1", "VSE++ (Triplet-HN)", "triplet"),
        _arm(p, "x1", "Triplet (all negatives)", "triplet", {"max_violation": False}),
        _arm(p, "x1", "Triplet-SN", "triplet_sn"),
        _arm(p, "x1", "VLC (InfoNCE)", "vlc", {"gamma": GAMMA}),
        _arm(p, "x1", "Unified", "unified", {"margin": 0.2, "gamma": GAMMA}),
        _arm(p, "x1", "BCLS (Triplet-SN + Kendall SW-HS)", "bcls", **SBERT),
        _arm(p, "x1", "Ladder (manual, L=2)", "ladder", **SBERT),
        _arm(p, "x1", "Ladder (adaptive 2–4)", "adaptive_ladder", **SBERT),
        _arm(p, "x1", "Triplet-HN + SAM (SN, τ=3)", "sam", {"tau": 3.0, "sampling": "SN", "keep_triplet": True},
             **CIDER),
        _arm(p, "x1", "Triplet + S-NDCG (listwise)", "listwise", **SBERT_UNIT),
    ]


def bcls_arms(profile: Profile) -> list[Arm]:
    p = "bcls"
    arms = [
        _arm(p, "table8", "Triplet-HN", "triplet"),
        _arm(p, "table8", "Kendall SW-HS alone", "kendall_sw_hs", **SBERT),
        _arm(p, "table8", "Triplet-SN", "triplet_sn"),
        _arm(p, "table8", "BCLS", "bcls", **SBERT),
    ]
    for a in profile.thin((0.0, 0.1, 0.2, 0.3, 0.4), keep=(0.2,)):
        # the paper default (α=0.2, β=0.1) is the BCLS arm itself: same config, one shared run
        arms.append(_arm(p, "alpha", f"α={a:g}", "bcls", {"kendall_params": {"alpha": a}} if a != 0.2 else {},
                         **SBERT))
    for b in profile.thin((0.05, 0.1, 0.2, 0.4), keep=(0.1,)):
        arms.append(_arm(p, "beta", f"β={b:g}", "bcls", {"kendall_params": {"beta": b}} if b != 0.1 else {},
                         **SBERT))
    arms.append(_arm(p, "beta", "w/o SW-HS (full Kendall)", "bcls", {"kendall": "kendall"}, **SBERT))
    return arms


def ladder_arms(profile: Profile) -> list[Arm]:
    p = "ladder"
    arms = [
        _arm(p, "table1", "VSE++", "triplet"),
        _arm(p, "table1", "Ladder (manual)", "ladder", **SBERT),
        _arm(p, "table1", "Ladder (adaptive)", "adaptive_ladder", **SBERT),
    ]
    for b2 in (0.0, 0.25, 0.5):
        arms.append(_arm(p, "beta2", f"manual β₂={b2:g}", "ladder", {"beta": [1.0, b2]}, **SBERT))
        arms.append(_arm(p, "beta2", f"auto(2,2) β₂={b2:g}", "adaptive_ladder",
                         {"l_min": 2, "l_max": 2, "beta": [1.0, b2]}, **SBERT))
    arms += [
        _arm(p, "levels", "L=1", "triplet"),
        _arm(p, "levels", "L=2", "ladder", {"thresholds": [0.40]}, **SBERT),
        _arm(p, "levels", "L=3", "ladder", {"thresholds": [0.40, 0.35], "alpha": [0.2, 0.01, 0.01],
                                            "beta": [1.0, 0.25, 0.125]}, **SBERT),
    ]
    # Table VIII/IX order; thinned: its ends (1,1) and (2,5), the paper default (2,4) and (2,2)
    for lo, hi in profile.thin(((1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (2, 3), (2, 4), (2, 5)),
                               keep=((2, 2), (2, 4))):
        arms.append(_arm(p, "lminmax", f"({lo},{hi})", "adaptive_ladder", {"l_min": lo, "l_max": hi}, **SBERT))
    return arms


def sam_arms(profile: Profile) -> list[Arm]:
    p = "sam"
    arms = []
    for frac in (0.1, 0.25, 1.0):
        arms.append(_arm(p, "fraction", f"{frac:.0%} data, Triplet-HN", "triplet", train_fraction=frac))
        arms.append(_arm(p, "fraction", f"{frac:.0%} data, + SAM", "sam",
                         {"tau": 3.0, "sampling": "SN", "keep_triplet": True}, train_fraction=frac, **CIDER))
    for tau in profile.thin((3.0, 5.0, 10.0), keep=(3.0,)):
        for sampling in ("RS", "HN", "SN"):
            for keep in (True, False):
                arms.append(_arm(p, "grid", f"τ={tau:g} {sampling} keep={keep}", "sam",
                                 {"tau": tau, "sampling": sampling, "keep_triplet": keep}, **CIDER))
    return arms


def listwise_arms(profile: Profile) -> list[Arm]:
    p = "listwise"
    arms = [
        _arm(p, "table5", "Triplet (mean)", "triplet", {"reduction": "mean"}),
        _arm(p, "table5", "S-NDCG alone", "sndcg", **SBERT_UNIT),
        _arm(p, "table5", "Triplet + S-NDCG", "listwise", **SBERT_UNIT),
    ]
    for tau in profile.thin((1e-1, 1e-2, 1e-3, 1e-4), keep=(1e-2,)):
        arms.append(_arm(p, "tau", f"τ={tau:g}", "listwise", {"sndcg_params": {"tau": tau}}, **SBERT_UNIT))
    return arms


def unified_arms(profile: Profile) -> list[Arm]:
    p = "unified"
    arms = [
        _arm(p, "table1", "Triplet-HN", "triplet"),
        _arm(p, "table1", "VLC", "vlc", {"gamma": GAMMA}),
        _arm(p, "table1", "Unified", "unified", {"margin": 0.2, "gamma": GAMMA}),
    ]
    for m in profile.thin((0.0, 0.1, 0.2, 0.3, 0.4), keep=(0.2,)):
        arms.append(_arm(p, "margin", f"m={m:g}", "unified", {"margin": m, "gamma": GAMMA}))
    for g in profile.thin((20.0, 40.0, 60.0, 80.0, 100.0), keep=(GAMMA,)):
        arms.append(_arm(p, "gamma", f"γ={g:g}", "unified", {"margin": 0.2, "gamma": g}))
    arms.append(_arm(p, "gamma", "γ=∞ (Triplet-HN)", "triplet"))
    return arms


PAPERS = {
    "overview": lambda profile: overview_arms(),
    "bcls": bcls_arms,
    "ladder": ladder_arms,
    "sam": sam_arms,
    "listwise": listwise_arms,
    "unified": unified_arms,
}


def arms(paper: str, profile: Profile) -> list[Arm]:
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; choose one of {sorted(PAPERS)}")
    return PAPERS[paper](profile)


def plan(profile: Profile, papers=None) -> list[Config]:
    """Every config the profile needs, deduplicated (two arms with equal settings share one run)."""
    seen: dict[str, Config] = {}
    for paper in papers or PAPERS:
        for arm in arms(paper, profile):
            for cfg in arm.configs(profile):
                seen.setdefault(cfg.key(), cfg)
    return list(seen.values())

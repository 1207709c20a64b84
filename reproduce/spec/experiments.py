"""Every training run the study needs, per paper, as named arms (claims.md ids in comments).

An :class:`Arm` is a named set of :class:`~coherent_itr.config.Config` overrides; a profile adds
data, model size, epochs and seeds. Two notebooks asking for the same arm (or two arms with the
same settings) share one run: :func:`plan` deduplicates by config.

Each paper's *main comparison* (:data:`MAIN_GROUPS`) is tuned on the validation split
(:mod:`reproduce.protocol.tuning`); every other arm uses its family's tuned lr / warm-up. Arms added for the fair
protocol: VSE++ with and without warm-up (overview "warmup"), SAM as written (``sam``) and as
coded (``sam_authors``) for S1–S3, the ladder at θ calibrated to the relevance model beside the literal
θ = 0.40 (``ladder_calibrated_arms``), S1's reduced-data arms at the full-data arm's number of updates,
and ≥ 4 points for every trend/peak sweep.

Pseudo labels per family follow the papers: Sentence-BERT cosine in [−1, 1] of the paired
caption for BCLS and the ladder; its (1 + s)/2 mapping for the listwise loss; CIDEr-D against the
anchor image's 5 references (candidate included, as the SAM code) for SAM.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field, fields

from coherent_itr import losses
from coherent_itr.config import Config
from coherent_itr.registry import Registry

from reproduce.spec import power_seeds
from reproduce.spec import profiles as profile_mod
from reproduce.spec.claim_data import primary_arm_groups, primary_arm_names
from reproduce.spec.profiles import Profile

SBERT = dict(relevance="sbert", relevance_params={"mode": "paired", "scale": "cosine"})
SBERT_UNIT = dict(relevance="sbert", relevance_params={"mode": "paired", "scale": "unit"})
CIDER = dict(relevance="cider", relevance_params={"include_candidate": True})
GAMMA = 60.0  # Unified paper: γ = 50–60; its sweeps (Fig. 5a) use 60
# groups of arms that sweep a parameter around a paper's default (a profile may give them fewer seeds)
SWEEP_GROUPS = frozenset(
    {
        "alpha",
        "beta",
        "beta2",
        "levels",
        "lminmax",
        "grid",
        "grid_authors",
        "tau",
        "margin",
        "gamma",
        "theta_cal_beta2",
        "theta_cal_levels",
    }
)
# each paper's MAIN comparison: the arms tuned on the validation split. SAM's is the
# full-data pair of its fraction table (Table 3); its 10% / 25% arms use the tuning of the 100% arm.
MAIN_GROUPS = {
    "overview": ("x1",),
    "bcls": ("table8",),
    "ladder": ("table1",),
    "sam": ("fraction",),
    "listwise": ("table5",),
    "unified": ("table1",),
}
SAM_PAPER = {"tau": 3.0, "sampling": "SN", "keep_triplet": True}  # SAM Table 4 default, the paper's SN
SAM_AUTHORS = {"tau": 3.0, "sampling": "SN", "keep_triplet": True}  # same settings, the code's semantics


@dataclass(frozen=True)
class Arm:
    """A named set of Config overrides. ``family``: the *name* of the main-comparison arm of the same
    paper whose tuned lr / warm-up this arm uses (None: resolved by :func:`reproduce.protocol.tuning.family_of` —
    a main arm is its own family, a sweep arm takes the main arm with the same loss)."""

    paper: str
    group: str
    name: str
    overrides: dict = field(default_factory=dict)
    family: str | None = None

    def config(self, profile: Profile, seed: int, **setting) -> Config:
        """The config of this arm under ``profile`` for one ``seed``; ``setting`` (lr, warmup_epochs) is
        applied unless the arm fixes that field itself (e.g. the warm-up sensitivity arms). A loss with
        its own ``seed`` parameter (SAM's random sampler) gets the run's seed, so seeds differ in its
        sampling too."""
        base = dict(data=profile.data, data_scale=profile.data_scale, **profile.model)
        cfg = {**base, **{k: v for k, v in setting.items() if k not in self.overrides}, **self.overrides, "seed": seed}
        frac = self.overrides.get("train_fraction", 1.0)  # the arm's own fraction (not a profile's subset)
        if frac < 1.0 and base.get("train_fraction", 1.0) < 1.0:  # a profile's subset (smoke): the arm's
            cfg["train_fraction"] = frac * base["train_fraction"]  # fraction of that subset, never more images
        if frac < 1.0 and "epochs" not in self.overrides:  # S1: as many updates as the full-data arm
            cfg["epochs"], cfg["early_stop_patience"] = profile_mod.epochs_for_fraction(profile, frac)
            defaults = {f.name: f.default for f in fields(Config)}
            cfg.update(
                profile_mod.schedule_for_fraction(
                    frac,
                    cfg.get("warmup_epochs", defaults["warmup_epochs"]),
                    cfg.get("lr_decay_epoch", defaults["lr_decay_epoch"]),
                )
            )
        if "seed" in losses.parameters(cfg["loss"]):
            cfg["loss_params"] = {**cfg.get("loss_params", {}), "seed": seed}
        return Config(**cfg)

    @property
    def uses_relevance(self) -> bool:
        """Whether the arm's loss trains on continuous relevance (a pseudo label: Sentence-BERT, CIDEr-D)."""
        return self.overrides.get("relevance") not in (None, "", "none")

    @property
    def honours_warmup(self) -> bool:
        """Whether a warm-up changes the arm's loss (it selects hardest negatives): the library's
        ``ITRLoss.honours_warmup`` of the built loss — the one answer the training loop also uses."""
        return losses.registry.traits(self.overrides["loss"], **self.overrides.get("loss_params", {})).honours_warmup

    @property
    def seed_group(self) -> str:
        """The group a profile's seed rules see: SAM's reduced-data arms are "fraction_reduced"."""
        return f"{self.group}_reduced" if self.overrides.get("train_fraction", 1.0) < 1.0 else self.group

    def pilot_seeds(self, profile: Profile) -> tuple[int, ...]:
        """The profile's seeds for the arm's group — all of them when the arm enters a primary contrast
        on every data set (an arm contrast's arm, or an arm of a group a notebook-measured primary is
        computed from), whatever the group's cost rule. The tuner's health check reads these."""
        primary = self.name in primary_arm_names(self.paper) or self.group in primary_arm_groups(self.paper)
        return profile.seeds_for(self.seed_group, self.group in SWEEP_GROUPS, primary=primary)

    def seeds(self, profile: Profile) -> tuple[int, ...]:
        """The seeds the arm trains: its :meth:`pilot_seeds`, and 0 … n − 1 where ``power_seeds.toml`` gives it n
        (:mod:`reproduce.spec.power_seeds`: the seeds a power analysis asked for; none of them for a
        ``profile.pilot_only`` study)."""
        pilot = self.pilot_seeds(profile)
        n = power_seeds.seeds_of(profile.name, profile.data, self.paper, self.name, pilot=profile.pilot_only)
        return pilot if n is None else tuple(sorted(set(pilot) | set(range(n))))

    def configs(self, profile: Profile, **setting) -> list[Config]:
        """One config per seed of the profile (``Profile.seeds_for`` the arm's group)."""
        return [self.config(profile, s, **setting) for s in self.seeds(profile)]


def _arm(paper, group, name, loss, params=None, family=None, **extra) -> Arm:
    return Arm(paper, group, name, dict(loss=loss, loss_params=params or {}, **extra), family=family)


# --- the shared arms of the fair comparison (X1) ------------------------------------------------
def overview_arms(profile: Profile | None = None) -> list[Arm]:
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
        _arm(p, "x1", "Triplet-HN + SAM (SN, τ=3)", "sam", SAM_PAPER, **CIDER),
        _arm(p, "x1", "Triplet + S-NDCG (listwise)", "listwise", **SBERT_UNIT),
        # VSE++ with and without warm-up at VSE++'s tuned lr (the papers' recipe has none);
        # one of the two is the tuned VSE++ run itself
        _arm(p, "warmup", "VSE++ without warm-up", "triplet", warmup_epochs=0, family="VSE++ (Triplet-HN)"),
        _arm(p, "warmup", "VSE++ with 1 warm-up epoch", "triplet", warmup_epochs=1, family="VSE++ (Triplet-HN)"),
    ]


def bcls_arms(profile: Profile) -> list[Arm]:
    p = "bcls"
    arms = [
        _arm(p, "table8", "Triplet-HN", "triplet"),
        _arm(p, "table8", "Kendall SW-HS alone", "kendall_sw_hs", **SBERT),
        _arm(p, "table8", "Triplet-SN", "triplet_sn"),
        _arm(p, "table8", "BCLS", "bcls", **SBERT),
    ]
    # B5 is a peak claim: ≥ 4 of the 5 values (Fig. 5a,b); the default α=0.2, β=0.1 is the BCLS arm itself
    for a in profile.thin((0.0, 0.1, 0.2, 0.3, 0.4), keep=(0.2,)):
        arms.append(_arm(p, "alpha", f"α={a:g}", "bcls", {"kendall_params": {"alpha": a}} if a != 0.2 else {}, **SBERT))
    for b in profile.thin((0.05, 0.1, 0.2, 0.4), keep=(0.1,)):
        arms.append(_arm(p, "beta", f"β={b:g}", "bcls", {"kendall_params": {"beta": b}} if b != 0.1 else {}, **SBERT))
    arms.append(_arm(p, "beta", "w/o SW-HS (full Kendall)", "bcls", {"kendall": "kendall"}, **SBERT))
    return arms


def ladder_arms(profile: Profile) -> list[Arm]:
    p = "ladder"
    arms = [
        _arm(p, "table1", "VSE++", "triplet"),
        _arm(p, "table1", "Ladder (manual)", "ladder", **SBERT),
        _arm(p, "table1", "Ladder (adaptive)", "adaptive_ladder", **SBERT),
    ]
    # β₂ = 0.25 is the losses' default (β_i = 1/2^i): spelled as the default so it shares the run of
    # "Ladder (manual)" / the (2,2) arm of the (L_MIN, L_MAX) sweep
    for b2 in (0.0, 0.25, 0.5):
        beta = {} if b2 == 0.25 else {"beta": [1.0, b2]}
        arms.append(_arm(p, "beta2", f"manual β₂={b2:g}", "ladder", beta, **SBERT, family="Ladder (manual)"))
        arms.append(
            _arm(
                p,
                "beta2",
                f"auto(2,2) β₂={b2:g}",
                "adaptive_ladder",
                {"l_min": 2, "l_max": 2, **beta},
                **SBERT,
                family="Ladder (adaptive)",
            )
        )
    arms += [
        _arm(p, "levels", "L=1", "triplet", family="VSE++"),
        _arm(p, "levels", "L=2", "ladder", {"thresholds": [0.40]}, **SBERT, family="Ladder (manual)"),
        _arm(
            p,
            "levels",
            "L=3",
            "ladder",
            {"thresholds": [0.40, 0.35], "alpha": [0.2, 0.01, 0.01], "beta": [1.0, 0.25, 0.125]},
            **SBERT,
            family="Ladder (manual)",
        ),
    ]
    # Table VIII/IX order; thinned: its ends (1,1) and (2,5), the paper default (2,4) and (2,2)
    for lo, hi in profile.thin(((1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (2, 3), (2, 4), (2, 5)), keep=((2, 2), (2, 4))):
        arms.append(
            _arm(
                p,
                "lminmax",
                f"({lo},{hi})",
                "adaptive_ladder",
                {"l_min": lo, "l_max": hi},
                **SBERT,
                family="Ladder (adaptive)",
            )
        )
    arms += ladder_calibrated_arms(profile)
    return arms


def ladder_calibrated_arms(profile: Profile) -> list[Arm]:
    """L1–L3 at θ calibrated to the relevance model in use: θ₁ / θ₂ at the quantiles the
    paper's scope-of-interest implies (:mod:`reproduce.protocol.calibration`). Needs the profile's θ for its data
    (``Profile.ladder_theta``); none → no calibrated arms (smoke)."""
    theta = profile.ladder_theta
    if not theta:
        return []
    p, t1, t2 = "ladder", float(theta[0]), float(theta[1])
    main = f"Ladder (manual, θ={t1:.3f} calibrated)"
    arms = [_arm(p, "table1", main, "ladder", {"thresholds": [t1]}, **SBERT)]
    for b2 in (0.0, 0.5):  # β₂ = 0.25 is the main calibrated arm
        arms.append(
            _arm(
                p,
                "theta_cal_beta2",
                f"manual β₂={b2:g} (θ calibrated)",
                "ladder",
                {"thresholds": [t1], "beta": [1.0, b2]},
                **SBERT,
                family=main,
            )
        )
    arms.append(
        _arm(
            p,
            "theta_cal_levels",
            "L=3 (θ calibrated)",
            "ladder",
            {"thresholds": [t1, t2], "alpha": [0.2, 0.01, 0.01], "beta": [1.0, 0.25, 0.125]},
            **SBERT,
            family=main,
        )
    )
    return arms


# S1, S2: the losses trained on 10 %, 25 % and 100 % of the data (name, loss, parameters, relevance)
_SAM_FRACTION_LOSSES = (
    ("Triplet-HN", "triplet", None, {}),
    ("+ SAM", "sam", SAM_PAPER, CIDER),
    ("+ SAM (authors' code)", "sam_authors", SAM_AUTHORS, CIDER),
)
# S3: the τ × sampling × keep grid, once per SAM variant (group, name prefix, loss, family)
_SAM_GRIDS = (
    ("grid", "", "sam", "100% data, + SAM"),
    ("grid_authors", "authors ", "sam_authors", "100% data, + SAM (authors' code)"),
)


def sam_arms(profile: Profile) -> list[Arm]:
    """SAM as the paper writes it (``sam``: SN = the furthest negative, no clamp, weight 1) and as the
    authors coded it (``sam_authors``: "soft" = the near-hardest negative, margin clamped at 1, weight 5);
    S1–S3 on both. The reduced-data arms train ⌈E / f⌉ epochs (same updates, S1)."""
    p = "sam"
    arms = []
    for frac in (0.1, 0.25, 1.0):
        kw = {"train_fraction": frac} if frac < 1.0 else {}
        for what, loss, params, extra in _SAM_FRACTION_LOSSES:
            family = {} if frac == 1.0 else {"family": f"100% data, {what}"}
            arms.append(_arm(p, "fraction", f"{frac:.0%} data, {what}", loss, params, **kw, **extra, **family))
    # S3 is no trend claim: the τ grid keeps its ends and the paper default (τ = 3, 10)
    for tau in profile.thin((3.0, 5.0, 10.0), keep=(3.0,), min_points=2):
        for sampling in ("RS", "HN", "SN"):
            for keep in (True, False):
                for group, prefix, loss, family in _SAM_GRIDS:
                    params = {"tau": tau, "sampling": sampling, "keep_triplet": keep}
                    name = f"{prefix}τ={tau:g} {sampling} keep={keep}"
                    arms.append(_arm(p, group, name, loss, params, **CIDER, family=family))
    return arms


def listwise_arms(profile: Profile) -> list[Arm]:
    p = "listwise"
    arms = [
        _arm(p, "table5", "Triplet (mean)", "triplet", {"reduction": "mean"}),
        _arm(p, "table5", "S-NDCG alone", "sndcg", **SBERT_UNIT),
        _arm(p, "table5", "Triplet + S-NDCG", "listwise", **SBERT_UNIT),
    ]
    for tau in profile.thin((1e-1, 1e-2, 1e-3, 1e-4), keep=(1e-2,)):
        arms.append(
            _arm(
                p,
                "tau",
                f"τ={tau:g}",
                "listwise",
                {"sndcg_params": {"tau": tau}},
                **SBERT_UNIT,
                family="Triplet + S-NDCG",
            )
        )
    return arms


def unified_arms(profile: Profile) -> list[Arm]:
    p = "unified"
    arms = [
        _arm(p, "table1", "Triplet-HN", "triplet"),
        _arm(p, "table1", "VLC", "vlc", {"gamma": GAMMA}),
        _arm(p, "table1", "Unified", "unified", {"margin": 0.2, "gamma": GAMMA}),
    ]
    for m in profile.thin((0.0, 0.1, 0.2, 0.3, 0.4), keep=(0.2,)):
        arms.append(_arm(p, "margin", f"m={m:g}", "unified", {"margin": m, "gamma": GAMMA}, family="Unified"))
    for g in profile.thin((20.0, 40.0, 60.0, 80.0, 100.0), keep=(GAMMA,)):
        arms.append(_arm(p, "gamma", f"γ={g:g}", "unified", {"margin": 0.2, "gamma": g}, family="Unified"))
    arms.append(_arm(p, "gamma", "γ=∞ (Triplet-HN)", "triplet", family="Triplet-HN"))
    return arms


PAPERS = {
    "overview": overview_arms,
    "bcls": bcls_arms,
    "ladder": ladder_arms,
    "sam": sam_arms,
    "listwise": listwise_arms,
    "unified": unified_arms,
}


# --- arms from user code -------------------------------------------------------------------------
# (paper, arm name) -> (arm, main), in registration order: the arms register_arm added
ARMS: Registry[tuple[Arm, bool]] = Registry("arm", same=lambda old, new: False, describe=lambda am: am[0].name)
_NEW_PAPERS: set[str] = set()  # paper keys created by register_arm
_ADDED_MAIN: dict[tuple[str, str], int] = {}  # (paper, group) made main by register_arm -> its arms


def _no_arms(profile: Profile) -> list[Arm]:
    return []


def make_arm(paper: str, group: str, name: str, loss: str, params: dict | None = None, family=None, **extra) -> Arm:
    """An :class:`Arm` training ``loss`` (any name in ``coherent_itr.losses.available()``) with ``params``;
    ``extra``: other Config overrides (e.g. ``relevance="sbert"``)."""
    return _arm(paper, group, name, loss, params, family=family, **extra)


def registered_arms(paper: str) -> list[Arm]:
    """The arms user code registered for ``paper`` (:func:`register_arm`), in registration order."""
    return [arm for (p, _), (arm, _) in ARMS.items() if p == paper]


def register_arm(arm: Arm, main: bool = False) -> Arm:
    """Add ``arm`` to the arms of ``arm.paper`` from user code — a paper of :data:`PAPERS`, or a new key,
    which then joins :data:`PAPERS` (the plan, tuning and ``Study`` see it like the five papers).
    ``main=True`` makes ``arm.group`` one of the paper's main groups (its arms are tuned, see
    :mod:`reproduce.protocol.tuning`); otherwise the arm uses its family's tuning (``Arm.family``, or the main arm
    of its paper with the same loss). Undo with :func:`unregister_arm`, or use :func:`extra_arms`."""
    if "loss" not in arm.overrides:
        raise ValueError(f"arm {arm.paper}/{arm.name!r} sets no loss (overrides {arm.overrides})")
    if (arm.paper, arm.name) in ARMS:
        raise ValueError(f"an arm named {arm.name!r} is already registered for paper {arm.paper!r}")
    if arm.paper not in PAPERS:
        PAPERS[arm.paper] = _no_arms
        _NEW_PAPERS.add(arm.paper)
    key = (arm.paper, arm.group)
    main = bool(main) and (key in _ADDED_MAIN or arm.group not in MAIN_GROUPS.get(arm.paper, ()))
    if main:  # (a group the package already tunes needs nothing)
        _ADDED_MAIN[key] = _ADDED_MAIN.get(key, 0) + 1
        MAIN_GROUPS[arm.paper] = tuple(dict.fromkeys((*MAIN_GROUPS.get(arm.paper, ()), arm.group)))
    ARMS.register((arm.paper, arm.name), (arm, main))
    return arm


def unregister_arm(arm: Arm) -> None:
    """Remove an arm added by :func:`register_arm` (and the paper key / main group it created)."""
    if (arm.paper, arm.name) not in ARMS:
        raise ValueError(f"arm {arm.paper}/{arm.name!r} was not registered with register_arm")
    _, main = ARMS.unregister((arm.paper, arm.name))
    key = (arm.paper, arm.group)
    if main:
        _ADDED_MAIN[key] -= 1
        if not _ADDED_MAIN[key]:
            del _ADDED_MAIN[key]
            MAIN_GROUPS[arm.paper] = tuple(g for g in MAIN_GROUPS[arm.paper] if g != arm.group)
            if not MAIN_GROUPS[arm.paper]:
                del MAIN_GROUPS[arm.paper]
    if not registered_arms(arm.paper) and arm.paper in _NEW_PAPERS:
        _NEW_PAPERS.discard(arm.paper)
        del PAPERS[arm.paper]


@contextlib.contextmanager
def extra_arms(*new: Arm, main: bool = False):
    """Context manager: ``new`` arms registered (:func:`register_arm`) inside the block, removed after it."""
    done = []
    try:
        for a in new:
            done.append(register_arm(a, main=main))
        yield list(done)
    finally:
        for a in reversed(done):
            unregister_arm(a)


def arms(paper: str, profile: Profile) -> list[Arm]:
    """The arms of ``paper`` under ``profile`` (without the groups the profile skips), then the arms
    user code registered for it (:func:`register_arm`)."""
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; choose one of {sorted(PAPERS)}")
    out = list(PAPERS[paper](profile))
    names = {a.name for a in out}
    for a in registered_arms(paper):
        if a.name in names:
            raise ValueError(f"registered arm {paper}/{a.name!r} has the name of an arm of the package")
        out.append(a)
    return [a for a in out if a.group not in profile.skip_groups]


def is_main(arm: Arm) -> bool:
    """Whether ``arm`` belongs to its paper's main comparison (tuned; SAM: the full-data arms only)."""
    return arm.group in MAIN_GROUPS.get(arm.paper, ()) and arm.overrides.get("train_fraction", 1.0) == 1.0


def plan(profile: Profile, papers=None) -> list[Config]:
    """Every config the profile needs at the profile's own lr (no tuning), deduplicated (two arms with
    equal settings share one run). With tuning, :func:`reproduce.protocol.tuning.tuned_plan` gives the final runs."""
    seen: dict[str, Config] = {}
    for paper in papers or PAPERS:
        for arm in arms(paper, profile):
            for cfg in arm.configs(profile):
                seen.setdefault(cfg.key(), cfg)
    return list(seen.values())


def study_losses() -> list[tuple[str, dict]]:
    """Every ``(loss, params)`` a planned run of any profile on either data set trains with, then every
    registered loss the plan does not use, with its default parameters (``weighted_sum``: Triplet-HN plus
    half S-NDCG), sorted: what the device checks run (``tests/lib/test_device_meta.py`` on CPU under the meta
    default device, ``benchmarks/bench_cuda.py`` on CUDA against CPU)."""
    seen: dict[str, tuple[str, dict]] = {}
    for name in profile_mod.PROFILES:
        for data in ("synthetic", "flickr8k"):
            for cfg in plan(profile_mod.profile_for(name, data)):
                seen.setdefault(json.dumps([cfg.loss, cfg.loss_params], sort_keys=True), (cfg.loss, cfg.loss_params))
    used = {loss for loss, _ in seen.values()}
    for name in losses.available():
        if name not in used:
            terms = [{"name": "triplet"}, {"name": "sndcg", "weight": 0.5}]
            params = {"terms": terms} if name == "weighted_sum" else {}
            seen[json.dumps([name, params])] = (name, params)
    return [seen[k] for k in sorted(seen)]

"""Profiles: how big each part of the study is (sizes, epoch cap, schedule, tuning grid, seeds).

* ``smoke``   — seconds to minutes; what CI and nbval run. One-point tuning grid (the tuner's code
  path runs, nothing is searched) so it stays fast.
* ``default`` — what ``make reproduce`` runs on a CPU: the Reality-Check protocol below.
* ``paper``   — the papers' sizes and epochs (VSE++ GRU-1024, 30 epochs, batch 128); for GPUs.

The protocol of ``default`` (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020), stated
before the cold run whose results it decides, the same for every arm:

1. **Tuning** (``reproduce.protocol.tuning``): every arm of every paper's main comparison gets the same
   search on the *validation* split with seed 0 — lr ∈ {2e-4, 6e-4, 2e-3, 6e-3} × warm-up ∈ {0, 1}
   epoch when a warm-up changes its loss (``ITRLoss.honours_warmup``; lr only otherwise) — by
   successive halving: every setting trains ``RUNG_EPOCHS`` = 5 epochs after its warm-up, the better
   half of each grid (4 of 8, 2 of 4) goes on to the cap, the others stop there. Loss
   hyper-parameters the papers fixed stay fixed. The setting with the best validation RSUM
   (collapsed runs last; ties → smaller lr, then no warm-up) is trained with every seed; sweep
   arms use their family's.
2. **Schedule**: an optional warm-up epoch on all negatives (hardest-negative losses), then the
   VSE++ step schedule — lr × 0.1 after epoch 32 — under a cap of 40 epochs, with early stopping on
   validation RSUM (patience 3) counted from the first epoch after the warm-up; each run keeps its
   best-validation checkpoint. The decay comes before the cap, so every run that trains to the
   cap also trains at the decayed lr; an arm that has plateaued stops early (most arms by epoch 6–13).
3. **Collapse** (``coherent_itr.health``): a run is collapsed only when it has no retrieval ability
   (validation RSUM ≤ 2× chance) or diverged; the narrow cone of hardest-negative training is a
   recorded diagnostic, never a reason to drop a setting.
4. **Seeds**: 5 (``PRIMARY_SEEDS``) for every main arm and every arm of a primary contrast on both
   data sets — an arm contrast's arms, and every arm of a group a notebook-measured primary is computed
   from (``arm_groups`` in the claims file: S3's SAM grid); 3 (``sweep_seeds``) for the other points of
   trend/peak sweeps; seed 0 only for the sweeps that no claim's primary row rests on (``*_SEED0_GROUPS``).

**Model size** — the smallest VSE++ at which the Flickr8k baseline is credible (mean test RSUM of
VSE++ ≥ 200 over seeds). Measured with this project's ``train()`` on Flickr8k (batch 128, lr 2e-3,
one warm-up epoch, test RSUM, seed 0): 64/64/128 (words/GRU/joint) reached 94.8 after 3 epochs and
151.6 after 8 epochs (×0.1 from the 6th); 128/128/128 reached 166.1 (seed 1: 176.2) after 3
epochs with the decay in the 3rd, and 220.3 after 10 epochs with ×0.1 from the 8th (Triplet over all
negatives 214.7, BCLS 232.3). A published anchor for a GRU over frozen CNN features on Flickr8k:
RSUM 214.9 (Kiros et al., UVS, VGG-19). So 128/128/128.

**Cap** — from the learning curves of ``benchmarks/bench_learning_curves.py``
(``results/benchmarks/learning_curves/``; seed 0, 128/128/128, lr × 0.1 after 80 % of the long run's
epochs; an arm plateaus within E when its best validation RSUM by epoch E is ≥ 95 % of its long-run best).
Every main arm ran 20 epochs on both data sets: most plateau by epoch 3–6 (Flickr8k VSE++: 212.7 validation
RSUM, 95 % by epoch 4) and then overfit, so patience 3 stops them long before any cap. The slow arms
(both ladders, Kendall SW-HS alone, S-NDCG alone) were still rising at epoch 20 and ran again for 40 epochs
(``results/benchmarks/learning_curves/``, measured before any run of this protocol): on Flickr8k the
adaptive ladder sits in the narrow cone (hardest-negative cosine 0.97–0.99) for 30 epochs, escapes at epoch 31 and
peaks at 221.3 at epoch 33 (its 20-epoch run: 178.8, 81 % of that); Kendall SW-HS alone peaks at 61.0 at
epoch 33; S-NDCG alone reaches 95 % by epoch 17 and the manual ladder by 16. On the synthetic world
(``learning_curves/synthetic_e40``) S-NDCG alone needs 27 epochs (305.4 validation RSUM at epoch 20, 468.9 at
37) and Kendall SW-HS alone 33; the ladders 12–17. The smallest cap at which every slow arm reaches 95 % of its
40-epoch best is 33 on both data sets, so the cap is **40 epochs with the decay after epoch 32**
(the long check's own schedule) — the plateau rule before the compute budget. The long run of 2 × the cap
(``learning_curves/*_e80``, decay after 64) found no gain past 40 epochs for the ladders (both data sets) and S-NDCG
alone on Flickr8k; the 40-epoch runs of S-NDCG alone (synthetic) reach 95.7 % and of Kendall SW-HS alone 95.6 %
(synthetic) and 76 % (Flickr8k) of their 80-epoch best: on Flickr8k that one arm (B3's predicted failure) misses
the rule; the cap stays as stated.

**Cost** — :func:`reproduce.protocol.plan.estimate_cost` (``python -m reproduce.protocol.plan``) prices the plan
from the per-run costs in ``COSTS`` / ``LOSS_EXTRA_S``, every run at its expected epochs (``EXPECTED_EPOCHS``:
early stopping replayed on the learning curves); ``results/manifest.json`` records what a run really took.
On this 2-core machine the whole protocol prices at ≈ 34 worker-hours; run by run it took ≈ 19 (≈ 10 h of wall
time at two workers, ``docs/compute.md``): it does not fit one sitting here. The driver is resumable (a stopped
run loses only the runs in flight), a machine with more cores or a Ray cluster divides it (``docs/cluster.md``),
and a GPU the more.

Other parts of the plan:

* **The authors'-variant SAM grid** (S3 as coded) runs on the synthetic world only, with seed 0
  (``FLICKR8K_SKIP_GROUPS``, ``SYNTHETIC_SEED0_GROUPS``).
* **Sweep points**: the τ grid of SAM keeps its ends and default (3, 10) — S3 is no trend claim;
  (L_MIN, L_MAX) keeps (1,1), (2,2), (2,4), (2,5).
* **Calibrated ladder θ** runs on synthetic only: on Flickr8k the calibrated θs equal the literal
  ones within 0.016 (see ``LADDER_THETA_MEASURED``).
* **S1 at equal updates**: 10 % / 25 % of the data train ⌈E / f⌉ epochs with patience ⌈P / f⌉, the
  warm-up and the decay epoch stretched alike (:func:`schedule_for_fraction`), capped at
  ``reduced_data_epoch_cap`` (400: not binding at E = 40).
* **Selection after the warm-up** (``coherent_itr.train._Selector``): with a warm-up, only epochs
  from ``warmup_epochs + 1`` on are candidates and patience counts from there, so a warm-up
  checkpoint (a model of another loss) is never kept and the dip right after the switch to
  max-violation is not taken for a plateau.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field


HN_WARMUP_FIELD = "warmup_epochs"  # Config field of the interface contract (engine helper)


@dataclass(frozen=True)
class TuningGrid:
    """The search every main-comparison arm gets (Reality Check): ``lr`` × ``warmup_epochs`` (the
    latter only for losses built on hardest negatives), on the validation split with ``seed``."""

    lr: tuple[float, ...] = (2e-4, 6e-4, 2e-3, 6e-3)
    warmup_epochs: tuple[int, ...] = (0, 1)
    seed: int = 0
    #: successive halving (``reproduce.protocol.tuning``): every setting first trains this many epochs after its
    #: warm-up (the rung); only the better ``keep`` share of the settings (rounded up) trains on to the cap.
    #: 0: no rung, every setting trains to the cap.
    rung_epochs: int = 0
    keep: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.rung_epochs, int) or self.rung_epochs < 0:
            raise ValueError(f"TuningGrid.rung_epochs={self.rung_epochs!r}: expected an integer ≥ 0 (0: no halving)")
        if not (0 < self.keep <= 1):
            raise ValueError(f"TuningGrid.keep={self.keep!r}: expected the share of settings that go on, in (0, 1]")
        if not self.lr or any(not (0 < v < 1) for v in self.lr):
            raise ValueError(f"TuningGrid.lr={self.lr!r}: expected a non-empty tuple of learning rates in (0, 1)")
        if not self.warmup_epochs or any((not isinstance(w, int)) or w < 0 for w in self.warmup_epochs):
            raise ValueError(f"TuningGrid.warmup_epochs={self.warmup_epochs!r}: expected non-empty integers ≥ 0")
        if len(set(self.lr)) != len(self.lr) or len(set(self.warmup_epochs)) != len(self.warmup_epochs):
            raise ValueError(f"TuningGrid has repeated values: lr={self.lr}, warmup_epochs={self.warmup_epochs}")

    def settings(self, honours_warmup: bool) -> list[dict]:
        """The grid points, in tie-break order (smaller lr first, then no warm-up); the warm-up values only
        for a loss a warm-up changes (``ITRLoss.honours_warmup``)."""
        warm = sorted(self.warmup_epochs) if honours_warmup else [0]
        return [{"lr": float(lr), HN_WARMUP_FIELD: int(w)} for lr in sorted(self.lr) for w in warm]


@dataclass(frozen=True)
class Profile:
    name: str
    data: str
    data_scale: str
    seeds: tuple[int, ...]
    model: dict = field(default_factory=dict)  # Config overrides: sizes, epoch cap, patience, lr schedule
    results_dir: str = "results"
    thin_sweeps: bool = False  # keep a sweep's ends, the paper default and ≥ min_sweep_points
    min_sweep_points: int = 4  # thinned sweeps keep at least this many values
    sweep_seeds: tuple[int, ...] | None = None  # seeds of the sweep arms (None: ``seeds``)
    seed0_groups: frozenset = frozenset()  # sweep groups run with seed 0 only (cost trade-off, see above)
    skip_groups: frozenset = frozenset()  # arm groups not run at all under this profile (cost trade-off)
    tuning: TuningGrid | None = None  # None: no tuning, every arm uses ``model["lr"]`` (old behaviour)
    reduced_data_epoch_cap: int = 0  # S1: a fraction f of the data trains ⌈E/f⌉ epochs, capped here
    ladder_theta: tuple[float, float] | None = None  # (θ₁, θ₂) calibrated to the relevance model (calibration.py)
    flickr8k: dict = field(default_factory=dict)  # field overrides when the profile runs on Flickr8k
    #: ``--pilot-only``: every arm trains its pilot seeds only, none of ``power_seeds.toml``'s (:func:`get_profile`)
    pilot_only: bool = False

    def thin(self, values, keep=(), min_points: int | None = None) -> list:
        """A sweep's values under this profile: all of them, or (thinned) its two ends, ``keep`` (the
        paper default) and interior values until ``min_points`` (default ``min_sweep_points``) are kept —
        each added value is the interior one furthest (in position) from those already kept, the earlier
        one on a tie, so the kept points spread over the sweep. Order is the sweep's."""
        values = list(values)
        need = self.min_sweep_points if min_points is None else min_points
        if not self.thin_sweeps or len(values) <= max(2, need):
            return values
        kept = {i for i, v in enumerate(values) if i in (0, len(values) - 1) or v in keep}
        while len(kept) < need:
            rest = [i for i in range(len(values)) if i not in kept]
            kept.add(max(rest, key=lambda i: (min(abs(i - k) for k in kept), -i)))
        return [v for i, v in enumerate(values) if i in kept]

    def seeds_for(self, group: str, is_sweep: bool, primary: bool = False) -> tuple[int, ...]:
        """Seeds of an arm of ``group``; ``primary``: the arm enters a primary contrast, so it always gets
        every seed (``seed0_groups`` applies to the other arms of those sweeps only)."""
        if primary:
            return self.seeds
        if group in self.seed0_groups:
            return (0,)
        if is_sweep and self.sweep_seeds:
            return self.sweep_seeds
        return self.seeds


# grad_diag_every: the Unified paper's Fig. 4 quantities (tangent gradients, hardest-negative cosine) are
# sampled every k training steps for every run (≈ 5% extra on a sampled step: results/benchmarks/run_profile.md)
_SMALL = dict(
    embed_dim=64,
    word_dim=64,
    text_hidden=64,
    epochs=2,
    batch_size=64,
    lr=2e-3,
    lr_decay_epoch=1,
    sampling="captions",
    grad_diag_every=5,
)
# default: a GRU-128 text encoder over 128-d words into a 128-d joint space (see "Model size" in the docstring)
_GRU128 = dict(embed_dim=128, word_dim=128, text_hidden=128, batch_size=128, sampling="captions", grad_diag_every=10)
# cap 40 epochs, lr × 0.1 after the 32nd, early stopping with patience 3 counted after the warm-up (from the
# learning curves: results/benchmarks/learning_curves/; see "Cap" in the module docstring)
_PLATEAU_SCHEDULE = dict(epochs=40, lr_decay_epoch=32, early_stop_patience=3, lr=2e-3)
PRIMARY_SEEDS = (0, 1, 2, 3, 4)
# successive halving of the tuning grid: every setting trains 5 epochs after its warm-up, the better half goes on
# to the cap. 5: the learning curves put every fast arm past its hardest-negative transient by then (Flickr8k
# VSE++ 98 %, SAM 95–98 % of its best at epoch 5) while a setting of lr 2e-4 costs 5 epochs instead of up to 40
RUNG_EPOCHS = 5
# sweeps that no trend/peak claim rests on; they run with seed 0 only on both data sets. SAM's "grid" is not
# one: S3's primary row (SN vs HN over its cells) rests on it, so its arms get every seed
FLICKR8K_SEED0_GROUPS = frozenset(
    {"margin", "lminmax", "grid_authors", "fraction_reduced", "theta_cal_beta2", "theta_cal_levels"}
)
SYNTHETIC_SEED0_GROUPS = FLICKR8K_SEED0_GROUPS
# the authors'-variant SAM grid (S3 as coded, seed 0 only) runs on the synthetic world only (cost, see above)
FLICKR8K_SKIP_GROUPS = frozenset({"grid_authors"})

# Ladder (θ₁, θ₂) at the CVSE++ scope-of-interest quantiles (top 1.9 % / 3.9 % of the off-diagonal
# Sentence-BERT (MiniLM) paired cosines of 50 random training batches of 128; reproduce/protocol/calibration.py, which
# 02_ladder re-measures and shows against θ = 0.40). Measured with `python -m reproduce.protocol.calibration`:
# * synthetic (whole training split): (0.508, 0.447); θ = 0.40 is reached by 6.5 % of pairs; rows with an
#   empty level 1: 1.5 % at 0.40, 21 % at the calibrated θ₁ → calibrated arms run beside the literal ones.
# * flickr8k (1,500 random training images): (0.416, 0.349); θ = 0.40 / 0.35 are reached by 2.3 % / 3.9 % of
#   pairs — the paper's literal thresholds already sit at the calibrated quantiles (θ₁ within 0.016), so the
#   literal arms are the calibrated ones there and no separate runs are planned (25 % of rows have an empty
#   level 1 at 0.40, 30 % at 0.416: what the paper's own design implies, a finding for 02_ladder).
LADDER_THETA_MEASURED = {"synthetic": (0.508, 0.447), "flickr8k": (0.416, 0.349)}
LADDER_THETA = {"synthetic": LADDER_THETA_MEASURED["synthetic"], "flickr8k": None}

PROFILES = {
    "smoke": Profile(
        "smoke",
        data="synthetic",
        data_scale="smoke",
        seeds=(0,),
        results_dir="results/smoke",
        thin_sweeps=True,
        tuning=TuningGrid(lr=(2e-3,), warmup_epochs=(0,)),
        reduced_data_epoch_cap=4,
        model=dict(_SMALL, early_stop_patience=0),
        flickr8k=dict(model=dict(_SMALL, early_stop_patience=0, train_fraction=0.1)),
    ),
    "default": Profile(
        "default",
        data="synthetic",
        data_scale="default",
        seeds=PRIMARY_SEEDS,
        sweep_seeds=(0, 1, 2),
        thin_sweeps=True,
        tuning=TuningGrid(rung_epochs=RUNG_EPOCHS),
        reduced_data_epoch_cap=400,
        ladder_theta=LADDER_THETA["synthetic"],
        seed0_groups=SYNTHETIC_SEED0_GROUPS,
        model=dict(_GRU128, **_PLATEAU_SCHEDULE),
        flickr8k=dict(
            skip_groups=FLICKR8K_SKIP_GROUPS,
            seed0_groups=FLICKR8K_SEED0_GROUPS,
            sweep_seeds=(0, 1, 2),
            reduced_data_epoch_cap=400,
            ladder_theta=LADDER_THETA["flickr8k"],
            model=dict(_GRU128, **_PLATEAU_SCHEDULE),
        ),
    ),
    "paper": Profile(
        "paper",
        data="flickr8k",
        data_scale="default",
        seeds=(0, 1, 2),
        results_dir="results/paper_scale",  # beside the default's: its ledger is read by reproduce.protocol.scale
        tuning=TuningGrid(),
        reduced_data_epoch_cap=300,
        model=dict(
            embed_dim=1024,
            word_dim=300,
            text_hidden=1024,
            epochs=30,
            batch_size=128,
            lr=2e-4,
            lr_decay_epoch=15,
            sampling="captions",
            early_stop_patience=5,
            grad_diag_every=50,
        ),
    ),
}


PILOT_RESULTS = "pilot/study"  # under a profile's results folder: where a --pilot-only study writes


def get_profile(name: str, pilot_only: bool = False) -> Profile:
    """The profile ``name``; with ``pilot_only`` (``--pilot-only``) its arms train their pilot seeds only and its
    results go to ``<results>/pilot/study/`` (the pilot's ledger, never the study's tables). A pure function of its
    arguments: the driver resolves the flag once (:class:`reproduce.driver.invocation.Invocation`)."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
    p = PROFILES[name]
    if pilot_only:
        return dataclasses.replace(p, results_dir=f"{p.results_dir}/{PILOT_RESULTS}", pilot_only=True)
    return p


def profile_for(profile: str | Profile, data: str, pilot_only: bool = False) -> Profile:
    """The profile with its data source set to ``data`` ("synthetic" or "flickr8k"); a name is resolved by
    :func:`get_profile` (``pilot_only`` with it), a :class:`Profile` keeps its own flag."""
    p = get_profile(profile, pilot_only) if isinstance(profile, str) else profile
    if data == p.data:
        return p
    if data == "flickr8k":
        return dataclasses.replace(
            p, data="flickr8k", data_scale="default", results_dir=f"{p.results_dir}/flickr8k", **p.flickr8k
        )
    if data == "synthetic":
        return dataclasses.replace(p, data="synthetic")
    raise ValueError(f"data must be 'synthetic' or 'flickr8k', got {data!r}")


# --- cost model ---------------------------------------------------------------------------------------
# Measured on a 2-core Intel Xeon (AVX-512, no AMX) at the default model (128/128/128,
# batch 128), one torch thread per worker, two workers side by side (× 1.05 over one alone):
# * a Triplet-HN epoch with its validation: synthetic 30.5 ms × 118 steps + 0.3 s ≈ 4.1 s, Flickr8k 45.8 ms ×
#   235 steps + 0.6 s ≈ 12.0 s (``results/benchmarks/run_profile{,_flickr8k}.md``); other losses add
#   ``LOSS_EXTRA_S`` per synthetic epoch (a Flickr8k epoch pays it per step: × 235 / 118), from the training
#   seconds per epoch of the Flickr8k learning curves (``results/benchmarks/learning_curves/flickr8k``, two
#   workers) against Triplet-HN's;
# * a run's fixed part (imports, data, setup, test encoding) ≈ 1.0 s / 2.5 s; its test evaluation 5.1 s / 5.7 s
#   (final runs only: tuning runs store no test metrics);
# * data preparation 85 s / 746 s (Flickr8k: EfficientNet-Lite0 features of 7,999 photos ≈ 560 s, Sentence-BERT
#   of 40,000 captions ≈ 185 s); the notebooks ≈ 300 s / 121 s (the previous protocol's cold run).
# * what the notebooks compute from the data, prepared once before them (``analyses_prepare_s``: the splits as the
#   notebooks load them and every caption's Sentence-BERT embedding; Flickr8k: the features of its 2,000 dev and test
#   photos ≈ 75 s and 39,748 captions ≈ 110 s), measured cold on a 2-core AMD EPYC with AVX-512, quiet: 54 s / 189 s;
# * how many epochs a run trains before early stopping ends it: ``EXPECTED_EPOCHS`` below.
# ``val_s``: the validation part of an epoch (the reduced-data runs of S1 validate ~10× as often).
#: the model ``COSTS`` were measured with; ``reproduce.protocol.cost`` scales them to another model by the
#: step's FLOP
COSTS_MODEL = dict(embed_dim=128, word_dim=128, text_hidden=128, batch_size=128)
COSTS = {
    "synthetic": dict(
        fixed_s=1.0,
        eval_s=5.1,
        epoch_s=4.1,
        val_s=0.3,
        steps=118,
        prepare_s=85.0,
        notebooks_s=300.0,
        analyses_prepare_s=54.0,
    ),
    "flickr8k": dict(
        fixed_s=2.5,
        eval_s=5.7,
        epoch_s=12.0,
        val_s=0.6,
        steps=235,
        prepare_s=746.0,
        notebooks_s=121.0,
        analyses_prepare_s=189.0,
    ),
}
# Seconds a training epoch of the synthetic world (118 steps) costs beyond Triplet-HN's, per loss: half the
# difference of a Flickr8k epoch's training seconds (235 steps) in the learning curves, two workers side by side.
LOSS_EXTRA_S = {
    "adaptive_ladder": 5.0,
    "ladder": 4.2,
    "sndcg": 3.4,
    "listwise": 2.5,  # the Flickr8k runs (bench_run_costs): 14.9 s / epoch against Triplet-HN's 11.6
    "bcls": 2.4,
    "sam_authors": 1.3,
    "kendall_sw_hs": 0.75,
    "sam": 0.7,  # the Flickr8k runs (bench_run_costs): 11.4 s / epoch (the learning curve's 20.3 s shared its cores)
}
# What a run costs on one GPU (results/benchmarks/gpu/README.md, the second GPU session): one NVIDIA H200 shared by
# 16 worker processes under CUDA MPS (7.4 of them training at a time on average: the tuning's phases left the others
# idle), every step captured, the default model; with all 16 busy a run may cost more, so the plan's GPU price is
# optimistic. ``epoch_s``: training seconds of a Flickr8k epoch (235 steps) per loss, the mean of that visit's runs
# (the adaptive ladder's from the visit's first call, without MPS); ``val_s`` and ``fixed_s`` (a run's setup):
# medians of its 57 runs. Not measured there: the synthetic world (priced by its steps: a captured step is
# launch-bound), other model sizes, the test evaluation (priced as on the CPU, ``COSTS[data]["eval_s"]``: an upper
# bound).
GPU_COSTS = dict(
    device="one H200, 16 worker processes under CUDA MPS",
    steps=235,
    fixed_s=1.1,
    val_s=0.20,
    epoch_s=dict(
        triplet=0.55,
        triplet_sn=0.65,
        vlc=0.58,
        unified=0.61,
        kendall_sw_hs=0.94,
        bcls=1.06,
        listwise=0.80,
        sndcg=0.71,
        ladder=0.88,
        sam=2.77,
        sam_authors=2.77,
        adaptive_ladder=8.3,
    ),
)
# What a run of the packed engine (coherent_itr.packed) costs on one GPU: not measured yet — no GPU visit has run
# it. A visit's measurement goes here, with GPU_COSTS's fields: ``device`` (the GPU and the pack's width), ``steps``,
# ``fixed_s`` and ``val_s`` per run (the pack's seconds shared by its members), ``epoch_s`` per loss (training
# seconds of a Flickr8k epoch per member of a full pack). While it is None the plan prices a packed run as a solo
# run (GPU_COSTS) and says so.
PACKED_COSTS: dict | None = None
# Epochs a full-data run trains before early stopping (patience 3 after the warm-up) ends it, at a good lr: the
# learning curves with early stopping replayed on them (fast arms: best epoch + 3; the slow arms from the
# 40-epoch curves), checked against the Flickr8k VSE++ tuning runs (lr 2e-3: 9 and 12 epochs;
# 6e-4: 13 and 15; 2e-4: 31 and 36). A smaller lr trains longer (``LR_EPOCH_FACTOR``); never past the cap.
EXPECTED_EPOCHS = {
    "flickr8k": dict(
        triplet=10,
        triplet_sn=8,
        vlc=6,
        unified=6,
        bcls=8,
        sam=10,
        sam_authors=10,
        listwise=9,
        kendall_sw_hs=36,
        sndcg=36,
        ladder=19,
        adaptive_ladder=36,
    ),
    "synthetic": dict(
        triplet=18,
        triplet_sn=10,
        vlc=11,
        unified=14,
        bcls=13,
        sam=17,
        sam_authors=17,
        listwise=20,
        kendall_sw_hs=36,
        sndcg=40,
        ladder=40,
        adaptive_ladder=24,
    ),
}
LR_EPOCH_FACTOR = ((3e-4, 3.3), (1e-3, 1.4))  # (lr below this, × epochs): 2e-4 → × 3.3, 6e-4 → × 1.4
ASSUMED_STEP_SPEEDUP = 1.0  # the costs above are the current engine's own: nothing assumed


def expected_epochs(config, data: str) -> int:
    """Epochs ``config`` is expected to train (:data:`EXPECTED_EPOCHS`): its cap without early stopping, for a
    reduced-data run (S1 stretches patience with the data) or an unmeasured loss; never past the cap."""
    per_loss = EXPECTED_EPOCHS.get(data, {})
    if not config.early_stop_patience or config.train_fraction < 1 or config.loss not in per_loss:
        return int(config.epochs)
    e = float(per_loss[config.loss])
    for below, factor in LR_EPOCH_FACTOR:
        if config.lr < below:
            e *= factor
            break
    return int(min(config.epochs, math.ceil(e)))


def run_seconds(
    config, data: str, epochs_run: int | None = None, speedup: float = ASSUMED_STEP_SPEEDUP, evaluated: bool = True
) -> float:
    """Expected seconds of one run on one worker: fixed part (+ test evaluation when ``evaluated``) +
    epochs (``epochs_run``, else :func:`expected_epochs`) × (validation + fraction × training)."""
    c = COSTS[data]
    e = expected_epochs(config, data) if epochs_run is None else min(epochs_run, config.epochs)
    loss_s = LOSS_EXTRA_S.get(config.loss, 0.0) * c["steps"] / COSTS["synthetic"]["steps"]
    per_epoch = c["val_s"] + config.train_fraction * (c["epoch_s"] - c["val_s"] + loss_s)
    return c["fixed_s"] + (c["eval_s"] if evaluated else 0.0) + e * per_epoch / speedup


def epochs_for_fraction(profile: Profile, fraction: float) -> tuple[int, int]:
    """(epochs, patience) of a run on ``fraction`` of the training data with as many *updates* as the
    full-data arm (SAM Table 2 / claim S1): ⌈E / f⌉ epochs and patience ⌈P / f⌉, the epochs
    capped at ``reduced_data_epoch_cap`` (0: no cap)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    e = int(profile.model.get("epochs", 30))
    p = int(profile.model.get("early_stop_patience", 0))
    epochs = math.ceil(e / fraction - 1e-9)
    if profile.reduced_data_epoch_cap:
        epochs = min(epochs, profile.reduced_data_epoch_cap)
    return max(epochs, e), (math.ceil(p / fraction - 1e-9) if p else 0)


def schedule_for_fraction(fraction: float, warmup_epochs: int, lr_decay_epoch: int) -> dict:
    """The epoch-counted schedule of a run on ``fraction`` of the training data, at the same *updates* as
    the full-data arm (claim S1, like :func:`epochs_for_fraction`): the warm-up lasts ⌈W / f⌉ epochs and the
    lr decays after ⌈D / f⌉ epochs. Without this a 10 % arm (E = 3, D = 3, W = 1) had its lr cut 10× after
    70 updates and 10⁻⁹× by its 30th epoch, and left the warm-up after 24 updates instead of 235."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")

    def scaled(n: int) -> int:
        return math.ceil(n / fraction - 1e-9) if n else 0

    return {"warmup_epochs": scaled(int(warmup_epochs)), "lr_decay_epoch": scaled(int(lr_decay_epoch))}

"""What a notebook talks to: the runs of a paper under a profile and data set, as DataFrames.

    from reproduce.protocol.study import Study
    st = Study("default", "synthetic")
    df = st.results("bcls")          # one row per (arm, seed): arm labels + every test metric
    hist = st.histories("unified")   # one row per (arm, seed, epoch)

Results come from the run cache; a missing run is trained on the spot (with a progress bar), so
a researcher can change a sweep in JupyterLab and just re-run the notebook.

When the profile tunes (``Profile.tuning``, the Reality-Check protocol of ``reproduce.protocol.tuning``), every
arm resolves to its *tuned* configs transparently: the arm's family's chosen lr / warm-up, every seed
(missing tuning runs are trained on the spot too). ``st.tuning_table(paper)`` is the notebook's tuning
table. Without tuning in the profile, arms run at the profile's lr as before.
"""

from __future__ import annotations


import warnings

import pandas as pd
from tqdm.auto import tqdm

from coherent_itr import data as data_mod
from coherent_itr.data import flickr8k
from coherent_itr.data.flickr8k import Flickr8kWarning
from coherent_itr.runs import RunCache

from reproduce.spec import experiments, power_seeds

from reproduce.protocol import trials, tuning
from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import Profile, profile_for


class Study:
    def __init__(
        self,
        profile: str | Profile = "default",
        data: str = "synthetic",
        cache: RunCache | None = None,
        progress: bool = True,
        pilot_only: bool | None = None,
    ) -> None:
        # a profile named here is resolved here; ``pilot_only`` None: a notebook's, which the driver's
        # ``--pilot-only`` reaches through its kernel's environment (power_seeds.PILOT_ONLY_ENV)
        pilot = power_seeds.pilot_only() if pilot_only is None else pilot_only
        self.profile = profile_for(profile, data, pilot_only=pilot)
        self.data = data
        if data == "flickr8k":  # the data card (06_data) reports the release's warnings once, in prose
            warnings.filterwarnings("ignore", category=Flickr8kWarning)
        self.cache = cache or RunCache()
        self.progress = progress
        self.results_dir = ROOT / self.profile.results_dir
        self._families: dict[str, dict] = {}

    @property
    def seeds(self) -> tuple[int, ...]:
        return self.profile.seeds

    def splits(self, progress: bool = True):
        """The profile's train/dev/test splits (for data cards and batch-level analyses; Flickr8k training
        images without cached features have NaN rows: the analyses read their captions only); ``progress``: a bar
        while Flickr8k's dev and test image features are computed (the driver computes them before the notebooks:
        :func:`reproduce.protocol.prepare.prepare_analyses`)."""
        p = self.profile
        return data_mod.load_splits(p.data, scale=p.data_scale, seed=0, train_images="cached", progress=progress)

    def arms(self, paper: str, group: str | None = None) -> list[experiments.Arm]:
        return [a for a in experiments.arms(paper, self.profile) if group is None or a.group == group]

    def configs(self, arm: experiments.Arm, train_missing: bool = True) -> list:
        """The configs of ``arm`` that enter tables: every seed at the tuned setting of its family (when the
        profile tunes; its tuning runs are trained on the spot if missing — with ``train_missing=False`` a
        missing tuning run raises :class:`reproduce.protocol.tuning.TuningIncomplete` instead), else at the
        profile's lr."""
        if self.profile.tuning is None:
            return arm.configs(self.profile)
        if arm.paper not in self._families:
            fams = tuning.families(self.profile, [arm.paper], self.cache, train_missing=train_missing)
            self._families[arm.paper] = fams
        return tuning.arm_configs(
            arm, experiments.arms(arm.paper, self.profile), self.profile, self._families[arm.paper]
        )

    def tuning_table(self, paper: str) -> pd.DataFrame:
        """The paper's tuning table: every main arm × grid setting, validation RSUM, collapsed, chosen."""
        self.configs(self.arms(paper)[0])  # trains missing tuning runs (as results() would)
        return tuning.tuning_table(self.profile, paper, self.cache)

    def _runs(self, paper: str, group: str | None):
        todo = [(a, c) for a in self.arms(paper, group) for c in self.configs(a)]
        missing = sum(not self.cache.has(c) for _, c in todo)
        bar = tqdm(todo, desc=f"{paper}: {missing} run(s) to train", disable=not (self.progress and missing))
        for arm, cfg in bar:
            yield arm, cfg, self.cache.get_or_train(cfg, progress=False)

    def results(self, paper: str, group: str | None = None) -> pd.DataFrame:
        """One row per (arm, seed): ``paper, group, arm, seed, loss`` + test metrics + timing."""
        rows = []
        for arm, cfg, res in self._runs(paper, group):
            rows.append(
                {
                    "paper": arm.paper,
                    "group": arm.group,
                    "arm": arm.name,
                    "seed": cfg.seed,
                    "loss": cfg.loss,
                    "uses_relevance": arm.uses_relevance,
                    "honours_warmup": arm.honours_warmup,
                    "lr": cfg.lr,
                    "warmup_epochs": cfg.warmup_epochs,
                    **res.test,
                    **{f"time_{k}": v for k, v in res.record["timing"].items()},
                    "best_epoch": res.record["best_epoch"],
                    "epochs_run": res.record.get("epochs_run"),
                    **_collapse_columns(res.record),
                    "run_key": res.record.get("run_key"),
                }
            )
        return pd.DataFrame(rows)

    def histories(self, paper: str, group: str | None = None) -> pd.DataFrame:
        """One row per (arm, seed, epoch) of the training log."""
        rows = []
        for arm, cfg, res in self._runs(paper, group):
            for h in res.history:
                rows.append({"paper": arm.paper, "group": arm.group, "arm": arm.name, "seed": cfg.seed, **h})
        return pd.DataFrame(rows)


def _collapse_columns(record) -> dict:
    """``collapsed`` (True / False) and its reason, from the
    run's validation record (``coherent_itr.health.is_collapsed``; the same check the tuner uses), and the
    validation RSUM at the selected checkpoint (``selected_val_rsum``; the ledger's failure rule,
    :func:`reproduce.protocol.claim_rows.run_failures`)."""
    collapsed, reason = trials.default_is_collapsed(trials.validation_view(record))
    val = (record.get("health") or {}).get("val_rsum")
    return {
        "collapsed": collapsed,
        "collapse_reason": reason,
        "selected_val_rsum": float(val) if val is not None else float("nan"),
    }


def paired_effect(df: pd.DataFrame, metric: str, arm_a: str, arm_b: str) -> list[float]:
    """Per-seed ``metric(arm_a) − metric(arm_b)``, paired by seed (seeds present in both arms)."""
    a = df[df.arm == arm_a].set_index("seed")[metric]
    b = df[df.arm == arm_b].set_index("seed")[metric]
    common = sorted(set(a.index) & set(b.index))
    return [float(a[s] - b[s]) for s in common]


def data_warnings(data: str) -> list[str]:
    """What loading data set ``data`` warns about, each message once, for the data card (06_data) to
    report in prose while the other notebooks load silently (:class:`Study`): on Flickr8k, captions of
    images in no split, malformed judgement lines, missing judgement files, with the release folder
    written ``$FLICKR8K_DIR``; nothing on the synthetic world."""
    if data != "flickr8k":
        return []

    root = flickr8k.flickr8k_dir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", flickr8k.Flickr8kWarning)
        flickr8k.flickr8k_index(root)
        for kind, fname in (("expert", flickr8k.EXPERT_FILE), ("crowd", flickr8k.CROWD_FILE)):
            if (root / fname).is_file():
                flickr8k.read_judgements(root / fname, kind, "warn")
            else:
                warnings.warn(
                    f"{root / fname} does not exist: the {kind} judgements are left out", flickr8k.Flickr8kWarning
                )
    msgs = [str(w.message) for w in caught if issubclass(w.category, flickr8k.Flickr8kWarning)]
    return list(dict.fromkeys(m.replace(str(root), "$FLICKR8K_DIR") for m in msgs))

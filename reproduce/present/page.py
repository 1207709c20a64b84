"""What every paper notebook starts with and ends with: one call, one object.

    from reproduce.present.page import start
    pg = start("bcls", profile, data)      # plotting style, the Study, the yardstick, a header line
    df = pg.results("table8")              # Study.results: one row per run of the group
    pg.claim("B3", "Table VIII", "…", "rsum", "Triplet-HN vs Kendall SW-HS alone", effects)
    pg.finish()                            # + the primary rows by claim id, written; effects table shown

A notebook declares what to show and draws it; the effects of its claims come either from
:meth:`Page.claim` (secondary / notebook-measured rows, per-seed effects) or — for every claim whose
primary contrast is a difference of two arms — from :func:`reproduce.protocol.claim_rows.primary_row`, which
:meth:`Page.finish` adds by claim id (the notebook never retypes a primary contrast). Verdicts are
decided once, for all of a paper's claims together (simultaneous intervals), by the ledger (``results/claims.md``):
the notebook shows effects and intervals, never its own verdict.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from reproduce.spec import labels, power_seeds

from reproduce.present import qualitative, report, view_runs
from reproduce.spec import claims as registry
from reproduce.protocol.claim_rows import notebook_failure_cells, per_query_of, primary_row
from reproduce.spec.labels import in_text
from reproduce.protocol.claim_files import ClaimResult, write_claims
from reproduce.spec.tables import fmt_num
from reproduce.spec.paths import for_papers, notebook_paths
from reproduce.protocol.study import Study
from reproduce.spec.tables import md_cell
from reproduce.present.tuning_tables import health_sentences


def seed_span(seeds) -> str:
    """``[0, 1, 2, 3, 4]`` → ``"0–4"``; seeds that are not consecutive are listed (``"0, 2, 5"``)."""
    seeds = sorted(int(x) for x in seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


DATA_NAMES = {"synthetic": "synthetic", "flickr8k": "Flickr8k"}  # a data set as a figure title names it

# What each figure of a paper notebook compares, by the stem of its file (``<results>/<paper>/<stem>_<data>.png``): the
# one-line title is this and the data set (:func:`figure_title`); the seeds and the profile go into the footer and the
# caption. tests/reproduce/present/test_figure_layout.py draws every one of them.
FIGURE_TITLES = {
    "bcls": {
        "fig4": "Fig. 4 analogue — Triplet-HN vs Triplet-SN vs BCLS",
        "fig5ab": "Fig. 5a–b analogue — α sweep at β = 0.1",
        "fig5cd": "Fig. 5c–d analogue — β sweep at α = 0.2",
    },
    "ladder": {
        "table1_cs": "Tables I/III analogue — pseudo labels vs independent yardstick",
        "beta2": "Tables IV/V analogue — weight β₂ of the second ladder",
        "levels": "Tables VI/VII analogue — number of ladder levels L",
        "lminmax": "Tables VIII/IX analogue — k-means bounds of the adaptive ladder",
        "fig6": "Fig. 6 analogue — relevance ladders in training batches",
        "theta_calibration": "Relevance against the thresholds θ",
    },
    "sam": {
        "fig_fraction": "SAM Tables 2–3 analogue — ± SAM vs share of training images",
        "fig_grid": "SAM Tables 4–5 analogue — τ × sampling × keep-triplet",
        "fig_margins": "SAM Eq. 7 — margins of random pairs",
        "fig3": "SAM Fig. 3 analogue — R@5 vs Semantic Recall@5 as m grows",
    },
    "listwise": {
        "table5_7": "Tables V–VII analogue — the three losses",
        "fig5": "Fig. 5 analogue — early convergence",
        "fig6": "Fig. 6 analogue — NDCG-hat vs NDCG in training, τ = 1e-2",
        "fig7": "Fig. 7 analogue — NDCG-hat approximation error",
        "fig8": "Fig. 8 analogue — τ sweep",
        "fig9": "Fig. 9 analogue — τ sweep, mAP@R",
    },
    "overview": {
        "x1_forest": "X1 — test RSUM of every loss family",
        "x2": "X2 — pseudo label vs independent yardstick",
    },
}


def data_name(data: str) -> str:
    """The data set as a reader reads it in a figure title (``flickr8k`` → ``Flickr8k``)."""
    return DATA_NAMES.get(data, data)


def figure_title(what: str, data: str) -> str:
    """A figure's one-line title: what it compares and on which data set (``"Fig. 8 analogue — τ sweep"`` →
    ``"Fig. 8 analogue — τ sweep, Flickr8k"``); the seeds and the profile go into its footer and caption
    (:func:`setup_line`), not here."""
    return f"{what}, {data_name(data)}"


def setup_line(data: str, profile: str, seeds, sweep_seeds=None, seed0_sweeps: bool = False, most: int = 0) -> str:
    """One line naming data set, profile and seeds, for captions and figure footers: the seeds of the main and
    primary arms and — where the profile gives them fewer (:meth:`Profile.seeds_for`) — those of the other sweep
    points (``sweep_seeds``) and of the seed-0 sweeps, so that it never claims more seeds than a sweep's points have;
    with ``most`` (the most seeds the power analysis gave an arm: :mod:`reproduce.spec.power_seeds`) above the
    profile's, a note naming it."""
    seeds = [int(x) for x in seeds]
    fewer = []
    if sweep_seeds and [int(x) for x in sweep_seeds] != seeds:
        fewer.append(f"other sweep points {seed_span(sweep_seeds)}")
    if seed0_sweeps and seeds != [0]:
        fewer.append("seed-0 sweeps 0")
    more = f"; the arms a power analysis asked more of: up to {most} seeds" if most > len(seeds) else ""
    note = f"seeds {seed_span(seeds)}" + (f" ({'; '.join(fewer)})" if fewer else "") + more
    return f"{data}, profile {profile}, {note}"


YARDSTICK = {  # the relevance that is NOT a training signal of any loss, per data set kind
    True: ("expert", "Flickr8k expert judgements"),
    False: ("true", "true relevance r*"),
}


TUNING_HEADERS = {
    "rung_val_rsum": "val RSUM at the rung (%)",
    "went_on": "went on to the cap",
    "hardneg_cos": "hardest-negative cosine",
    "warmup_epochs": "warm-up epochs",
}


def _tuning_header(column: str) -> str:
    """A tuning-table column as a reader's header: the metric label, a tuning word, or the name in words with
    any metric key in it labelled (never a raw key such as ``rsum``, ``tests/test_committed_notebooks.py``)."""
    if labels.has_label(column):
        return labels.label(column)
    return TUNING_HEADERS.get(column) or labels.in_text(column.replace("_", " "))


@dataclass
class Page:
    paper: str
    notebook: str
    profile: str
    data: str
    study: object
    claims: list = field(default_factory=list)

    # --- what the data set offers -----------------------------------------------------------------
    @functools.cached_property
    def human(self) -> bool:
        """Whether the data set has human judgements (and no true relevance); asked of the splits once."""
        return self.study.splits().test.extras.get("expert") is not None

    @property
    def yard(self) -> str:
        """Metric-key suffix of the independent yardstick: ``expert`` (human judgements) or ``true``."""
        return YARDSTICK[self.human][0]

    @property
    def yard_name(self) -> str:
        return YARDSTICK[self.human][1]

    @property
    def out(self) -> Path:
        return self.study.results_dir

    @property
    def seeds(self) -> list[int]:
        return list(self.study.seeds)

    @property
    def setup(self) -> str:
        """One line naming data set, profile and seeds (captions, figure footers): :func:`setup_line`."""
        prof = self.study.profile
        return setup_line(self.data, self.profile, self.seeds, prof.sweep_seeds, bool(prof.seed0_groups), self.most)

    @property
    def main_setup(self) -> str:
        """The short line for a figure of the main arms only (every one of them has every seed): data set,
        profile and seeds, without the sweeps' fewer seeds (and with the power analysis's more)."""
        return setup_line(self.data, self.profile, self.seeds, most=self.most)

    @property
    def most(self) -> int:
        """The most seeds ``power_seeds.toml`` gives an arm of this paper (0: none; the seeds a power analysis asked
        for: :mod:`reproduce.spec.power_seeds`)."""
        prof = self.study.profile
        return power_seeds.most_of_paper(prof.name, self.data, self.paper, pilot=prof.pilot_only)

    @property
    def data_name(self) -> str:
        return data_name(self.data)

    def title(self, figure: str) -> str:
        """The one-line title of this paper's figure ``figure`` (a key of :data:`FIGURE_TITLES`) on this page's data
        set (:func:`figure_title`)."""
        return figure_title(FIGURE_TITLES[self.paper][figure], self.data)

    @property
    def ours(self) -> str:
        """Label of our rows beside a paper's in a side-by-side table."""
        return f"ours: {self.data}, VSE++ GRU-{self.study.profile.model.get('text_hidden')} ({self.profile})"

    def results(self, group: str | None = None) -> pd.DataFrame:
        return self.study.results(self.paper, group)

    def tuning_table(self, show: bool = True) -> pd.DataFrame:
        """The paper's tuning table: every main arm × grid setting with its validation RSUM,
        epochs, health and the choice; saved as ``<results>/<paper>/tuning_<data>.{csv,md}``."""
        t = self.study.tuning_table(self.paper)
        view = t.drop(columns=["also", "status"], errors="ignore").assign(
            collapsed=lambda d: d["collapsed"].map({True: f"{report.COLLAPSE_MARK} yes", False: "no"}).fillna("?"),
            chosen=lambda d: d["chosen"].map({True: "✓", False: ""}),
        )
        cap = (
            f"Tuning ({self.data}, profile {self.profile}, seed 0): every main arm × setting on the "
            "validation split; val RSUM (%) at the selected checkpoint; ✓ = the setting all seeds then train "
            "(best validation RSUM, collapsed settings last, ties → smaller lr, then no warm-up; kept only if "
            "the arm's other seeds are healthy too — other seeds — else the next one). " + report.collapse_note()
        )

        words = health_sentences(t) if {"other_seeds", "collapsed", "chosen"} <= set(t.columns) else []
        if words:
            cap += "\n\n" + "\n".join(f"* {w}" for w in words)

        view = report.readable(view).rename(columns=_tuning_header)
        report.save_table(t, self.out, self.paper, f"tuning_{self.data}", cap, view.set_index(view.columns[0]))
        if show:
            display(Markdown(cap + "\n\n" + report.markdown_table(view, index=False)))
        return t

    def qualitative(self, arms: list[str], n: int = 3, k: int = 5, show: bool = True):
        """The paper's qualitative figure, in the style of BCLS Figs. 6–7 / CVSE++ Figs. 4–5 / listwise
        Fig. 10: the photo (when the data set has photos) and the top-``k`` captions under each of ``arms``
        (seed 0) for the ``n`` test images where the first two arms disagree most, each caption with its
        Sentence-BERT relevance and, when judged, its expert score (:mod:`reproduce.present.qualitative`). Saved as
        ``<results>/<paper>/qualitative_<data>.{png,svg}``; from cached embeddings, no training."""
        fig, picked = qualitative.figure_disagreement(view_runs.study_views(self.study, self.paper, arms), n=n, k=k)
        report.save_figure(fig, self.out, self.paper, f"qualitative_{self.data}")
        if show:
            plt.show()
        return picked

    # --- claims ----------------------------------------------------------------------------------
    def claim(
        self,
        cid,
        source,
        statement,
        metric,
        arms,
        effects,
        note="",
        kind="direction",
        tolerance=None,
        role="",
        failures: dict | None = None,
    ) -> None:
        """A notebook-measured row of claim ``cid`` (per-seed ``effects`` oriented so the claim predicts > 0);
        ``failures``: its cells ``seeds``, ``failed_seeds``, ``failures``
        (:func:`reproduce.protocol.claim_rows.failure_cells`; a primary row without them gets them in
        :meth:`finish`)."""
        c = registry.claim(cid)  # an unknown id is an error here, not a silent extra row
        if role == "primary":  # a notebook-measured primary: the registry's statement, never a retyped one
            if c.primary.measure != "notebook":
                raise ValueError(f"{cid}: its primary contrast is two arms; Page.finish adds it by claim id")
            statement = c.primary.statement
        self.claims.append(
            ClaimResult(
                cid,
                c.paper,
                source,
                statement,
                metric,
                self.data,
                arms,
                list(effects),
                kind=kind,
                tolerance=tolerance,
                notebook=self.notebook,
                note=note,
                role=role,
                failures=dict(failures or {}),
            )
        )

    def primary_rows(self) -> list[dict]:
        """The primary row of every claim of this paper whose primary contrast is two arms, by claim id,
        with the test images' variance for RSUM contrasts (:func:`reproduce.protocol.claim_rows.primary_row`)."""
        rows, ioc = [], None
        for c in registry.CLAIMS.values():
            p = c.primary
            if c.notebook != self.notebook or p.measure != "arms":
                continue
            df = self.study.results(p.paper)
            pq = None
            if p.metric_for(self.data) == "rsum" and not isinstance(p.arm_a, tuple) and not isinstance(p.arm_b, tuple):
                if ioc is None:  # loaded once for every row and arm of the page
                    ioc = self.study.splits().test.image_of_caption
                pq = {a: per_query_of(self.study, p.paper, a, ioc) for a in (p.arm_a, p.arm_b)}
            rows.append(primary_row(c.id, self.data, df, per_query=pq, image_of_caption=ioc))
        return rows

    def notebook_rows(self) -> list[ClaimResult]:
        """The rows of :meth:`claim`, every notebook-measured primary with its failure cells: those the notebook
        passed, else the failed seeds of the arms its ``arms`` text names
        (:func:`reproduce.protocol.claim_rows.notebook_failure_cells`; the failure rule of ``docs/protocol.md``)."""
        if not any(r.role == "primary" and not r.failures for r in self.claims):
            return list(self.claims)
        try:
            runs = self.study.results(self.paper)
        except (KeyError, ValueError):  # a page without trained arms of its own (no runs to judge)
            runs = pd.DataFrame()
        return [
            replace(r, failures=notebook_failure_cells(runs, r.arms, len(r.effects)))
            if r.role == "primary" and not r.failures
            else r
            for r in self.claims
        ]

    def finish(self, show: bool = True) -> pd.DataFrame:
        """Write this notebook's claim file (its rows + the primary rows by claim id) and show the effects
        (no verdicts: the ledger decides them for all claims of the data set at once)."""
        df = write_claims([*self.notebook_rows(), *self.primary_rows()], self.out, self.paper, self.data)
        if show:
            display(Markdown(effects_markdown(df)))
        return df


def effects_markdown(df: pd.DataFrame) -> str:
    """The claim rows a notebook wrote, effects and 95% intervals only, primary rows first."""
    d = df.copy()
    d["role"] = d.get("role", pd.Series([""] * len(d))).fillna("").replace("", "secondary")
    d = d.sort_values(["id", "role"], key=lambda s: s.map({"primary": 0}).fillna(1) if s.name == "role" else s)
    lines = [
        "| claim | role | contrast | metric | effect [95% interval] | seeds |",
        "|---|---|---|---|---|---|",
    ]

    for r in d.to_dict("records"):
        metric = in_text(r["metric"]) if isinstance(r["metric"], str) else r["metric"]
        cells = [r["id"], r["role"], r["arms"], metric]
        lines.append(
            "| " + " | ".join(md_cell(c) for c in cells) + f" | {fmt_num(r['effect'])} "
            f"[{fmt_num(r['ci_low'])}, {fmt_num(r['ci_high'])}] | {r['n_seeds']} |"
        )
    return (
        "\n".join(lines)
        + "\n\nEffects are oriented so that the paper's claim predicts > 0. Intervals here are over seeds "
        "(and, for RSUM primary rows, test queries); the **verdicts** are decided once for all claims of "
        "a paper together, with simultaneous intervals and half the paper's effect as δ, in `results/claims.md`.\n"
    )


def start(paper: str, profile: str | None = None, data: str = "synthetic", notebook: str | None = None) -> Page:
    """Plotting style, the :class:`~reproduce.protocol.study.Study` of ``profile`` on ``data``, and a header line."""
    profile = profile or os.environ.get("COHERENT_ITR_PROFILE", "default")
    report.setup_plotting()

    nb = notebook or notebook_paths(for_papers([paper]))[0].stem
    pg = Page(paper, nb, profile, data, Study(profile, data))
    print(f"profile={profile} data={data} seeds={pg.seeds} model={pg.study.profile.model}")
    return pg

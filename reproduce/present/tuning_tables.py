"""The tuning phase in words and files: the health of each main arm's choice as sentences (every notebook's
tuning section) and ``tuning_summary.{csv,md}`` of a data set, from the trials of
:func:`reproduce.protocol.tuning.families`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reproduce.protocol.tuning import TuningIncomplete, covered_papers, families, family_table, trial_rows
from reproduce.spec.profiles import HN_WARMUP_FIELD, Profile
from reproduce.spec.tables import markdown_table, round_significant


def _n_collapsed(other_seeds) -> int:
    text = other_seeds if isinstance(other_seeds, str) else ""
    return int(text.split("/", 1)[0]) if "/" in text else 0


def _setting_text(r) -> str:
    w = int(r[HN_WARMUP_FIELD])
    return f"lr {r['lr']:g}" + (f", {w} warm-up epoch{'s' if w > 1 else ''}" if w else "")


def health_sentences(table: pd.DataFrame) -> list[str]:
    """In words, for every main arm of a tuning table (:func:`tuning_table`) whose health is not plain: every
    setting collapsed on seed 0; every setting healthy on seed 0 collapsing on another seed; or the choice
    moved by the health check of the other seeds. Empty when every choice is healthy on every seed."""
    out = []
    for arm, g in table.groupby("arm", sort=False):
        chosen = g[g["chosen"]]
        if chosen.empty:
            continue
        c = chosen.iloc[0]
        healthy0 = g[~g["collapsed"].astype(bool)]
        if healthy0.empty:
            out.append(
                f"**{arm}**: every setting of the grid is collapsed on seed 0 ({len(g)} of {len(g)}); the arm is "
                "reported as collapsed (‡): a training failure at this budget, not a measurement of the method."
            )
            continue
        moved = healthy0[healthy0["other_seeds"].map(_n_collapsed) > 0]
        if _n_collapsed(c.get("other_seeds")) > 0:
            parts = "; ".join(f"{_setting_text(r)}: {r['other_seeds']}" for _, r in moved.iterrows())
            out.append(
                f"**{arm}**: every setting healthy on seed 0 collapses on another seed ({parts}); it keeps "
                f"{_setting_text(c)}, the one with the fewest, and its rows are marked ‡."
            )
        elif len(moved):
            parts = "; ".join(f"{_setting_text(r)} ({r['other_seeds']})" for _, r in moved.iterrows())
            out.append(
                f"**{arm}**: the health check of the other seeds rejected {parts}; {_setting_text(c)} is healthy "
                "on every seed and is the choice."
            )
    return out


def write_tuning_summary(results_dir, profile: Profile, cache, papers=None, is_collapsed=None) -> pd.DataFrame:
    """``<results_dir>/tuning_summary.{csv,md}``: every tuning problem of the data set, every setting, the
    choice (``results_dir`` is the profile's, e.g. ``results/`` or ``results/flickr8k/``). It covers ``papers``
    and every other paper whose tuning runs are all in ``cache`` (:func:`covered_papers`): a run of one paper
    (``--papers bcls``) does not drop the families of the others from a summary an earlier run wrote."""
    fams = {}
    if profile.tuning:
        wide = covered_papers(profile, papers, cache)
        try:
            fams = families(profile, wide, cache, is_collapsed=is_collapsed)
            papers = wide
        except TuningIncomplete:  # another paper's survivors of the rungs are not trained yet: the invoked papers alone
            fams = families(profile, papers, cache, is_collapsed=is_collapsed)
    df = pd.DataFrame(trial_rows(fams))
    out = Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "tuning_summary.csv", index=False)
    g = profile.tuning
    head = f"# Tuning summary — profile {profile.name}, data {profile.data}\n\n" + (
        f"Grid: lr ∈ {list(g.lr)} × warm-up ∈ {list(g.warmup_epochs)} epoch(s) for losses on hardest "
        f"negatives (lr only otherwise); seed {g.seed}; selection by validation RSUM at the selected "
        "checkpoint, collapsed runs last, ties → smaller lr, then no warm-up; a setting is kept only if the "
        "main arm's other seeds are healthy too (`other_seeds`), else the next one is tried."
        + (
            f" Successive halving: every setting first trains {g.rung_epochs} epochs after its warm-up "
            f"(`rung_val_rsum`); the better {g.keep:.0%} of each grid (rounded up, in the selection order) goes on "
            "to the cap (`went_on`), the others stop there and are never chosen."
            if g.rung_epochs
            else ""
        )
        + "\n\n"
        if g
        else "No tuning in this profile.\n\n"
    )
    fam = family_table(profile, papers)
    sweeps = fam[~fam["main"]].drop(columns=["main"])

    body = (markdown_table(round_significant(df), index=False) if len(df) else "") + "\n"
    if g and len(sweeps):
        body += (
            "\n## Families: the main arm whose tuned setting each other arm uses\n\n"
            "(`fixed`: a setting field the arm fixes itself, e.g. the warm-up sensitivity rows)\n\n"
            + markdown_table(sweeps, index=False)
            + "\n"
        )
    (out / "tuning_summary.md").write_text(head + body)
    return df

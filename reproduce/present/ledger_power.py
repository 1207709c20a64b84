"""``power.md``, the claims ledger's power at the papers' effects: per primary row with a paper effect its seed and
test-set sd, its power with the seeds it has and the seeds that would give POWER, then the Flickr8k rows that the one
fixed test split limits with the cheapest re-split plan and its price. The cells it shares with ``claims.md`` are
:mod:`reproduce.present.ledger_render`'s."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from reproduce.spec import claims as registry
from reproduce.protocol.ledger import ALPHA, POWER, SEED_CAP
from reproduce.protocol import resplit_plan
from reproduce.protocol.cost import minutes
from reproduce.protocol.claim_files import as_float
from reproduce.spec.profiles import GPU_COSTS
from reproduce.spec.tables import fmt_num
from reproduce.present.ledger_render import _cell, verdict_cell


def power_markdown(df: pd.DataFrame) -> str:
    """``power.md``: every primary direction row with a paper effect — its measured seed sd and test-set sd,
    its power at 1× the paper's effect with the seeds it has, and the seeds that would give POWER (cap
    SEED_CAP), or why no seed count does (rules in :mod:`reproduce.protocol.ledger`)."""
    prim = df[(df["role"] == "primary") & df["power"].map(as_float).map(np.isfinite)] if len(df) else df
    lines = [
        "# Power at the papers' effects",
        "",
        f"For each primary row with a paper effect: the chance that its interval (its family's, at 1 − {ALPHA:g}/m) "
        f"lies above 0 if the paper's effect were true, at the row's measured per-seed sd and test-set "
        f"variance, with the seeds it has; and the fewest seeds that give {POWER:.0%} (cap {SEED_CAP}). The test-set "
        "variance does not shrink with seeds: where it alone is too large, no seed count reaches "
        f"{POWER:.0%} and more test queries would be needed. The sd of 5 seeds is uncertain (its 95% interval spans "
        "about 0.6–2.9× the estimate): read the seed counts as a plan. Rule and formulas: "
        "`reproduce/protocol/ledger.py`.",
        "",
        "| id | data | metric | paper's effect | seeds | sd per seed | test-set sd | power now | seeds for "
        f"{POWER:.0%} | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in prim.to_dict("records"):
        n = as_float(r["seeds_for_power"])
        qv = as_float(r["query_var"])
        need = str(int(n)) if np.isfinite(n) else _cell(r.get("power_note"))
        lines.append(
            f"| {r['id']} | {r['dataset']} | {_cell(r['metric'])} | {fmt_num(r['paper_effect'])} | {r['n_seeds']} | "
            f"{fmt_num(r['seed_sd'])} | {fmt_num(math.sqrt(qv)) if np.isfinite(qv) and qv > 0 else '0'} | "
            f"{100 * as_float(r['power']):.0f}% | {need} | {verdict_cell(r)} |"
        )
    return "\n".join(lines) + "\n\n" + resplit_markdown(df)


def resplit_markdown(df: pd.DataFrame) -> str:
    """``power.md``'s section "More test images where they bind": the Flickr8k primary rows whose power the one
    fixed test split limits, each with the cheapest plan of K re-splits × n seeds that reaches POWER and its price
    (rule, model and price in :mod:`reproduce.protocol.resplit_plan`)."""
    rp = resplit_plan
    plans = rp.plan_rows(df, claims=registry.CLAIMS) if len(df) else []
    lines = [
        "## More test images where they bind",
        "",
        "Seeds do not shrink the test-set variance v of the one fixed 1,000-image Flickr8k test split; more test "
        f"images do. K splits of Flickr8k's {rp.IMAGES:,} images, each training n seeds of the row's arms at the tuned "
        "settings and pooled in the same crossed model, give the estimate the variance σ²/(K·n) + v/K. The standard "
        "dev set stays every split's (the tuning chose its settings on it); the other "
        f"{rp.IMAGES - rp.DEV_IMAGES:,} images form {rp.K_CAP} disjoint test folds of {rp.TEST_IMAGES:,}, one of them "
        f"the standard test set, so K ≤ {rp.K_CAP} and split 1 is the standard split, whose seeds are trained already.",
        "",
        "**Rule**: a primary Flickr8k row with a paper effect, a measured per-seed sd and v > 0 is listed when no seed "
        f"count within the cap reaches {POWER:.0%}, or when the test term is at least {rp.BINDS_SHARE:.0%} of the "
        "variance at its planned seeds. Its plan is the fewest runs (K ≥ "
        f"{rp.MIN_SPLITS}, n ≥ {rp.MIN_SEEDS}, n ≤ {SEED_CAP}; ties: fewer splits) with {POWER:.0%} power at 1× the "
        "paper's effect at the family's level, with the df of the seeds within the splits, K(n − 1). It assumes that "
        "the per-seed sd and v of the standard split hold on every split, and that a split's other training images "
        "do not move the effect (a split × method variance taken as 0: the one split cannot measure it, the K "
        "splits can).",
        "",
        "**Price**: runs = K × n × the row's arms (arms sharing a config count once); CPU worker-hours at the study's "
        "measured per-run costs (the default profile) plus ≈ "
        f"{minutes(rp.SPLIT_PREPARE_S)} of preparation a split (the image features and caption embeddings cover all "
        f"{rp.IMAGES:,} images already; each run builds its own vocabulary); GPU: wall time of the runs on "
        f"{GPU_COSTS['device']} (`GPU_COSTS`, optimistic by its own note; the machine's start and the data apart).",
        "",
    ]
    if not plans:
        return "\n".join([*lines, "No Flickr8k primary row of this ledger is limited by its test set."]) + "\n"
    lines += [
        "| id | data | test-set sd | seeds now | plan (K splits × n seeds) | runs | CPU worker-hours | GPU estimate | "
        "power of the plan |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in plans:
        plan = f"{p.k} × {p.n}" if p.reachable else p.why
        runs = f"{p.runs} ({p.trained} trained: the standard split's)" if p.runs else "—"
        cpu = f"{p.cpu_s / 3600:.1f}" if np.isfinite(p.cpu_s) else "—"
        gpu = f"≈ {minutes(p.gpu_s)}" if np.isfinite(p.gpu_s) else "—"
        power = f"{100 * p.power:.0f}%" if np.isfinite(p.power) else "—"
        lines.append(
            f"| {p.id} | {p.dataset} | {fmt_num(p.test_sd)} | {p.seeds_now} | {_cell(plan)} | {runs} | {cpu} | {gpu} | "
            f"{power} |"
        )
    for p in plans:
        if p.reachable and np.isfinite(p.power_now) and p.power_now >= POWER:
            lines += [
                "",
                f"{p.id} has {100 * p.power_now:.0f}% power with its {p.seeds_now} seeds already; its test set is "
                f"{100 * p.share:.0f}% of its variance at its planned seeds, and its plan is the re-split alternative.",
            ]
    lines += [
        "",
        '**These runs are not trained yet.** They wait for compute (a lent GPU; the issue "many runs as one '
        'model") and for a split parameter in the Flickr8k loader, which has none (`Config.data_seed` seeds the '
        "generated world only). Formulas and assumptions: `reproduce/protocol/resplit_plan.py`.",
    ]
    return "\n".join(lines) + "\n"

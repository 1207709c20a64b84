"""``python -m reproduce.protocol.power_plan --ledger results/claims.csv --profile default [--write]``: the seeds a
power analysis of the pilot asks for, per arm, written into ``reproduce/data/power_seeds.toml``.

The rule (``docs/protocol.md``, "Seeds beyond the pilot"), stated before any run it adds is trained:

* Every **primary** row of the ledger with a paper effect whose 80 % power at 1× that effect is reachable within
  :data:`~reproduce.spec.power_seeds.SEED_CAP` seeds (its ``seeds_for_power``, :func:`reproduce.protocol.ledger.
  seeds_for_power`, from the pilot's per-seed sd and test-set variance) asks that many seeds of every arm its primary
  compares (an arm contrast's arms; every arm of the groups a notebook-measured primary is computed from).
* A row that no seed count within the cap brings to 80 % (the test set's own variance, or more than the cap) asks
  nothing: it stays at the pilot's seeds and the ledger tags it underpowered with that reason.
* An arm trains the most seeds any row asks of it on that data set, never fewer than its pilot seeds; only arms that
  gain seeds are written.

The pilot is the ledger given (its path and sha256 go into the file). The added seeds are 0 … n − 1 beyond the
pilot's, trained at the setting the pilot's tuning chose (the health check reads the pilot seeds only). With
``--keep`` the file's earlier plan for the profile stays in force where it gives an arm more seeds (planned seeds are
never taken back): each arm trains the larger of the two, and the file names both ledgers. ``--data`` derives the
tables of some data sets only (a pilot complete on one data set), and the file keeps the others' as they are.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from pathlib import Path

import pandas as pd
from coherent_itr.io import atomic_write_text

from reproduce.spec import claim_data, experiments, power_seeds
from reproduce.spec.profiles import PROFILES, profile_for


def primary_arms(claim, profile) -> list[experiments.Arm]:
    """The arms ``claim``'s primary compares under ``profile``: its arm contrast's, or every arm of its groups."""
    p = claim.primary
    if not p.paper:
        return []
    names = p.arm_names() if p.measure == "arms" else set()
    return [a for a in experiments.arms(p.paper, profile) if a.name in names or a.group in p.arm_groups]


def seed_plan(ledger: pd.DataFrame, profile_name: str, claims=None) -> tuple[dict[str, dict[str, int]], pd.DataFrame]:
    """``({data set: {"paper/arm": seeds}}, rows)`` by the module's rule from the ledger ``ledger`` (``claims.csv``);
    ``rows``: each primary row with a paper effect, the seeds it asks (0: none) and why."""
    claims = claims or claim_data.load().claims
    need = {"id", "role", "dataset", "paper_effect", "seeds_for_power", "power_note"}
    missing = need - set(ledger.columns)
    if missing:
        raise ValueError(f"the ledger has no column(s) {sorted(missing)}: expected the study's claims.csv")
    plan: dict[str, dict[str, int]] = {}
    rows = []
    for r in ledger[ledger.role == "primary"].itertuples():
        effect = float(r.paper_effect) if pd.notna(r.paper_effect) else math.nan
        if not math.isfinite(effect) or effect == 0 or r.id not in claims:
            continue
        n = float(r.seeds_for_power) if pd.notna(r.seeds_for_power) else math.nan
        profile = profile_for(profile_name, r.dataset)
        arms = primary_arms(claims[r.id], profile)
        asks = int(n) if math.isfinite(n) else 0
        if asks and not arms:
            why = "its primary names no arms (the notebook measures it): no seeds added"
        elif not asks:
            why = str(r.power_note) if pd.notna(r.power_note) and r.power_note else "no seed count"
        else:
            why = ""
        names = ", ".join(a.name for a in arms)
        rows.append({"id": r.id, "dataset": r.dataset, "seeds_for_power": asks, "arms": names, "why": why})
        for a in arms:
            if asks > len(a.pilot_seeds(profile)):
                key = f"{a.paper}/{a.name}"
                got = plan.setdefault(r.dataset, {})
                got[key] = max(got.get(key, 0), asks)
    return plan, pd.DataFrame(rows, columns=["id", "dataset", "seeds_for_power", "arms", "why"])


def added_runs(plan: dict[str, dict[str, int]], profile_name: str) -> dict[str, int]:
    """Per data set, the runs the plan adds (its arms' seeds beyond their pilot's; arms sharing a config count once)."""
    out = {}
    for data, arms in plan.items():
        profile = profile_for(profile_name, data)
        extra = set()
        for key, n in arms.items():
            paper, name = key.split("/", 1)
            arm = next(a for a in experiments.arms(paper, profile) if a.name == name)
            extra |= {json.dumps([arm.overrides, s], sort_keys=True, default=str) for s in range(n)} - {
                json.dumps([arm.overrides, s], sort_keys=True, default=str) for s in arm.pilot_seeds(profile)
            }
        out[data] = len(extra)
    return out


def keep_larger(earlier: dict[str, dict[str, int]], new: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """``{data set: {"paper/arm": seeds}}``: every arm of either plan at the larger of its two seed counts."""
    out = {data: dict(arms) for data, arms in earlier.items()}
    for data, arms in new.items():
        got = out.setdefault(data, {})
        for key, n in arms.items():
            got[key] = max(got.get(key, 0), n)
    return out


_SOURCE = re.compile(r"^# from (?P<source>.+)\n\[(?P<profile>[^.\]]+)\.(?P<data>[^\]]+)\]$", re.MULTILINE)


def sources_of(text: str) -> dict[tuple[str, str], str]:
    """``{(profile, data set): source}`` from the ``# from …`` line above each table of a ``power_seeds.toml``."""
    return {(m["profile"], m["data"]): m["source"] for m in _SOURCE.finditer(text)}


def toml_text(plans: dict[str, dict[str, dict[str, int]]], sources: dict) -> str:
    """``power_seeds.toml``: per profile its data sets' tables, each preceded by the ledger it came from
    (``sources``: by profile, or by (profile, data set))."""
    lines = [
        "# Seeds beyond the pilot's, per arm, that a power analysis of the pilot asked for",
        "# (reproduce/spec/power_seeds.py). Written by `python -m reproduce.protocol.power_plan`; the rule:",
        '# docs/protocol.md, "Seeds beyond the pilot".',
    ]
    for profile in sorted(plans):
        for data in sorted(plans[profile]):
            source = sources.get((profile, data)) or sources.get(profile, "an earlier ledger")
            lines += ["", f"# from {source}", f"[{profile}.{data}]"]
            lines += [f"{json.dumps(k, ensure_ascii=False)} = {n}" for k, n in sorted(plans[profile][data].items())]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reproduce.protocol.power_plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ledger", required=True, help="the pilot's claims.csv (results/claims.csv)")
    ap.add_argument("--profile", default="default", choices=sorted(PROFILES))
    ap.add_argument("--write", action="store_true", help=f"write the plan into {power_seeds.POWER_SEEDS_TOML.name}")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the file's earlier plan for the profile where it gives an arm more seeds (each arm: the larger)",
    )
    ap.add_argument(
        "--data",
        default=",".join(claim_data.DATASETS),
        help="the data sets whose tables are derived from this ledger (comma-separated); the file keeps the others'",
    )
    a = ap.parse_args(argv)
    sets = [d.strip() for d in a.data.split(",") if d.strip()]
    if not sets or set(sets) - set(claim_data.DATASETS):
        ap.error(f"--data {a.data!r}: expected {' and/or '.join(claim_data.DATASETS)}")
    path = Path(a.ledger)
    try:
        ledger = pd.read_csv(path)
        if "dataset" in ledger.columns:  # (seed_plan names the columns a ledger lacks)
            ledger = ledger[ledger["dataset"].isin(sets)]
        plan, rows = seed_plan(ledger, a.profile)
    except (OSError, ValueError) as exc:
        ap.exit(2, f"{ap.prog}: {path}: {exc}\n")
    print(rows.to_string(index=False) if len(rows) else "no primary row with a paper effect")
    target = power_seeds.POWER_SEEDS_TOML
    plans: dict[str, dict[str, dict[str, int]]] = {}
    for (profile, data), arms in power_seeds.load().items():
        plans.setdefault(profile, {})[data] = arms
    old_sources = sources_of(target.read_text(encoding="utf-8")) if target.is_file() else {}
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    source = f"the ledger {path} (sha256 {digest}…)"
    sources = {**old_sources, **{(a.profile, d): source for d in sets}}
    if a.keep:
        earlier = {d: arms for d, arms in plans.get(a.profile, {}).items() if d in sets}
        for data in earlier:
            was = old_sources.get((a.profile, data), "an earlier ledger")
            sources[(a.profile, data)] = f"{source}, keeping where larger the seeds of the plan from {was}"
        plan = keep_larger(earlier, plan)
    for data, n in added_runs(plan, a.profile).items():
        print(f"{data}: {len(plan[data])} arm(s) gain seeds, {n} run(s) added")
    if a.write:
        others = {d: arms for d, arms in plans.get(a.profile, {}).items() if d not in sets}
        plans[a.profile] = {**others, **plan}
        atomic_write_text(target, toml_text(plans, sources))
        print(f"written: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m reproduce.driver.code_identity [--freeze [FILE …]]``: the library's frozen code identity.

Without arguments: which frozen library files changed since the freeze and whether each edit is declared
(exit 1 when one is not). ``--declare FILE WHY``: record FILE's edit as keeping every number, with why
(``--devices cpu``: on the CPU only, e.g. an edit of a CUDA-only path: CUDA runs then hash the file as it is).
``--freeze``: freeze the code hash of every file set the study's runs execute (every
profile, both data sets, tuning runs included), of the evaluation code and of the CUDA-graph engine
(:data:`coherent_itr.cuda_graphs.ENGINE_FILES`); ``--freeze FILE …``: only the sets
holding those files (an edit that changes numbers: their runs train again, every other key stays).
See :mod:`coherent_itr.code_identity`.

The same for the code of the arrays a run archive carries for the views (:data:`VIEW_SETS`,
:mod:`reproduce.present.rankings`): ``--declare-view NAME WHY`` records the current source of the stored set NAME as
keeping every stored array; ``--freeze-view NAME``: its stored sets name the current code from now on (the archives
made before must be exported again for the views that read it).
"""

from __future__ import annotations

import argparse
import json
import sys

from coherent_itr import code_identity, cuda_graphs, runs

from reproduce.present import rankings
from reproduce.present.analyses import sndcg_error
from reproduce.protocol import tuning
from reproduce.spec import experiments
from reproduce.spec.profiles import PROFILES, profile_for


def study_file_sets() -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """The training file sets of every run any profile plans (tuning runs included), and the evaluation set."""
    sets = set()
    for name in PROFILES:
        for data in ("synthetic", "flickr8k"):
            p = profile_for(name, data)
            configs = experiments.plan(p) + (tuning.tuning_configs(p, None) if p.tuning is not None else [])
            sets |= {tuple(runs.training_files(c)) for c in configs}
    return sorted(sets), tuple(runs.evaluation_files())


# every stored set of a run archive's view arrays → the code that computes it (rankings.frozen_code's objs)
VIEW_SETS = {rankings.Ranking.NAME: lambda: rankings.RANKING_SOURCES, sndcg_error.FIG7B: sndcg_error.fig7b_sources}


def view_states() -> dict[str, str]:
    """Per stored set of :data:`VIEW_SETS`, its state (:func:`reproduce.present.rankings.code_state`)."""
    return {name: rankings.code_state(name, *sources())[0] for name, sources in VIEW_SETS.items()}


def _write_views(codes: dict) -> None:
    rankings.VIEW_CODE_FILE.write_text(json.dumps(codes, indent=1, sort_keys=True) + "\n")
    rankings.declared_codes.cache_clear()


def view_command(name: str, why: str | None) -> int:
    """``--declare-view NAME WHY`` (``why`` given) or ``--freeze-view NAME``."""
    if name not in VIEW_SETS:
        print(f"{name}: not a stored view set (those: {', '.join(VIEW_SETS)})", file=sys.stderr)
        return 2
    codes = dict(rankings.declared_codes())
    live = rankings.code_hash(*VIEW_SETS[name]())
    if why is None:
        before = (codes.get(name) or {}).get("code")
        codes[name] = {"code": live, "sources": {live: "frozen"}}
        again = f"; archives made under code {before} must be exported again" if before not in (None, live) else ""
        print(f"{name}: frozen at code {live}{again}")
    elif name not in codes:
        print(
            f"{name}: not frozen yet (python -m reproduce.driver.code_identity --freeze-view {name})", file=sys.stderr
        )
        return 2
    else:
        codes[name] = {**codes[name], "sources": {**codes[name]["sources"], live: why}}
        print(f"{name}: source {live} declared to keep every stored array (code {codes[name]['code']})")
    _write_views(codes)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reproduce.driver.code_identity", description=__doc__.split("\n")[2])
    ap.add_argument("--freeze", nargs="*", metavar="FILE", help="freeze again: every set, or the sets of these files")
    ap.add_argument(
        "--declare",
        nargs=2,
        metavar=("FILE", "WHY"),
        help="declare FILE's edit neutral: record its current sha256 and WHY every number of every run stays",
    )
    ap.add_argument(
        "--devices",
        metavar="TYPE[,TYPE]",
        help="with --declare: the device types (cpu, cuda) on which the edit keeps every number; default every one",
    )
    ap.add_argument(
        "--declare-view",
        nargs=2,
        metavar=("NAME", "WHY"),
        help="declare the edit of a stored view set's code neutral: its current source keeps every stored array",
    )
    ap.add_argument(
        "--freeze-view", metavar="NAME", help="freeze a stored view set's code again (an edit that changes it)"
    )
    args = ap.parse_args(argv)
    if args.declare_view or args.freeze_view:
        name, why = args.declare_view or (args.freeze_view, None)
        return view_command(name, why)
    if args.devices and not args.declare:
        ap.error("--devices goes with --declare")
    if args.declare:
        rel, why = args.declare
        ident = code_identity.load()
        if rel not in ident.get("files", {}):
            print(f"{rel}: not a frozen file (frozen: {len(ident.get('files', {}))} files)", file=sys.stderr)
            return 2
        entry = {"sha256": code_identity.file_sha256(rel), "why": why}
        if args.devices:
            devices = [d.strip() for d in args.devices.split(",") if d.strip()]
            if not devices or set(devices) - {"cpu", "cuda"}:
                ap.error(f"--devices {args.devices!r}: name cpu and/or cuda")
            entry["devices"] = devices
        ident.setdefault("neutral_edits", {})[rel] = entry
        code_identity.IDENTITY_FILE.write_text(json.dumps(ident, indent=1) + "\n")
        print(f"{rel}: edit declared neutral" + (f" on {', '.join(entry['devices'])} only" if args.devices else ""))
        return 0
    if args.freeze is None:
        changed = code_identity.changed_files()
        for rel, state in sorted(changed.items()):
            print(f"{rel}: {state}")
        print(f"{len(code_identity.load().get('sets', []))} frozen file sets; {len(changed)} file(s) changed since")
        views = view_states()
        for name, state in views.items():
            print(f"view set {name}: {state}")
        return 1 if {"undeclared", "missing"} & set(changed.values()) or {"undeclared"} & set(views.values()) else 0
    sets, evaluation = study_file_sets()
    only = set(args.freeze) or None
    engine = cuda_graphs.ENGINE_FILES  # the CUDA-graph engine a captured run's key names
    ident = code_identity.freeze([*sets, evaluation, engine], lambda s: runs.hash_files(runs.PACKAGE_DIR, s), only)
    code_identity.IDENTITY_FILE.write_text(json.dumps(ident, indent=1) + "\n")
    again = f" again for {sorted(only)}" if only else ""
    print(f"{code_identity.IDENTITY_FILE}: {len(ident['sets'])} file sets frozen{again}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

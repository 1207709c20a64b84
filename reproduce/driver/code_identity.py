"""``python -m reproduce.driver.code_identity``: the code lock (:mod:`coherent_itr.code_identity`) — its state and
its two verbs.

Without arguments: which locked library files changed since the freeze and whether each edit is accepted, and the
state of each stored view set's code (exit 1 when an edit is not accepted).

* ``--accept FILE WHY`` (``--devices cpu``: on the CPU only, e.g. an edit of a CUDA-only path: CUDA runs then hash
  the file as it is): runs the pins of every run that executes FILE on this machine
  (:func:`reproduce.driver.pins.engine_pins_for`, bit for bit against this CPU's own pins) and, when every one keeps
  its bits, records FILE's content as keeping every number; refused (exit 1, nothing written) when a pin moves, when
  no pin executes FILE or when this CPU has no pins of its own. ``--accept-view NAME WHY``: the same for the code of
  a stored view set (its pinned arrays).
* ``--bump FILE …``: every set holding those files takes the live hash as its label (an edit that changes numbers:
  their runs train again, every other key stays); ``--bump-view NAME``: a view set's code (the archives made before
  must be exported again for the views that read it). ``--bump`` alone freezes every set the study's runs execute
  (every profile, both data sets, tuning runs included), the evaluation code and the CUDA-graph engine
  (:data:`coherent_itr.cuda_graphs.ENGINE_FILES`).

Each acceptance and bump appends why to ``code_identity.log``. After a bump, pin again: ``python -m
reproduce.driver.pins``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from coherent_itr import code_identity, cuda_graphs, runs

from reproduce.driver import pins
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


def _views_with(name: str, entry: dict) -> None:
    ident = code_identity.load()
    code_identity.write({**ident, "views": {**ident.get("views", {}), name: entry}})


def view_command(name: str, why: str | None) -> int:
    """``--accept-view NAME WHY`` (``why`` given; its pinned arrays checked first) or ``--bump-view NAME``."""
    if name not in VIEW_SETS:
        print(f"{name}: not a stored view set (those: {', '.join(VIEW_SETS)})", file=sys.stderr)
        return 2
    codes = rankings.declared_codes()
    live = rankings.code_hash(*VIEW_SETS[name]())
    if why is None:
        before = (codes.get(name) or {}).get("code")
        _views_with(name, {"code": live, "sources": [live]})
        code_identity.log({"verb": "bump-view", "view": name, "code": live, "before": before})
        again = f"; archives made under code {before} must be exported again" if before not in (None, live) else ""
        print(f"{name}: frozen at code {live}{again}; pin again: python -m reproduce.driver.pins")
        return 0
    if name not in codes:
        print(f"{name}: not frozen yet (python -m reproduce.driver.code_identity --bump-view {name})", file=sys.stderr)
        return 2
    pinned = pins.load().get("views", {})
    moved = pins.views_moved(pinned, pins.compute_views(pins.view_pins_for(name)))
    if not pins.view_pins_for(name) or moved:
        print(f"{name}: not accepted — {moved.get(name, 'no pinned arrays check it')}", file=sys.stderr)
        return 1
    _views_with(name, {**codes[name], "sources": sorted({*codes[name]["sources"], live})})
    code_identity.log({"verb": "accept-view", "view": name, "source": live, "why": why, "pins": [name]})
    print(f"{name}: source {live} accepted as keeping every stored array (code {codes[name]['code']})")
    return 0


def accept(rel: str, why: str, devices: list[str] | None = None) -> int:
    """``--accept FILE WHY``: FILE's edit recorded as neutral when the pins of every run that executes it keep their
    bits on this machine; refused (1) otherwise, nothing written."""
    ident = code_identity.load()
    if rel not in ident.get("files", {}):
        print(f"{rel}: not a locked file (locked: {len(ident.get('files', {}))} files)", file=sys.stderr)
        return 2
    if code_identity.file_sha256(rel) == ident["files"][rel]:
        print(f"{rel}: as frozen; nothing to accept")
        return 0
    names = pins.engine_pins_for(rel)
    if not names:
        print(
            f"{rel}: no pin executes it on this machine, so nothing can check that the edit keeps every number: "
            f"bump it (--bump {rel}) or accept it where a pin runs it",
            file=sys.stderr,
        )
        return 1
    print(f"{rel}: running {len(names)} pin(s) that execute it: {', '.join(names)}")
    with tempfile.TemporaryDirectory() as d:
        moved, how = pins.check_engine(names, d, exact_only=True)
    if moved:
        print(f"{rel}: not accepted — numbers moved ({how}): {json.dumps(moved, indent=1)}", file=sys.stderr)
        return 1
    code_identity.write(code_identity.accepted(ident, rel, devices))
    event = {"verb": "accept", "file": rel, "sha256": code_identity.file_sha256(rel), "why": why}
    sig = pins.cpu_signature()
    code_identity.log({**event, **({"devices": devices} if devices else {}), "pins": names, "cpu": sig["cpu"]})
    print(f"{rel}: accepted ({how})" + (f" on {', '.join(devices)} only" if devices else ""))
    return 0


def bump(only: set[str] | None, why: str = "") -> int:
    """``--bump [FILE …]``: the sets holding those files (every set, with none) take their live hash as label."""
    sets, evaluation = study_file_sets()
    engine = cuda_graphs.ENGINE_FILES  # the CUDA-graph engine a captured run's key names
    ident = code_identity.freeze([*sets, evaluation, engine], lambda s: runs.hash_files(runs.PACKAGE_DIR, s), only)
    before = {tuple(s["files"]): s["hash"] for s in code_identity.load().get("sets", [])}
    moved = [s for s in ident["sets"] if before.get(tuple(s["files"])) != s["hash"]]
    code_identity.write(ident)
    code_identity.log({"verb": "bump", "files": sorted(only) if only else "all", "sets_moved": len(moved), "why": why})
    again = f" again for {sorted(only)}" if only else ""
    print(
        f"{code_identity.IDENTITY_FILE}: {len(ident['sets'])} file sets locked{again}; {len(moved)} took a new label "
        f"(their runs train again); pin again: python -m reproduce.driver.pins"
    )
    return 0


def status() -> int:
    changed = code_identity.changed_files()
    for rel, state in sorted(changed.items()):
        print(f"{rel}: {state}")
    print(f"{len(code_identity.load().get('sets', []))} locked file sets; {len(changed)} file(s) changed since")
    views = view_states()
    for name, state in views.items():
        print(f"view set {name}: {state}")
    return 1 if {"undeclared", "missing"} & set(changed.values()) or {"undeclared"} & set(views.values()) else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reproduce.driver.code_identity", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--accept",
        nargs=2,
        metavar=("FILE", "WHY"),
        help="accept FILE's edit as neutral: the pins of the runs that execute it must keep every bit on this machine",
    )
    ap.add_argument(
        "--devices",
        metavar="TYPE[,TYPE]",
        help="with --accept: the device types (cpu, cuda) on which the edit keeps every number; default every one",
    )
    ap.add_argument("--bump", nargs="*", metavar="FILE", help="new labels: for the sets of these files, or every set")
    ap.add_argument("--why", default="", help="with --bump: why the numbers change (goes to the log)")
    ap.add_argument("--accept-view", nargs=2, metavar=("NAME", "WHY"), help="accept the edit of a view set's code")
    ap.add_argument("--bump-view", metavar="NAME", help="a new label for a view set's code (an edit that changes it)")
    args = ap.parse_args(argv)
    if args.accept_view or args.bump_view:
        name, why = args.accept_view or (args.bump_view, None)
        return view_command(name, why)
    if args.devices and not args.accept:
        ap.error("--devices goes with --accept")
    if args.accept:
        devices = None
        if args.devices:
            devices = [d.strip() for d in args.devices.split(",") if d.strip()]
            if not devices or set(devices) - {"cpu", "cuda"}:
                ap.error(f"--devices {args.devices!r}: name cpu and/or cuda")
        return accept(*args.accept, devices)
    if args.bump is not None:
        return bump(set(args.bump) or None, args.why)
    return status()


if __name__ == "__main__":
    sys.exit(main())

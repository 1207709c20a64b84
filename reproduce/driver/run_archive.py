"""A portable run cache: every run of one machine in one compressed archive, merged into another machine's cache.

A GPU machine often lacks the notebook stack (Jupyter, papermill). It trains the plan
(``python -m reproduce --skip-notebooks --export-runs FILE``), and the archive carries the runs to a machine that
has it (``python -m reproduce --import-runs FILE``), whose notebooks then read them without training.

The archive's format, its import and the merge of archives are :mod:`coherent_itr.runs.archive`'s (what an archive
holds, how it is verified, its parts). This module is the export policy and the commands. An export holds every
training entry of the cache that the current code looks up on the exporting machine (entries of older code are left
out and counted), with every evaluation entry of those runs, and for each run as its ``train/<key>/arrays.npz``:

* its test embeddings with ``--export-embeddings all``; otherwise its per-query
  R@1/5/10 hits (``pq_i2t``, ``pq_t2i``: :func:`coherent_itr.per_query.per_query_recall`, what the ledger's
  test-set variance reads), a few kB instead of a few MB, and, for a run that a view of
  :data:`reproduce.spec.views.VIEWS` reads (``--export-embeddings views``, the default), what that view reads of it
  (:func:`view_arrays`: its top candidates per query, Fig. 7 b's errors; :mod:`reproduce.present.rankings`), a few
  hundred kB. A run that travels without its embeddings is evaluated first if it has no evaluation under the
  current metric code (a tuning run that may become a final one elsewhere): no other machine could evaluate it.

A CUDA run whose graph capture failed partway (:func:`coherent_itr.runs.capture_failure`; stored only by older code)
is left out of an export, an import and a merge, with its evaluations, and counted. ``python -m
reproduce.driver.run_archive --merge OUT IN [IN …]`` writes one archive of several archives of one machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from coherent_itr import data as data_mod
from coherent_itr import paths, runs
from coherent_itr.config import Config
from coherent_itr.io import load_npz
from coherent_itr.per_query import per_query_recall
from coherent_itr.runs import archive
from coherent_itr.runs.archive import ArchiveError

from reproduce.driver.arguments import EXPORT_EMBEDDINGS
from reproduce.protocol.study import Study
from reproduce.protocol import tuning
from reproduce.protocol.tuning import TuningIncomplete
from reproduce.present.analyses import sndcg_error
from reproduce.present.rankings import Ranking
from reproduce.spec.paths import ROOT
from reproduce.spec.views import VIEWS


def _npz_bytes(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------------------------
# Export
# ----------------------------------------------------------------------------------------------------------------
def current_entries(cache: runs.RunCache) -> tuple[list[tuple[str, Config, Path]], int, int]:
    """``([(key, config, training entry folder)], n_stale, n_fell_back)``: the verified training entries of
    ``cache`` whose key is the one the current code gives their config on this cache's machine; how many others
    were skipped; and how many of them were skipped as CUDA runs whose capture failed partway
    (:func:`coherent_itr.runs.capture_failure`: stored by older code)."""
    d = cache.root / "train"
    out, stale, fell_back = [], 0, 0
    for entry in sorted(d.iterdir()) if d.is_dir() else []:
        if entry.name.startswith(".") or runs.verify_entry(entry, runs.TRAIN_FILES) is not None:
            continue
        record = json.loads((entry / "record.json").read_text())
        if runs.capture_failure(record) is not None:
            fell_back += 1
            continue
        try:
            config = Config.from_dict(record["config"])
            key = runs.run_key(
                config, int(record.get("threads", cache.threads)), cache.machine, runs.record_engine(record)
            )
        except (KeyError, TypeError, ValueError):
            key = None
        if key != entry.name:
            stale += 1
            continue
        out.append((key, config, entry))
    return out, stale, fell_back


def _splits_of(config: Config, memo: dict):
    """The splits of ``config``'s data (loaded once per data set, scale and seed)."""
    k = (config.data, config.data_dir, config.data_scale, config.data_seed)
    if k not in memo:
        memo[k] = data_mod.load_splits(
            config.data, data_dir=config.data_dir, scale=config.data_scale, seed=config.data_seed, train_images="cached"
        )
    return memo[k]


def per_query_hits(arrays: dict, image_of_caption) -> dict:
    """``{"pq_i2t", "pq_t2i"}``: per-query R@1/5/10 hits (0/1, uint8) of a run's stored test embeddings."""
    pq = per_query_recall(arrays["test_img"], arrays["test_cap"], image_of_caption)
    return {f"pq_{d}": (pq[d] > 0).astype(np.uint8) for d in ("i2t", "t2i")}


def _evaluated_here(cache: runs.RunCache, key: str, config: Config, splits) -> bool:
    """Evaluate the run ``key`` of ``cache`` under the current metric code, before its test embeddings are left
    out of an archive (an importing machine could never evaluate it). ``False`` when ``cache`` does not look it
    up under ``key`` (its record names another thread count): it then travels with its embeddings."""
    if cache.train_key(config) != key:
        return False
    return cache.load(config, splits=splits) is not None


def export_runs(
    out: str | Path,
    cache: runs.RunCache | None = None,
    keep_embeddings=None,
    part_bytes: int = archive.PART_BYTES,
    progress: bool = False,
    datasets=None,
    views: dict | None = None,
) -> dict:
    """Write every current run of ``cache`` (of the data sets ``datasets`` only, when given) into the archive
    ``out`` (see the module docstring).

    ``keep_embeddings``: the training keys whose test embeddings travel (``None``: every run's); a run whose test
    split cannot be loaded here (no ``$FLICKR8K_DIR``) keeps them too. ``views``: ``{training key: ViewNeed}``
    (:func:`view_needs`): a run among them that travels without its embeddings carries what the views read of it
    (:func:`view_arrays`). A run that travels without them and has no evaluation under the current metric code is
    evaluated here first (stored in ``cache``): an importing machine could never evaluate it. Returns a summary:
    ``runs``, ``evaluations``, ``evaluated`` (runs evaluated for the export), ``with_embeddings``, ``with_views``
    (runs that carry what the views read instead), ``stale`` (entries of older code, left out), ``fell_back`` (CUDA
    runs whose capture failed partway, left out), ``bytes``, ``files`` (the archive, or its parts), ``machine``,
    ``unloadable`` (data set → why some of its runs kept their embeddings: no test split, or what the views read
    cannot be computed here)."""
    cache = cache or runs.RunCache()
    entries, stale, fell_back = current_entries(cache)
    if datasets is not None:
        wanted = set(datasets)
        entries = [e for e in entries if e[1].data in wanted]
    if not entries:
        raise ArchiveError(
            f"run cache {cache.root}: no run of the current code"
            + (f" of {', '.join(datasets)}" if datasets is not None else "")
            + f" to export ({stale} older entries"
            + (f", {fell_back} CUDA runs whose graph capture failed partway" if fell_back else "")
            + ")"
        )
    machine: dict = {}
    for _, c, _ in entries:  # one record for all: a Flickr8k run adds its data form, the others have none
        for k, v in (cache.machine or runs.local_numerics(c)).items():
            if machine.setdefault(k, v) != v:
                raise ArchiveError(f"run cache {cache.root}: runs of several machines ({k}: {machine[k]}, {v})")
    members: dict[str, bytes] = {}
    slim: dict[str, str] = {}
    unloadable: dict[str, str] = {}  # data set → why some of its runs keep their embeddings
    evals = evaluated = with_views = 0
    views = views or {}
    by_run = _evaluations_by_run(cache)
    memo: dict = {}
    for key, config, entry in tqdm(entries, desc="export runs", unit="run", disable=not progress, leave=False):
        members[f"train/{key}/record.json"] = (entry / "record.json").read_bytes()
        arrays_bytes = (entry / "arrays.npz").read_bytes()
        already_slim = runs.is_slim(entry)  # imported without embeddings: it travels on as it came
        if keep_embeddings is None or key in keep_embeddings or already_slim:
            members[f"train/{key}/arrays.npz"] = arrays_bytes
            if already_slim:
                slim[key] = runs.embeddings_sha256(entry)
        else:
            try:
                splits = _splits_of(config, memo)
            except (FileNotFoundError, ValueError) as exc:  # its data set is not here: the run keeps its embeddings
                members[f"train/{key}/arrays.npz"] = arrays_bytes
                unloadable[config.data] = f"their test split is not here ({str(exc).splitlines()[0]})"
            else:
                current = cache.eval_path(config)
                had = current in by_run.get(key, [])
                if not had and not _evaluated_here(cache, key, config, splits):
                    members[f"train/{key}/arrays.npz"] = arrays_bytes  # cannot be evaluated here: keep them
                else:
                    if not had:
                        by_run.setdefault(key, []).append(current)
                        evaluated += 1
                    full = load_npz(io.BytesIO(arrays_bytes))
                    carried = per_query_hits(full, splits.test.image_of_caption)
                    try:
                        carried |= view_arrays(views[key], config, full, splits.test) if key in views else {}
                    except (FileNotFoundError, ValueError) as exc:  # e.g. no Sentence-BERT relevance here
                        members[f"train/{key}/arrays.npz"] = arrays_bytes
                        unloadable[config.data] = (
                            f"what the views read cannot be computed here ({str(exc).splitlines()[0]})"
                        )
                    else:
                        with_views += key in views
                        members[f"train/{key}/arrays.npz"] = _npz_bytes(carried)
                        slim[key] = archive.member_sha256(arrays_bytes)
        for ev in by_run.get(key, []):
            members[f"eval/{ev.name}/metrics.json"] = (ev / "metrics.json").read_bytes()
            evals += 1
    manifest = archive.manifest_of(
        machine,
        members,
        slim,  # key -> the sha256 of the arrays.npz it trained with (its evaluations name that one)
        library_source=runs.source_hash(),
        evaluation_code=runs.evaluation_code_hash(),
    )
    files = archive.write_archive(Path(out), manifest, members, part_bytes)
    return {
        "runs": len(entries),
        "evaluations": evals,
        "evaluated": evaluated,
        "with_embeddings": len(entries) - len(slim),
        "with_views": with_views,
        "stale": stale,
        "fell_back": fell_back,
        "bytes": sum(f.stat().st_size for f in files),
        "files": [str(f) for f in files],
        "machine": manifest["machine_id"],
        "unloadable": unloadable,
    }


def _evaluations_by_run(cache: runs.RunCache) -> dict[str, list[Path]]:
    d = cache.root / "eval"
    out: dict[str, list[Path]] = {}
    for ev in sorted(d.iterdir()) if d.is_dir() else []:
        if ev.name.startswith(".") or runs.verify_entry(ev, runs.EVAL_FILES) is not None:
            continue
        try:
            run = json.loads((ev / "metrics.json").read_text())["run_key"]
        except (OSError, ValueError, KeyError):
            continue
        out.setdefault(run, []).append(ev)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Import
# ----------------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------------
# The command line's two verbs (python -m reproduce --export-runs / --import-runs)
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class ViewNeed:
    """What the views read of one run (:data:`reproduce.spec.views.VIEWS`): the top ``ranks[query]`` candidates of
    each query, the stored sets ``arrays`` of an analysis, and the batch size its profile trains with (Fig. 7 b's)."""

    ranks: dict = field(default_factory=dict)
    arrays: set = field(default_factory=set)
    batch_size: int = 0

    def add(self, view, batch_size: int) -> None:
        for query, k in view.ranks.items():
            self.ranks[query] = max(k, self.ranks.get(query, 0))
        self.arrays |= set(view.arrays)
        self.batch_size = batch_size


def view_needs(profile: str, sets: list[str], cache: runs.RunCache) -> dict[str, ViewNeed]:
    """``{training key: ViewNeed}`` of every final run (at the tuned setting; the first seed or every seed, as the
    view reads them) of the arms of :data:`reproduce.spec.views.VIEWS`, on the data sets ``sets``. For an arm whose
    tuning is incomplete, those at every setting its tuning may choose (a full tuning run there is its seed-0 final
    run, which an importing machine's views would read). Arms that a profile does not have are skipped."""
    needs: dict[str, ViewNeed] = {}
    for data in sets:
        study = Study(profile, data, cache=cache, progress=False)
        batch_size = int(study.profile.model["batch_size"])
        for view in VIEWS.values():
            for paper, names in view.arms.items():
                for arm in study.arms(paper):
                    if arm.name not in names:
                        continue
                    try:
                        configs = study.configs(arm, train_missing=False)
                    except TuningIncomplete:
                        configs = tuning.candidate_configs(arm, study.arms(paper), study.profile)
                    for c in configs:
                        if not view.first_seed or c.seed == study.seeds[0]:
                            needs.setdefault(cache.train_key(c), ViewNeed()).add(view, batch_size)
    return needs


def view_arrays(need: ViewNeed, config: Config, arrays, test) -> dict:
    """What the views read of a run (``need``), computed from its test embeddings (``arrays``) on its ``test``
    split by the views' own functions: its :class:`~reproduce.present.rankings.Ranking` to the depth asked, and each
    stored set of an analysis (:data:`ARRAY_VIEWS`)."""
    out = {}
    if need.ranks:
        out |= Ranking.of_embeddings(arrays["test_img"], arrays["test_cap"]).to_arrays(need.ranks)
    for name in sorted(need.arrays):
        out |= ARRAY_VIEWS[name](need, config, arrays, test)
    return out


def _fig7b(need: ViewNeed, config: Config, arrays, test) -> dict:
    rel = sndcg_error.training_relevance(test)
    return sndcg_error.error_arrays(
        config.seed, arrays["test_img"], arrays["test_cap"], test, rel, batch_size=need.batch_size
    )


ARRAY_VIEWS = {sndcg_error.FIG7B: _fig7b}  # a stored set's name → what computes it from a run's embeddings


def committed_archives(profile: str, data_sets, folder: str | Path | None = None) -> dict[str, Path]:
    """``{data set: archive}``: the committed CPU run archive of each of ``data_sets`` that has one in ``folder``
    (default ``results/runs/``), named ``<data>-<profile>-cpu.tar.xz`` (or its parts)."""
    folder = Path(folder) if folder is not None else ROOT / "results" / "runs"
    out = {}
    for d in data_sets:
        f = folder / f"{d}-{profile}-cpu.tar.xz"
        if f.is_file() or f.with_name(f"{f.name}.part1").is_file():
            out[d] = f
    return out


def committed_machine(profile: str, data_sets, folder: str | Path | None = None) -> str:
    """The machine whose runs ``--runs-from committed`` reads: the one machine of the committed CPU archives of
    ``data_sets`` (:func:`committed_archives`). ``ValueError`` naming what to do when a data set has no archive
    or the archives name two machines."""
    found = committed_archives(profile, data_sets, folder)
    missing = [d for d in data_sets if d not in found]
    if missing:
        raise ValueError(
            f"--runs-from committed: no committed run archive of profile {profile} for {', '.join(missing)} "
            f"(results/runs/{missing[0]}-{profile}-cpu.tar.xz); train its runs on this machine instead: "
            f"`make retrain` (python -m reproduce --profile {profile})"
        )
    machines = {d: archive.archive_machine(f)["machine_id"] for d, f in found.items()}
    if len(set(machines.values())) > 1:
        raise ValueError(
            "--runs-from committed: the committed archives hold runs of different machines "
            f"({', '.join(f'{d}: {m}' for d, m in machines.items())}); name one with --runs-from MACHINE and the "
            "data set with --data"
        )
    return next(iter(machines.values()))


def read_runs_from(machine: str) -> None:
    """Make every run cache of this process and its children read the runs imported from ``machine``
    (``$COHERENT_ITR_RUNS_FROM``); ``ValueError`` naming the imported machines if there is none of that name."""
    runs.load_machine(paths.cache_dir(create=False), machine)
    os.environ[runs.RUNS_FROM_ENV] = machine


def export_command(args, sets: list[str]) -> int:
    """``--export-runs FILE``: 0 written, 1 nothing to write or too large (said on stderr)."""
    cache = runs.RunCache()
    keep = None if args.export_embeddings == "all" else set()
    views = view_needs(args.profile, sets, cache) if args.export_embeddings == "views" else {}
    try:
        only = getattr(args, "only_data", None)
        s = export_runs(
            args.export_runs,
            cache,
            keep_embeddings=keep,
            views=views,
            progress=not args.no_progress,
            datasets=[d for d in only.split(",") if d] if only else None,
        )
    except ArchiveError as exc:
        print(f"python -m reproduce: --export-runs: {exc}", file=sys.stderr)
        return 1
    print(
        f"reproduce: exported {s['runs']} runs ({s['with_embeddings']} with test embeddings, the others with "
        f"per-query hits, {s['with_views']} of them with what the views read) and {s['evaluations']} evaluations "
        f"of machine {s['machine']} into "
        f"{', '.join(s['files'])} ({s['bytes'] / 2**20:.1f} MiB)"
        + (f"; {s['evaluated']} runs evaluated first (no embeddings travel with them)" if s["evaluated"] else "")
        + (f"; {s['stale']} entries of older code left out" if s["stale"] else "")
        + _fell_back(s["fell_back"]),
        flush=True,
    )
    for data, why in s["unloadable"].items():
        print(f"reproduce: the {data} runs kept their test embeddings: {why}")
    return 0


def _fell_back(n: int) -> str:
    """What the commands print of the runs left out as CUDA runs whose capture failed partway (nothing for none)."""
    return f"; {n} CUDA runs whose graph capture failed partway left out" if n else ""


def import_command(args) -> int:
    """``--import-runs FILE``: 0 imported, 2 an unreadable or altered archive (nothing imported)."""
    try:
        s = archive.import_runs(args.import_runs)
    except ArchiveError as exc:
        print(f"python -m reproduce: --import-runs: {exc}", file=sys.stderr)
        return 2
    differs = "; ".join(f"{k}: {there} there, {here} here" for k, (there, here) in s.get("differs", {}).items())
    use = (
        "they are this machine's own keys"
        if s["local"]
        else f"they were trained on another machine ({differs or 'other numerics'}), so this machine's own runs have "
        "other keys"
    ) + (
        f"; read them with `python -m reproduce --runs-from {s['machine']}` (or {runs.RUNS_FROM_ENV}={s['machine']}; "
        "`make reproduce` reads the committed CPU archives' machine on any machine: --runs-from committed); "
        "`make retrain` trains this machine's own"
    )
    print(
        f"reproduce: imported {s['runs']} runs and {s['evaluations']} evaluations from machine {s['machine']} into "
        f"{paths.cache_dir()} ({s['kept']} already there" + _fell_back(s["fell_back"]) + f"); {use}",
        flush=True,
    )
    return 0


def merge_command(out: str, inputs: list[str]) -> int:
    """``--merge OUT IN [IN …]``: 0 written, 2 an unreadable, altered or foreign archive (nothing written)."""
    try:
        s = archive.merge_archives(out, inputs)
    except ArchiveError as exc:
        print(f"python -m reproduce.driver.run_archive: --merge: {exc}", file=sys.stderr)
        return 2
    print(
        f"reproduce: merged {len(inputs)} archives of machine {s['machine']} into {', '.join(s['files'])}: "
        f"{s['runs']} runs, {s['evaluations']} evaluations ({s['bytes'] / 2**20:.1f} MiB); "
        f"{s['duplicates']} runs found again in a later archive kept from the first" + _fell_back(s["fell_back"]),
        flush=True,
    )
    return 0


def main(argv=None) -> int:
    """``python -m reproduce.driver.run_archive --export FILE [--profile P] [--data D] [--only-data D]``: export the
    cache's runs without training (e.g. after a time-limited training on a GPU machine); ``--merge OUT IN [IN …]``:
    one archive of several archives of one machine (e.g. two GPU sessions')."""
    ap = argparse.ArgumentParser(prog="python -m reproduce.driver.run_archive", description=main.__doc__)
    verb = ap.add_mutually_exclusive_group(required=True)
    verb.add_argument("--export", dest="export_runs", metavar="FILE")
    verb.add_argument("--merge", nargs="+", metavar=("OUT", "IN"), help="write OUT from the archives IN …")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--data", default="synthetic,flickr8k", help="data sets whose view arms keep their embeddings")
    ap.add_argument("--export-embeddings", choices=EXPORT_EMBEDDINGS, default="views")
    ap.add_argument(
        "--only-data",
        default=None,
        help="export only the runs of these data sets (comma-separated; default: every run), e.g. one archive each",
    )
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.merge is not None:
        if len(args.merge) < 2:
            ap.error("--merge OUT IN [IN …]: name the archive to write and at least one to read")
        return merge_command(args.merge[0], args.merge[1:])
    sets = [d for d in args.data.split(",") if d]
    if "flickr8k" in sets and not os.environ.get(paths.FLICKR8K_ENV):
        sets.remove("flickr8k")  # no Flickr8k here: none of its runs can be in this cache's plan
    return export_command(args, sets)


if __name__ == "__main__":
    sys.exit(main())

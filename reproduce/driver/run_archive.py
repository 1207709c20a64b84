"""A portable run cache: every run of one machine in one compressed archive, merged into another machine's cache.

A GPU machine often lacks the notebook stack (Jupyter, papermill). It trains the plan
(``python -m reproduce --skip-notebooks --export-runs FILE``), and the archive carries the runs to a machine that
has it (``python -m reproduce --import-runs FILE``), whose notebooks then read them without training.

What an archive holds (``tar`` compressed with ``xz``), for every training entry of the cache that the current
code looks up on the exporting machine (entries of older code are left out and counted):

* ``train/<key>/record.json`` — config, history, health, timing, as stored;
* ``train/<key>/arrays.npz`` — a run's test embeddings with ``--export-embeddings all``; otherwise its per-query
  R@1/5/10 hits (``pq_i2t``, ``pq_t2i``: :func:`coherent_itr.per_query.per_query_recall`, what the ledger's
  test-set variance reads), a few kB instead of a few MB, and, for a run that a view of
  :data:`reproduce.spec.views.VIEWS` reads (``--export-embeddings views``, the default), what that view reads of it
  (:func:`view_arrays`: its top candidates per query, Fig. 7 b's errors; :mod:`reproduce.present.rankings`), a few
  hundred kB. A run that travels without its embeddings is evaluated first if it has no evaluation under the
  current metric code (a tuning run that may become a final one elsewhere): no other machine could evaluate it;
* ``eval/<key>/metrics.json`` — every evaluation entry of those runs;
* ``manifest.json`` — the exporting machine's numerics (:func:`coherent_itr.runs.local_numerics`: torch version,
  device, TF32), the library's source hash, and the sha256 of every other member.

Import verifies every member against the manifest before anything is written, writes each entry atomically
(an entry already present and valid is kept), and records the machine
(:func:`coherent_itr.runs.save_machine`). Runs trained elsewhere keep that machine's keys: a cache reads them
when ``$COHERENT_ITR_RUNS_FROM`` (or ``--runs-from``) names that machine, and then never trains or re-evaluates a
run under them (:class:`coherent_itr.runs.ImportedRunMissing` says which run is missing and why). Members are
read by name, never extracted: a name outside ``manifest.json``, ``train/<key>/…`` and ``eval/<key>/…`` is refused.

A CUDA run whose graph capture failed partway (:func:`coherent_itr.runs.capture_failure`; stored only by older code)
is left out of an export, an import and a merge, with its evaluations, and counted. ``python -m
reproduce.driver.run_archive --merge OUT IN [IN …]`` writes one archive of several archives of one machine.

An archive larger than ``part_bytes`` (16 MiB: what one file back from a GPU machine may weigh) is written as
``FILE.part1``, ``FILE.part2``, …; import takes ``FILE`` or any of its parts and reads them all.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from coherent_itr import data as data_mod
from coherent_itr import runs
from coherent_itr.config import Config
from coherent_itr.io import load_npz
from coherent_itr.per_query import per_query_recall

from reproduce.driver.arguments import EXPORT_EMBEDDINGS
from reproduce.protocol.study import Study
from reproduce.protocol import tuning
from reproduce.protocol.tuning import TuningIncomplete
from reproduce.present.analyses import sndcg_error
from reproduce.present.rankings import Ranking
from reproduce.spec.paths import ROOT
from reproduce.spec.views import VIEWS

FORMAT = 1
PART_BYTES = 16 * 2**20
MAX_PARTS = 8
MEMBER = re.compile(
    r"^(?:manifest\.json|train/[0-9a-f]{20}/(?:record\.json|arrays\.npz)|eval/[0-9a-f]{20}/metrics\.json)$"
)


class ArchiveError(ValueError):
    """An archive that cannot be imported: the message names the file and what is wrong."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
    part_bytes: int = PART_BYTES,
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
                        slim[key] = _sha(arrays_bytes)
        for ev in by_run.get(key, []):
            members[f"eval/{ev.name}/metrics.json"] = (ev / "metrics.json").read_bytes()
            evals += 1
    manifest = {
        "format": FORMAT,
        "machine": machine,
        "machine_id": runs.machine_id(machine),
        "library_source": runs.source_hash(),
        "evaluation_code": runs.evaluation_code_hash(),
        "created_unix": int(time.time()),
        "slim": slim,  # key -> the sha256 of the arrays.npz it trained with (its evaluations name that one)
        "members": {name: _sha(data) for name, data in members.items()},
    }
    files = _write_parts(Path(out), manifest, members, part_bytes)
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


def _write_parts(out: Path, manifest: dict, members: dict[str, bytes], part_bytes: int) -> list[Path]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=6) as tar:
        for name, data in [("manifest.json", json.dumps(manifest, sort_keys=True).encode()), *sorted(members.items())]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    blob = buf.getvalue()
    out.parent.mkdir(parents=True, exist_ok=True)
    for old in out.parent.glob(f"{out.name}.part*"):
        old.unlink()
    if len(blob) <= part_bytes:
        out.write_bytes(blob)
        return [out]
    n = -(-len(blob) // part_bytes)
    if n > MAX_PARTS:
        raise ArchiveError(
            f"{out}: the archive is {len(blob) / 2**20:.1f} MiB, more than {MAX_PARTS} parts of "
            f"{part_bytes / 2**20:.0f} MiB; export fewer embeddings (--export-embeddings views or none)"
        )
    if out.exists():
        out.unlink()
    files = []
    for i in range(n):
        f = out.with_name(f"{out.name}.part{i + 1}")
        f.write_bytes(blob[i * part_bytes : (i + 1) * part_bytes])
        files.append(f)
    return files


# ----------------------------------------------------------------------------------------------------------------
# Import
# ----------------------------------------------------------------------------------------------------------------
def _read_parts(path: Path) -> tuple[bytes, list[Path]]:
    m = re.match(r"^(.*)\.part\d+$", path.name)
    base = path.with_name(m.group(1)) if m else path
    if base.is_file():
        return base.read_bytes(), [base]
    parts = sorted(base.parent.glob(f"{base.name}.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1] or 0))
    if not parts:
        raise ArchiveError(f"{path}: no such archive (nor {base.name}.part1, …)")
    numbers = [int(p.name.rsplit("part", 1)[1]) for p in parts]
    if numbers != list(range(1, len(parts) + 1)):
        raise ArchiveError(f"{base}: parts {numbers} found; expected 1…{max(numbers)} without a gap")
    return b"".join(p.read_bytes() for p in parts), parts


def read_archive(path: str | Path) -> tuple[dict, dict[str, bytes]]:
    """``(manifest, {member name: bytes})`` of an archive, every member verified against the manifest."""
    path = Path(path)
    blob, files = _read_parts(path)
    where = files[0] if len(files) == 1 else f"{files[0]} (+{len(files) - 1} parts)"
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:xz") as tar:
            members = {}
            for info in tar:
                if not info.isfile() or not MEMBER.match(info.name):
                    raise ArchiveError(f"{where}: member {info.name!r} is not part of a run archive; nothing imported")
                members[info.name] = tar.extractfile(info).read()
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(
            f"{where}: not a readable run archive ({type(exc).__name__}: {exc}); nothing imported"
        ) from None
    try:
        manifest = json.loads(members.pop("manifest.json"))
    except (KeyError, ValueError):
        raise ArchiveError(f"{where}: manifest.json missing or unreadable; nothing imported") from None
    if manifest.get("format") != FORMAT:
        raise ArchiveError(f"{where}: archive format {manifest.get('format')!r}; this code reads format {FORMAT}")
    listed = manifest.get("members", {})
    if set(listed) != set(members):
        extra, absent = sorted(set(members) - set(listed)), sorted(set(listed) - set(members))
        raise ArchiveError(
            f"{where}: members not as listed (unlisted {extra[:3]}, absent {absent[:3]}); nothing imported"
        )
    for name, data in members.items():
        if _sha(data) != listed[name]:
            raise ArchiveError(f"{where}: member {name} altered (sha256 differs from the manifest); nothing imported")
    return manifest, members


def import_runs(path: str | Path, cache_root=None) -> dict:
    """Merge the archive at ``path`` into the run cache at ``cache_root`` (default: the configured cache); returns
    ``runs``, ``evaluations``, ``kept`` (entries already present and valid), ``fell_back`` (CUDA runs whose capture
    failed partway, left out with their evaluations: :func:`coherent_itr.runs.capture_failure`), ``machine`` (the
    id to read them with), ``local`` (whether this machine's own keys are the archive's: no ``--runs-from``
    needed) and ``differs`` (what of the archive's machine is not this one's: field → (there, here), e.g.
    ``{"cpu": ("AuthenticAMD/AVX2", "GenuineIntel/AVX512")}``)."""
    manifest, members = read_archive(path)
    members, fell_back = without_fallen_back(members)
    root = runs.paths.cache_dir(cache_root) / "runs"
    slim = manifest.get("slim", {})
    written = kept = evals = 0
    for name in sorted(members):
        kind, key, fname = name.split("/")
        if kind != "train" or fname != "record.json":
            continue
        final = root / "train" / key
        if runs.verify_entry(final, runs.TRAIN_FILES) is None:
            kept += 1
            continue
        arrays = members[f"train/{key}/arrays.npz"]  # the exact bytes: their sha256 is what evaluations name
        load_npz(io.BytesIO(arrays))  # readable without pickles, else nothing of this run is written
        runs.write_entry(
            final,
            {
                "arrays.npz": lambda p, b=arrays: p.write_bytes(b),
                "record.json": lambda p, b=members[name]: p.write_bytes(b),
            },
            meta={runs.SLIM_KEY: slim[key]} if key in slim else None,
        )
        written += 1
    for name in sorted(members):
        kind, key, fname = name.split("/")
        if kind != "eval":
            continue
        final = root / "eval" / key
        if runs.verify_entry(final, runs.EVAL_FILES) is None:
            continue
        json.loads(members[name])
        runs.write_entry(final, {"metrics.json": lambda p, b=members[name]: p.write_bytes(b)})
        evals += 1
    machine = manifest["machine"]
    name = runs.save_machine(root.parent, machine)
    here = runs.local_numerics(Config())
    return {
        "runs": written,
        "evaluations": evals,
        "kept": kept,
        "fell_back": len(fell_back),
        "machine": name,
        "local": machine == here,
        "differs": machine_differences(machine, here),
    }


# ----------------------------------------------------------------------------------------------------------------
# Merge
# ----------------------------------------------------------------------------------------------------------------
def merge_archives(out: str | Path, inputs: list, part_bytes: int = PART_BYTES) -> dict:
    """Write one archive ``out`` of the runs in the archives ``inputs``, which must hold one machine's runs (e.g.
    those of two GPU sessions, or of two machines of one kind), every member verified as on import.

    A run found in several archives travels from the first that holds it, with those of its evaluations that were
    computed from its stored test embeddings (a run trained twice differs at least in its record's timings); where a
    later archive's copy of the same trained run carries more arrays (its embeddings, or what the views read), its
    arrays travel instead (:func:`_carries_more`). CUDA
    runs whose capture failed partway are left out. Returns ``runs``, ``evaluations``, ``duplicates`` (runs found
    again in a later archive), ``fell_back``, ``bytes``, ``files`` and ``machine``."""
    if not inputs:
        raise ArchiveError("merge: no archive to merge")
    first: dict | None = None
    machine: dict = {}
    read: set = set()  # the data-form fields the runs merged so far read (runs.form_field)
    members: dict[str, bytes] = {}
    slim: dict[str, str] = {}
    sources, duplicates, fell_back = [], 0, 0
    for path in inputs:
        manifest, got = read_archive(path)
        got, fell = without_fallen_back(got)
        fell_back += len(fell)
        keys = sorted(n.split("/")[1] for n in got if n.startswith("train/") and n.endswith("/record.json"))
        fields = _form_fields(path, got, keys, manifest["machine"])
        if first is None:
            first, machine, read = manifest, dict(manifest["machine"]), set(fields)
        else:
            union = one_machine(machine, read, manifest["machine"], fields)
            if union is None:
                differs = "; ".join(
                    f"{k}: {a} there, {b} here"
                    for k, (a, b) in machine_differences(machine, manifest["machine"]).items()
                )
                raise ArchiveError(
                    f"{path}: runs of machine {manifest.get('machine_id')}, not of {inputs[0]}'s machine "
                    f"{runs.machine_id(machine)} ({differs}): an archive holds one machine's runs; nothing written"
                )
            machine, read = union, read | fields
        for key in keys:
            if f"train/{key}/record.json" in members:
                duplicates += 1
                theirs = manifest.get("slim", {}).get(key)
                if _carries_more(
                    got[f"train/{key}/arrays.npz"], theirs, members[f"train/{key}/arrays.npz"], slim.get(key)
                ):
                    members[f"train/{key}/arrays.npz"] = got[f"train/{key}/arrays.npz"]
                    slim.pop(key, None)
                    if theirs is not None:
                        slim[key] = theirs
                continue
            for fname in ("record.json", "arrays.npz"):
                members[f"train/{key}/{fname}"] = got[f"train/{key}/{fname}"]
            if key in manifest.get("slim", {}):
                slim[key] = manifest["slim"][key]
        for name in sorted(n for n in got if n.startswith("eval/")):
            ev = json.loads(got[name])
            run = ev.get("run_key")
            arrays = members.get(f"train/{run}/arrays.npz")
            if name in members or arrays is None:
                continue
            if ev.get("embeddings_sha256") == slim.get(run, _sha(arrays)):
                members[name] = got[name]
        sources.append(
            {
                "file": Path(path).name,
                "library_source": manifest.get("library_source"),
                "created_unix": manifest.get("created_unix"),
                "runs": len(keys),
            }
        )
    manifest = {
        "format": FORMAT,
        "machine": machine,
        "machine_id": runs.machine_id(machine),
        "library_source": first.get("library_source"),
        "evaluation_code": first.get("evaluation_code"),
        "created_unix": int(time.time()),
        "merged_from": sources,
        "slim": slim,
        "members": {name: _sha(data) for name, data in members.items()},
    }
    files = _write_parts(Path(out), manifest, members, part_bytes)
    return {
        "runs": sum(1 for n in members if n.endswith("/record.json")),
        "evaluations": sum(1 for n in members if n.startswith("eval/")),
        "duplicates": duplicates,
        "fell_back": fell_back,
        "bytes": sum(f.stat().st_size for f in files),
        "files": [str(f) for f in files],
        "machine": manifest["machine_id"],
    }


def _carries_more(new: bytes, new_slim: str | None, old: bytes, old_slim: str | None) -> bool:
    """Whether a run's ``arrays.npz`` found again in a later archive carries more than the copy kept (its test
    embeddings, or what the views read, where the kept copy has per-query hits only) of the same trained run (the
    same embeddings: the sha256 the slim copies name, or the full copy's)."""
    if (new_slim or _sha(new)) != (old_slim or _sha(old)):
        return False
    return set(load_npz(io.BytesIO(new))) > set(load_npz(io.BytesIO(old)))


def without_fallen_back(members: dict[str, bytes]) -> tuple[dict[str, bytes], set[str]]:
    """``(members, keys)``: an archive's members without the CUDA runs whose capture failed partway (their training
    entries and every evaluation of them), and those runs' keys."""
    fell = {
        name.split("/")[1]
        for name, data in members.items()
        if name.endswith("/record.json") and runs.capture_failure(json.loads(data)) is not None
    }
    if not fell:
        return members, fell
    kept = {}
    for name, data in members.items():
        kind, key, _ = name.split("/")
        if (kind == "train" and key in fell) or (kind == "eval" and json.loads(data).get("run_key") in fell):
            continue
        kept[name] = data
    return kept, fell


def _form_fields(path, members: dict[str, bytes], keys: list[str], machine: dict) -> set:
    """The fields of ``machine``'s numerics that name the data the runs ``keys`` of its archive read: each run's
    data-form field (:func:`coherent_itr.runs.form_field`), and ``host_cpu`` for a run whose machine names no form of
    its data (it computed its data there)."""
    fields = set()
    for k in keys:
        try:
            field = runs.form_field(Config.from_dict(json.loads(members[f"train/{k}/record.json"])["config"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArchiveError(f"{path}: train/{k}/record.json is not a run record of this code ({exc})") from None
        fields |= {field} if field is None or field in machine else {field, runs.HOST_FIELD}
    return fields


def one_machine(a: dict, a_reads: set, b: dict, b_reads: set) -> dict | None:
    """The machine of two archives' runs, or ``None`` if they are two machines. ``a_reads`` / ``b_reads``: the
    fields of their data their runs read (:func:`_form_fields`). A machine's record names the form of a data set, or
    the host CPU that computed it, only when it holds runs of it (a GPU session that trained no synthetic world with
    carried embeddings names none): two records that differ only in such a field, which one names and whose other
    archive's runs do not read, are one machine, recorded with the field. Anything else that differs — the device,
    torch, the step engine, another bundle, carry or host CPU — makes two."""
    for k in set(a) | set(b):
        if a.get(k) == b.get(k):
            continue
        if k not in (*runs.DATA_FORM_FIELDS, runs.HOST_FIELD) or (k in a and k in b):
            return None
        if k in (b_reads if k in a else a_reads):  # the runs of the record without it read the data as released
            return None
    return {**a, **b}


def machine_differences(there: dict, here: dict) -> dict:
    """The fields of two machines' numerics that differ: field → (there, here); a CPU field that one of them lacks
    is the reference CPU's (:data:`coherent_itr.runs.REFERENCE_CPU`), a device field the CPU's."""
    defaults = {"cpu": runs.REFERENCE_CPU, "device": "cpu"}
    fields = sorted(set(there) | set(here))
    pairs = {k: (there.get(k, defaults.get(k, "none")), here.get(k, defaults.get(k, "none"))) for k in fields}
    return {k: v for k, v in pairs.items() if v[0] != v[1]}


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


def archive_machine(path: str | Path) -> dict:
    """The manifest of the archive at ``path`` (``FILE`` or its first part) without its member list: ``machine_id``,
    ``machine`` (numerics), ``library_source``, … — read from the archive's first member, which :func:`export_runs`
    writes first, so a look at a large archive costs milliseconds. ``ArchiveError`` if it is not one."""
    path = Path(path)
    first = path if path.is_file() else path.with_name(f"{path.name}.part1")
    try:
        with tarfile.open(first, mode="r|xz") as tar:
            info = tar.next()
            if info is None or info.name != "manifest.json":
                raise ArchiveError(f"{first}: its first member is not manifest.json; not a run archive of this code")
            manifest = json.loads(tar.extractfile(info).read())
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(f"{first}: not a readable run archive ({type(exc).__name__}: {exc})") from None
    return {k: v for k, v in manifest.items() if k not in ("members", "slim")}


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
    machines = {d: archive_machine(f)["machine_id"] for d, f in found.items()}
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
    runs.load_machine(runs.paths.cache_dir(create=False), machine)
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
        s = import_runs(args.import_runs)
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
        f"{runs.paths.cache_dir()} ({s['kept']} already there" + _fell_back(s["fell_back"]) + f"); {use}",
        flush=True,
    )
    return 0


def merge_command(out: str, inputs: list[str]) -> int:
    """``--merge OUT IN [IN …]``: 0 written, 2 an unreadable, altered or foreign archive (nothing written)."""
    try:
        s = merge_archives(out, inputs)
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
    if "flickr8k" in sets and not os.environ.get(runs.paths.FLICKR8K_ENV):
        sets.remove("flickr8k")  # no Flickr8k here: none of its runs can be in this cache's plan
    return export_command(args, sets)


if __name__ == "__main__":
    sys.exit(main())

"""A run archive: the runs of one machine's cache in one compressed file (its format), merged into another machine's
cache (:func:`import_runs`) or with other archives of the same machine (:func:`merge_archives`). Which runs travel,
and with which arrays, is the export policy of :mod:`reproduce.driver.run_archive`, which has the commands too.

What an archive holds (``tar`` compressed with ``xz``), for every training entry of the cache that the current
code looks up on the exporting machine (entries of older code are left out and counted):

* ``train/<key>/record.json`` — config, history, health, timing, as stored;
* ``train/<key>/arrays.npz`` — a run's test embeddings, or for a run that travels without them its per-query
  R@1/5/10 hits (``pq_i2t``, ``pq_t2i``) and what the views read of it
  (:func:`reproduce.driver.run_archive.view_arrays`); its manifest's ``slim`` then names the sha256 of the
  ``arrays.npz`` it trained with (what its evaluations name);
* ``eval/<key>/metrics.json`` — every evaluation entry of those runs;
* ``manifest.json`` — the exporting machine's numerics (:func:`coherent_itr.runs.local_numerics`: torch version,
  device, TF32), the library's source hash, and the sha256 of every other member (:func:`manifest_of`).

Import verifies every member against the manifest before anything is written, writes each entry atomically
(an entry already present and valid is kept), and records the machine
(:func:`coherent_itr.runs.save_machine`). Runs trained elsewhere keep that machine's keys: a cache reads them
when ``$COHERENT_ITR_RUNS_FROM`` (or ``--runs-from``) names that machine, and then never trains or re-evaluates a
run under them (:class:`coherent_itr.runs.ImportedRunMissing` says which run is missing and why). Members are
read by name, never extracted: a name outside ``manifest.json``, ``train/<key>/…`` and ``eval/<key>/…`` is refused.

A CUDA run whose graph capture failed partway (:func:`coherent_itr.runs.capture_failure`; stored only by older code)
is left out of an export, an import and a merge, with its evaluations, and counted.

An archive larger than ``part_bytes`` (16 MiB: what one file back from a GPU machine may weigh) is written as
``FILE.part1``, ``FILE.part2``, …; import takes ``FILE`` or any of its parts and reads them all.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import time
from pathlib import Path

from .. import paths
from ..config import Config
from ..io import load_npz
from .cache import save_machine
from .migrations import FORMAT, upgrade, upgrade_head
from .identity import DATA_FORM_FIELDS, HOST_FIELD, capture_failure, form_field, local_numerics, machine_id
from .store import EVAL_FILES, SLIM_KEY, TRAIN_FILES, member_sha256, verify_entry, write_entry

PART_BYTES = 16 * 2**20
MAX_PARTS = 8
MEMBER = re.compile(
    r"^(?:manifest\.json|train/[0-9a-f]{20}/(?:record\.json|arrays\.npz)|eval/[0-9a-f]{20}/metrics\.json)$"
)


class ArchiveError(ValueError):
    """An archive that cannot be imported: the message names the file and what is wrong."""


def manifest_of(machine: dict, members: dict[str, bytes], slim: dict[str, str], **fields) -> dict:
    """The manifest of an archive of ``members`` (name → bytes), the runs of the machine whose numerics are
    ``machine``: the format, the machine and its id, when it was written, ``slim`` (key → the sha256 of the
    arrays.npz a run that travels without its test embeddings trained with: its evaluations name that one), the
    sha256 of every member, and ``fields`` (the library's source hash, …)."""
    return {
        "format": FORMAT,
        "machine": machine,
        "machine_id": machine_id(machine),
        **fields,
        "created_unix": int(time.time()),
        "slim": slim,
        "members": {name: member_sha256(data) for name, data in members.items()},
    }


def write_archive(out: Path, manifest: dict, members: dict[str, bytes], part_bytes: int) -> list[Path]:
    """Write ``manifest`` (first) and ``members`` into the archive ``out``, or its parts above ``part_bytes``
    (at most :data:`MAX_PARTS`, else :class:`ArchiveError`); returns the files written."""
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


def archive_machine(path: str | Path) -> dict:
    """The manifest of the archive at ``path`` (``FILE`` or its first part) without its member list: ``machine_id``,
    ``machine`` (numerics), ``library_source``, … — read from the archive's first member, which :func:`write_archive`
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
    try:
        return upgrade_head({k: v for k, v in manifest.items() if k not in ("members", "slim")})
    except ValueError as exc:
        raise ArchiveError(f"{first}: {exc}") from None


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
    """``(manifest, {member name: bytes})`` of an archive, every member verified against the manifest, in the
    current format (:func:`coherent_itr.runs.migrations.upgrade`: an older archive is upgraded as it is read)."""
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
    if manifest.get("format") not in range(1, FORMAT + 1):
        raise ArchiveError(f"{where}: archive format {manifest.get('format')!r}; this code reads formats 1–{FORMAT}")
    listed = manifest.get("members", {})
    if set(listed) != set(members):
        extra, absent = sorted(set(members) - set(listed)), sorted(set(listed) - set(members))
        raise ArchiveError(
            f"{where}: members not as listed (unlisted {extra[:3]}, absent {absent[:3]}); nothing imported"
        )
    for name, data in members.items():
        if member_sha256(data) != listed[name]:
            raise ArchiveError(f"{where}: member {name} altered (sha256 differs from the manifest); nothing imported")
    return upgrade(manifest, members)


def import_runs(path: str | Path, cache_root=None) -> dict:
    """Merge the archive at ``path`` into the run cache at ``cache_root`` (default: the configured cache); returns
    ``runs``, ``evaluations``, ``kept`` (entries already present and valid), ``fell_back`` (CUDA runs whose capture
    failed partway, left out with their evaluations: :func:`coherent_itr.runs.capture_failure`), ``machine`` (the
    id to read them with), ``local`` (whether this machine's own keys are the archive's: no ``--runs-from``
    needed) and ``differs`` (what of the archive's machine is not this one's: field → (there, here), e.g.
    ``{"cpu": ("AuthenticAMD/AVX2", "GenuineIntel/AVX512")}``)."""
    manifest, members = read_archive(path)
    members, fell_back = without_fallen_back(members)
    root = paths.cache_dir(cache_root) / "runs"
    slim = manifest.get("slim", {})
    written = kept = evals = 0
    for name in sorted(members):
        kind, key, fname = name.split("/")
        if kind != "train" or fname != "record.json":
            continue
        final = root / "train" / key
        if verify_entry(final, TRAIN_FILES) is None:
            kept += 1
            continue
        arrays = members[f"train/{key}/arrays.npz"]  # the exact bytes: their sha256 is what evaluations name
        load_npz(io.BytesIO(arrays))  # readable without pickles, else nothing of this run is written
        write_entry(
            final,
            {
                "arrays.npz": lambda p, b=arrays: p.write_bytes(b),
                "record.json": lambda p, b=members[name]: p.write_bytes(b),
            },
            meta={SLIM_KEY: slim[key]} if key in slim else None,
        )
        written += 1
    for name in sorted(members):
        kind, key, fname = name.split("/")
        if kind != "eval":
            continue
        final = root / "eval" / key
        if verify_entry(final, EVAL_FILES) is None:
            continue
        json.loads(members[name])
        write_entry(final, {"metrics.json": lambda p, b=members[name]: p.write_bytes(b)})
        evals += 1
    machine = manifest["machine"]
    name = save_machine(root.parent, machine)
    here = local_numerics(Config())
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
    read: set = set()  # the data-form fields the runs merged so far read (form_field)
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
                    f"{machine_id(machine)} ({differs}): an archive holds one machine's runs; nothing written"
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
            if ev.get("embeddings_sha256") == slim.get(run, member_sha256(arrays)):
                members[name] = got[name]
        sources.append(
            {
                "file": Path(path).name,
                "library_source": manifest.get("library_source"),
                "created_unix": manifest.get("created_unix"),
                "runs": len(keys),
            }
        )
    manifest = manifest_of(
        machine,
        members,
        slim,
        library_source=first.get("library_source"),
        evaluation_code=first.get("evaluation_code"),
        merged_from=sources,
    )
    files = write_archive(Path(out), manifest, members, part_bytes)
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
    if (new_slim or member_sha256(new)) != (old_slim or member_sha256(old)):
        return False
    return set(load_npz(io.BytesIO(new))) > set(load_npz(io.BytesIO(old)))


def without_fallen_back(members: dict[str, bytes]) -> tuple[dict[str, bytes], set[str]]:
    """``(members, keys)``: an archive's members without the CUDA runs whose capture failed partway (their training
    entries and every evaluation of them), and those runs' keys."""
    fell = {
        name.split("/")[1]
        for name, data in members.items()
        if name.endswith("/record.json") and capture_failure(json.loads(data)) is not None
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
            field = form_field(Config.from_dict(json.loads(members[f"train/{k}/record.json"])["config"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArchiveError(f"{path}: train/{k}/record.json is not a run record of this code ({exc})") from None
        fields |= {field} if field is None or field in machine else {field, HOST_FIELD}
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
        if k not in (*DATA_FORM_FIELDS, HOST_FIELD) or (k in a and k in b):
            return None
        if k in (b_reads if k in a else a_reads):  # the runs of the record without it read the data as released
            return None
    return {**a, **b}


def machine_differences(there: dict, here: dict) -> dict:
    """The fields of two machines' numerics that differ: field → (there, here); a device field that one of them
    lacks is the CPU's, any other ``"none"``."""
    defaults = {"device": "cpu"}
    fields = sorted(set(there) | set(here))
    pairs = {k: (there.get(k, defaults.get(k, "none")), here.get(k, defaults.get(k, "none"))) for k in fields}
    return {k: v for k, v in pairs.items() if v[0] != v[1]}

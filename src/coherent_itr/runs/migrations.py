"""Run archives of older formats, upgraded forward on read (Lightning's ``_migration_index`` is the model).

:func:`upgrade` applies :data:`MIGRATIONS` in order, from an archive's format to :data:`FORMAT`, to its verified
manifest and members, so the code past :func:`coherent_itr.runs.archive.read_archive` only ever sees the current
format: no legacy branch in the live path.

* **1 → 2: every CPU key names its CPU.** Format 1 keys left out the CPU of the reference machine
  (:data:`V1_CPU`, AMD EPYC with AVX2): a CPU machine whose numerics name no CPU is that one. The upgrade gives the
  machine its ``cpu`` and every run the key the current rule gives it there (:func:`coherent_itr.runs.run_key` of
  its config, threads and engine on the upgraded machine), its evaluations the evaluation key of that key; the
  record's ``run_key``, the evaluation's ``run_key`` and ``eval_key``, the slim list and the manifest follow. A run
  whose key is not the one format 1 gave its config under this code (an entry of older code, which no cache
  looks up) is left as it is and counted. CUDA machines name their device and keep every key.
"""

from __future__ import annotations

import json

from ..config import Config
from .store import member_sha256
from .identity import device_type, eval_key, machine_id, record_engine, run_key

FORMAT = 2
#: format 1: the CPU of a CPU machine whose numerics name none
V1_CPU = "AuthenticAMD/AVX2"


def _json(obj) -> bytes:
    """A member's JSON as the cache writes it (:func:`coherent_itr.io.atomic_write_json`)."""
    return (json.dumps(obj, indent=1, sort_keys=True, allow_nan=True) + "\n").encode()


def upgrade_machine_1(machine: dict) -> dict:
    """A format-1 machine's numerics in format 2: a CPU machine names its CPU."""
    if device_type(machine) == "cpu" and "cpu" not in machine:
        return {**machine, "cpu": V1_CPU}
    return dict(machine)


def _v1_to_v2(manifest: dict, members: dict[str, bytes]) -> tuple[dict, dict[str, bytes]]:
    before, machine = manifest["machine"], upgrade_machine_1(manifest["machine"])
    renamed: dict[str, str] = {}
    if machine != before:
        for name, data in members.items():
            kind, key, fname = name.split("/")
            if kind != "train" or fname != "record.json":
                continue
            record = json.loads(data)
            config, threads = Config.from_dict(record["config"]), int(record.get("threads", 1))
            if run_key(config, threads, before, record_engine(record)) == key:
                renamed[key] = run_key(config, threads, machine, record_engine(record))
    evals = {eval_key(old): eval_key(new) for old, new in renamed.items()}
    out: dict[str, bytes] = {}
    for name, data in members.items():
        kind, key, fname = name.split("/")
        if kind == "train" and key in renamed:
            if fname == "record.json":
                data = _json({**json.loads(data), "run_key": renamed[key]})
            name = f"train/{renamed[key]}/{fname}"
        elif kind == "eval" and key in evals:
            metrics = json.loads(data)
            if metrics.get("run_key") in renamed:
                data = _json({**metrics, "run_key": renamed[metrics["run_key"]], "eval_key": evals[key]})
                name = f"eval/{evals[key]}/{fname}"
        out[name] = data
    slim = {renamed.get(k, k): v for k, v in manifest.get("slim", {}).items()}
    trains = {n.split("/")[1] for n in members if n.startswith("train/")}
    left = len(trains) - len(renamed) if machine != before else 0  # a machine that names its device keeps every key
    migrated = {"from": 1, "runs_renamed": len(renamed), "runs_left": left}
    head = {**manifest, "format": 2, "machine": machine, "machine_id": machine_id(machine), "slim": slim}
    return {**head, "members": {n: member_sha256(d) for n, d in out.items()}, "migrated": migrated}, out


#: format n → the upgrade of an archive of format n to n + 1
MIGRATIONS = {1: _v1_to_v2}
#: format n → its manifest's machine in format n + 1 (what a look at an archive's head reads)
MACHINE_MIGRATIONS = {1: upgrade_machine_1}


def upgrade(manifest: dict, members: dict[str, bytes]) -> tuple[dict, dict[str, bytes]]:
    """``(manifest, members)`` of a verified archive in :data:`FORMAT`; ``ValueError`` for a format no migration
    reaches (newer than this code, or unknown)."""
    while manifest.get("format") != FORMAT:
        step = MIGRATIONS.get(manifest.get("format"))
        if step is None:
            raise ValueError(f"archive format {manifest.get('format')!r}; this code reads formats 1–{FORMAT}")
        manifest, members = step(manifest, members)
    return manifest, members


def upgrade_head(head: dict) -> dict:
    """A manifest's head (its fields but the member list) in :data:`FORMAT`: its machine upgraded."""
    while head.get("format") != FORMAT:
        step = MACHINE_MIGRATIONS.get(head.get("format"))
        if step is None:
            raise ValueError(f"archive format {head.get('format')!r}; this code reads formats 1–{FORMAT}")
        machine = step(head["machine"])
        head = {**head, "format": head["format"] + 1, "machine": machine, "machine_id": machine_id(machine)}
    return head

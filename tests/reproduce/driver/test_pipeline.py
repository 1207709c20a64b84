"""The reproduce pipeline: planning, resume after an interrupt, failure reporting, Ray."""

from __future__ import annotations

import json

import pytest

from coherent_itr import train as train_mod
from coherent_itr.config import Config
from coherent_itr.packed import engine_identity
from coherent_itr.runs import ENGINE_ENV, RunCache
from reproduce.driver import cli as driver
from reproduce.spec import experiments
from reproduce.driver.executors import LocalExecutor, RayExecutor
from reproduce.spec.profiles import get_profile
from tiny_run import TINY
from reproduce.protocol import plan as plan_mod


def tiny_configs(n=3):
    return [Config(**TINY, seed=s) for s in range(n)]


def test_plan_deduplicates_shared_runs():
    prof = get_profile("smoke")
    all_cfgs = [c for paper in experiments.PAPERS for a in experiments.arms(paper, prof) for c in a.configs(prof)]
    planned = experiments.plan(prof)
    keys = [c.key() for c in planned]
    assert len(set(keys)) == len(keys)  # no duplicates
    assert len(planned) < len(all_cfgs)  # shared arms (e.g. VSE++ everywhere) run once
    assert {c.key() for c in all_cfgs} == set(keys)  # but nothing is lost
    # the Triplet-HN baseline is asked for by several papers and planned once
    hn = [
        c
        for c in planned
        if c.loss == "triplet" and c.loss_params == {} and c.train_fraction == 1.0 and c.warmup_epochs == 0
    ]
    assert len(hn) == len(prof.seeds)  # (the warm-up sensitivity arm is another config)


def test_resume_after_interrupt_trains_only_missing_runs(tmp_path, monkeypatch):
    cache = RunCache(tmp_path)
    cfgs = tiny_configs(3)
    real_train = train_mod.train
    calls = []

    def interrupt_on_third(config, **kw):
        calls.append(config.seed)
        if config.seed == 2:
            raise KeyboardInterrupt("simulated kill")
        return real_train(config, **kw)

    monkeypatch.setattr(train_mod, "train", interrupt_on_third)
    with pytest.raises(KeyboardInterrupt):
        LocalExecutor(progress=False).run(cfgs, cache)
    assert [cache.has(c) for c in cfgs] == [True, True, False]
    monkeypatch.setattr(
        train_mod, "train", lambda config, **kw: (calls.append(config.seed), real_train(config, **kw))[1]
    )
    calls.clear()
    todo = [c for c in cfgs if not cache.has(c)]
    assert LocalExecutor(progress=False).run(todo, cache) == []
    assert calls == [2] and all(cache.has(c) for c in cfgs)


@pytest.mark.parametrize("workers, per_worker", [(1, 1), (2, 1), (1, 2), (2, 2)])
def test_runs_train_as_they_become_ready_each_once(tmp_path, workers, per_worker):
    """``LocalExecutor.run_as_ready`` (the protocol one tuning problem at a time): seed 0 trains first (training
    only); once it is trained, it is evaluated and seed 1 trains and is evaluated; a run that fails (its data set
    is not there) is reported once and never asked for again; every run trains once and the pool ends when nothing
    is ready — one run a worker, or up to ``runs_per_worker`` side by side."""
    cache = RunCache(tmp_path)
    a, b = tiny_configs(2)
    broken = Config(**{**TINY, "data": "flickr8k"}, data_dir=str(tmp_path / "no-such-folder"))
    asked = []

    def ready(failed):
        asked.append(set(failed))
        out = [] if broken.key() in failed else [(broken, True)]
        if not cache.has_training(a):
            return [*out, (a, False)]
        return [*out, *[(c, True) for c in (a, b) if not cache.has(c)]]

    executor = LocalExecutor(workers=workers, runs_per_worker=per_worker, progress=False)
    failures = executor.run_as_ready(ready, cache)
    assert [f.config["seed"] for f in failures] == [broken.seed] and "no-such-folder" in failures[0].error
    assert cache.has(a) and cache.has(b)
    assert broken.key() in asked[-1] and len(asked) <= 6


@pytest.mark.parametrize("workers", [1, 2])
def test_the_packed_engine_trains_ready_runs_in_packs(tmp_path, monkeypatch, workers):
    """Under ``$COHERENT_ITR_ENGINE=pack:W`` (``--engine pack``) both executor paths train runs that can share a
    pack as packs of at most W, each run stored under its packed key, none under its solo key."""
    monkeypatch.setenv(ENGINE_ENV, "pack:2")
    cache = RunCache(tmp_path)
    assert cache.engine == engine_identity(2)
    cfgs = tiny_configs(3)
    assert LocalExecutor(workers=workers, progress=False).run(cfgs[:2], cache, evaluate=False) == []
    assert all(cache.has_training(c) for c in cfgs[:2]) and not cache.has_training(cfgs[2])

    def ready(failed):
        return [(c, True) for c in cfgs if not cache.has(c)]

    assert LocalExecutor(workers=workers, progress=False).run_as_ready(ready, cache) == []
    assert all(cache.has(c) for c in cfgs)
    widths = {cache.load_training(c).record["engine"]["width"] for c in cfgs}
    assert widths == {2} and not any(RunCache(tmp_path, engine=None).has_training(c) for c in cfgs)


def test_a_run_that_finishes_yet_stays_ready_is_a_failure_not_a_loop(tmp_path):
    cache = RunCache(tmp_path)
    (a,) = tiny_configs(1)
    failures = LocalExecutor(progress=False).run_as_ready(lambda failed: [(a, False)] if not failed else [], cache)
    assert len(failures) == 1 and "finished, yet the protocol asks for it again" in failures[0].error


def test_failing_run_is_reported_and_others_finish(tmp_path, monkeypatch):
    cache = RunCache(tmp_path)
    cfgs = tiny_configs(3)
    real_train = train_mod.train

    def fail_seed_1(config, **kw):
        if config.seed == 1:
            raise FloatingPointError("non-finite loss (simulated)")
        return real_train(config, **kw)

    monkeypatch.setattr(train_mod, "train", fail_seed_1)
    failures = LocalExecutor(progress=False).run(cfgs, cache)
    assert len(failures) == 1
    f = failures[0]
    assert f.config["seed"] == 1 and "FloatingPointError" in f.error and "simulated" in f.traceback
    assert cache.has(cfgs[0]) and cache.has(cfgs[2]) and not cache.has(cfgs[1])

    # the driver exits non-zero when a run failed
    # the profile tunes (a one-point grid under smoke): its protocol is these three runs
    from reproduce.driver import ledger_files
    from reproduce.present import tuning_tables
    from reproduce.protocol import tuning

    monkeypatch.setattr(tuning, "tuning_configs", lambda profile, papers=None: cfgs)
    monkeypatch.setattr(tuning, "tuned_plan", lambda profile, papers, cache, **k: cfgs)  # the plan's final runs
    from reproduce.protocol import pipeline  # one tuning problem at a time, as the driver trains a tuned plan

    monkeypatch.setattr(
        pipeline,
        "ready_runs",
        lambda profile, papers, cache, failed_keys=(), **k: pipeline.Ready(
            [], [c for c in cfgs if c.key() not in failed_keys and not cache.has(c)], 0
        ),
    )
    monkeypatch.setattr(tuning_tables, "write_tuning_summary", lambda *a, **k: None)
    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path))
    monkeypatch.setattr(ledger_files, "collect", lambda d, **kw: None)
    monkeypatch.setattr(ledger_files, "write_manifest", lambda *a, **k: None)
    assert (
        driver.main(
            ["--profile", "smoke", "--data", "synthetic", "--skip-notebooks", "--no-progress", "--workers", "1"]
        )
        == 1
    )


def test_a_worker_whose_key_differs_from_the_drivers_trains_nothing(tmp_path, monkeypatch):
    """A library file edited after the driver started gives a worker's runs other keys than the driver planned;
    the worker refuses them, so none is trained and stored where no driver looks."""
    cache = RunCache(tmp_path)
    cfgs = tiny_configs(2)
    trained = []
    real_train = train_mod.train
    monkeypatch.setattr(
        train_mod, "train", lambda config, **kw: (trained.append(config.seed), real_train(config, **kw))[1]
    )
    monkeypatch.setattr(cache, "train_key", lambda config: "0" * 20)  # the driver's keys, from "other code"
    failures = LocalExecutor(progress=False).run(cfgs, cache)
    assert len(failures) == 2 and trained == []
    assert all("KeyMismatch" in f.error and "0" * 20 in f.error and "restart the driver" in f.error for f in failures)
    assert not any(RunCache(tmp_path).has_training(c) for c in cfgs)
    # the same runs under the driver's true keys train
    assert LocalExecutor(progress=False).run(cfgs, RunCache(tmp_path)) == [] and trained == [0, 1]


def test_ray_executor_runs_a_small_plan(tmp_path):
    pytest.importorskip("ray")
    cache = RunCache(tmp_path)
    cfgs = tiny_configs(2)
    failures = RayExecutor(num_cpus=2, progress=False).run(cfgs, cache)
    assert failures == []
    assert all(cache.has(c) for c in cfgs)


def test_losses_with_their_own_seed_get_the_run_seed():
    prof = get_profile("default")
    rs = [c for c in experiments.plan(prof) if c.loss == "sam" and c.loss_params.get("sampling") == "RS"]
    assert rs and all(c.loss_params["seed"] == c.seed for c in rs)
    assert len({c.key() for c in rs}) == len(rs)


def _fake_sentence_bert(monkeypatch, record):
    """Sentence-BERT's encoder replaced by one that calls ``record(texts)`` and returns unit rows (no model)."""
    import numpy as np

    from coherent_itr.data import sbert

    def encode(texts, batch_size, progress):
        record(texts)
        return np.ones((len(texts), 384), dtype="float32")

    monkeypatch.setattr(sbert, "_encode", encode)
    sbert._MEMO.clear()


def test_prepare_embeds_every_caption_once_for_the_runs(tmp_path, monkeypatch):
    from coherent_itr import data as data_mod
    from coherent_itr.data import sbert
    from reproduce.protocol.prepare import prepare

    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path))
    calls = []
    _fake_sentence_bert(monkeypatch, lambda texts: calls.append(len(texts)))
    cfgs = tiny_configs(3)  # three seeds, one data set
    assert prepare(cfgs, progress=False) >= 0
    splits = data_mod.load_splits("toy", scale="smoke")
    n_unique = len({c for s in (splits.train, splits.dev, splits.test) for c in s.captions})
    assert sum(calls) == n_unique and max(calls) <= 256  # every caption once, in the encoder's batches of 256
    sbert._MEMO.clear()
    sbert.embed_captions(splits.train.captions)  # a split is then read from the disk cache
    assert sum(calls) == n_unique


def test_preparation_loads_sentence_bert_without_a_weight_loading_bar(tmp_path, monkeypatch):
    """transformers' "Loading weights" bar ignored ``--no-progress`` and filled every driver log: it is off while
    the driver embeds the captions, and transformers' own setting is as it was afterwards."""
    from transformers.utils import logging as hf_logging

    from coherent_itr.data import sbert
    from reproduce.protocol.prepare import prepare

    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path))
    seen = []
    _fake_sentence_bert(monkeypatch, lambda texts: seen.append(hf_logging.is_progress_bar_enabled()))
    hf_logging.enable_progress_bar()
    assert prepare(tiny_configs(1), progress=True) >= 0
    assert seen and not any(seen) and hf_logging.is_progress_bar_enabled()
    sbert._MEMO.clear()


def test_preparation_computes_image_features_without_a_bar_under_no_progress(monkeypatch):
    """``--no-progress`` reaches the Flickr8k loader, whose feature bar filled the driver's log (a line per 32
    images); the loader is planted and records what it was asked."""
    from coherent_itr.data import flickr8k as f8
    from reproduce.protocol import prepare as prep

    asked = []
    monkeypatch.setattr(prep, "train_images_needed", lambda configs, names: None)
    monkeypatch.setattr(prep, "flickr8k_index", lambda data_dir: {"train": ([], [])})
    monkeypatch.setattr(prep, "is_bundle", lambda folder: False)
    monkeypatch.setattr(f8, "load_flickr8k", lambda *a, **k: asked.append(k) or "splits")
    monkeypatch.setattr(prep.paths, "flickr8k_dir", lambda data_dir=None, **k: data_dir)
    monkeypatch.setattr("coherent_itr.paths.flickr8k_dir", lambda data_dir=None, **k: data_dir)
    monkeypatch.setattr("coherent_itr.data.bundle.is_bundle", lambda folder: False)
    for progress in (False, True):
        assert prep.load_for("flickr8k", [], data_dir="somewhere", progress=progress) == "splits"
    assert [k["progress"] for k in asked] == [False, True]


def test_ledger_collects_its_own_profile_only(tmp_path):
    """results/smoke/ lives inside results/: the default ledger must not pick up smoke rows."""
    from reproduce.driver import ledger_files

    row = "id,paper,dataset,verdict,n_seeds\n{},BCLS,{},reproduced,3\n"
    for sub, cid, data in [
        ("bcls", "B1", "synthetic"),
        ("flickr8k/bcls", "B2", "flickr8k"),
        ("smoke/bcls", "B3", "synthetic"),
        ("smoke/flickr8k/bcls", "B4", "flickr8k"),
    ]:
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / f"claims_{data}.csv").write_text(row.format(cid, data))
    df = ledger_files.collect(tmp_path)
    tested = df[df["n_seeds"] > 0]
    assert sorted(tested["id"]) == ["B1", "B2"]
    assert set(df.loc[df["id"].isin(["B3", "B4"]), "verdict"]) == {"inconclusive"}  # listed as untested


def test_a_notebook_another_kind_of_machine_executed_is_executed_again_here(tmp_path, monkeypatch):
    """A fresh clone's committed notebooks were drawn on another machine: its ``make reproduce`` draws them again
    (what they compute from the data differs there in its last bits); on the machine that drew them, they stand. The
    stale check of the committed stamps reads the inputs alone, whatever the machine."""
    import papermill

    from reproduce.driver import notebooks

    ran = []
    monkeypatch.setattr(
        papermill, "execute_notebook", lambda src, out, **kw: ran.append(src) or open(out, "w").write("{}")
    )
    monkeypatch.setattr(notebooks, "kernel_name", lambda: "python3")
    notebooks.execute("smoke", "synthetic", tmp_path, only=["06"], progress=False)
    nb = notebooks.notebook_paths(["06"])[0]
    assert notebooks.is_current(nb, "smoke", "synthetic", tmp_path) and len(ran) == 1
    stamp = notebooks.stamp_path(tmp_path, nb)
    st = json.loads(stamp.read_text())
    assert st["machine"] == notebooks.analyses_machine()
    stamp.write_text(json.dumps({**st, "machine": "GenuineIntel/AVX512 torch 2.13.0+cpu"}))
    assert not notebooks.is_current(nb, "smoke", "synthetic", tmp_path)
    assert not any("06_data" in line for line in notebooks.stale_notebooks("smoke", {"synthetic": tmp_path}))
    notebooks.execute("smoke", "synthetic", tmp_path, only=["06"], progress=False)
    assert len(ran) == 2 and notebooks.is_current(nb, "smoke", "synthetic", tmp_path)
    notebooks.execute("smoke", "synthetic", tmp_path, only=["06"], progress=False)
    assert len(ran) == 2


def test_notebooks_with_unchanged_inputs_are_not_executed_again(tmp_path, monkeypatch):
    import papermill

    from reproduce.driver import notebooks

    ran = []

    def fake_execute(src, out, **kw):
        ran.append(src)
        open(out, "w").write("{}")

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    monkeypatch.setattr(notebooks, "kernel_name", lambda: "python3")
    assert notebooks.execute("smoke", "synthetic", tmp_path, only=["06"], progress=False) == []
    assert notebooks.execute("smoke", "synthetic", tmp_path, only=["06"], progress=False) == []
    assert len(ran) == 1  # second call: skipped
    notebooks.execute("smoke", "flickr8k", tmp_path, only=["06"], progress=False)
    assert len(ran) == 2  # other data: executed
    notebooks.execute("smoke", "synthetic", tmp_path, only=["06"], progress=False, force=True)
    assert len(ran) == 3  # forced: executed

    def failing(src, out, **kw):
        raise RuntimeError("cell failed")

    monkeypatch.setattr(papermill, "execute_notebook", failing)
    fails = notebooks.execute("smoke", "synthetic", tmp_path, only=["06"], progress=False, force=True)
    assert len(fails) == 1 and "cell failed" in fails[0][1]
    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    notebooks.execute("smoke", "synthetic", tmp_path, only=["06"], progress=False)
    assert len(ran) == 4  # a failed run left no stamp: executed again


def test_notebooks_side_by_side_each_claim_only_their_own_files(tmp_path, monkeypatch):
    """``jobs=2``: two notebooks execute at the same time (a barrier makes them overlap), each writes its
    paper's claim file while the other runs; each stamp names only its own file, failures keep notebook order."""
    import json
    import threading
    from pathlib import Path

    import papermill

    from reproduce.driver import notebooks

    both_running = threading.Barrier(2, timeout=30)

    def fake_execute(src, out, **kw):
        paper = {"01_bcls": "bcls", "02_ladder": "ladder"}[Path(src).stem]
        both_running.wait()  # both notebooks are executing now
        (tmp_path / paper).mkdir(exist_ok=True)
        (tmp_path / paper / "claims_synthetic.csv").write_text("id\n")
        both_running.wait()  # and both wrote their claims before either finishes
        open(out, "w").write("{}")

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    monkeypatch.setattr(notebooks, "kernel_name", lambda: "python3")
    assert notebooks.execute("smoke", "synthetic", tmp_path, only=["01", "02"], progress=False, jobs=2) == []
    for stem, paper in (("01_bcls", "bcls"), ("02_ladder", "ladder")):
        stamp = json.loads((tmp_path / "notebooks" / f".{stem}.inputs").read_text())
        assert stamp["status"] == "ok" and stamp["claims"] == [f"{paper}/claims_synthetic.csv"]

    def failing(src, out, **kw):
        raise RuntimeError(f"cell failed in {Path(src).stem}")

    monkeypatch.setattr(papermill, "execute_notebook", failing)
    fails = notebooks.execute("smoke", "synthetic", tmp_path, only=["01", "02"], progress=False, force=True, jobs=2)
    assert [name for name, _ in fails] == ["01_bcls.ipynb", "02_ladder.ipynb"]
    with pytest.raises(ValueError, match="jobs"):
        notebooks.execute("smoke", "synthetic", tmp_path, only=["01"], progress=False, jobs=0)


def test_notebooks_of_two_data_sets_share_one_pool(tmp_path, monkeypatch):
    """``execute_all``: the notebooks of both data sets run in one pool of two kernels — a synthetic and a
    Flickr8k notebook overlap (the barrier needs both at once) — each writing under its own results folder;
    failures come back in data-set then notebook order, named with their data set."""
    import threading
    from pathlib import Path

    import papermill

    from reproduce.driver import notebooks

    both_running = threading.Barrier(2, timeout=30)
    seen = []

    def fake_execute(src, out, parameters, **kw):
        seen.append((parameters["data"], Path(src).stem))
        both_running.wait()
        open(out, "w").write("{}")

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    monkeypatch.setattr(notebooks, "kernel_name", lambda: "python3")
    targets = [("synthetic", tmp_path / "s", None), ("flickr8k", tmp_path / "f", None)]
    assert notebooks.execute_all("smoke", targets, only=["06"], progress=False, jobs=2) == []
    assert sorted(seen) == [("flickr8k", "06_data"), ("synthetic", "06_data")]
    for d in ("s", "f"):
        assert (tmp_path / d / "notebooks" / "06_data.ipynb").exists()

    def failing(src, out, parameters, **kw):
        raise RuntimeError(f"cell failed in {parameters['data']}")

    monkeypatch.setattr(papermill, "execute_notebook", failing)
    fails = notebooks.execute_all("smoke", targets, only=["06"], progress=False, force=True, jobs=2)
    assert [(d, n) for d, n, _ in fails] == [("synthetic", "06_data.ipynb"), ("flickr8k", "06_data.ipynb")]
    assert "cell failed in flickr8k" in fails[1][2]


def test_markdown_tables_round_to_four_significant_digits_and_csv_keeps_all(tmp_path):
    import numpy as np
    import pandas as pd
    from reproduce.present.report import save_table

    df = pd.DataFrame(
        {
            "r": [0.717751, 5.60472e-05],
            "n": [200000, 3],
            "s": ["a", "b"],
            "f32": np.array([446.867, np.nan], dtype=np.float32),
        },
        index=["x", "y"],
    )
    save_table(df, tmp_path, "p", "t", "caption")
    md = (tmp_path / "p" / "t.md").read_text()
    assert md.startswith("caption\n\n")
    assert "0.7178" in md and "5.605e-05" in md and "446.9" in md and "200000" in md and "| – |" in md
    assert "0.717751" not in md and "446.867" not in md
    assert "0.717751" in (tmp_path / "p" / "t.csv").read_text()


def test_driver_counts_an_evaluation_only_run_as_evaluated_not_trained(tmp_path, monkeypatch):
    """Of three runs: one fully cached, one trained before but never evaluated, one missing. The
    driver trains one, evaluates two, and the manifest says so (it used to count both as trained)."""
    from reproduce.driver import ledger_files
    from reproduce.present import tuning_tables
    from reproduce.protocol import tuning

    cache = RunCache(tmp_path)
    cfgs = tiny_configs(3)
    LocalExecutor(progress=False).run(cfgs[:1], cache)  # cached: trained and evaluated
    LocalExecutor(progress=False).run(cfgs[1:2], cache, evaluate=False)  # trained, not evaluated
    assert [cache.has(c) for c in cfgs] == [True, False, False] and cache.has_training(cfgs[1])
    monkeypatch.setattr(tuning, "tuning_configs", lambda profile, papers=None: cfgs)
    monkeypatch.setattr(tuning, "tuned_plan", lambda profile, papers, cache, **k: cfgs)  # the plan's final runs
    from reproduce.protocol import pipeline  # one tuning problem at a time, as the driver trains a tuned plan

    monkeypatch.setattr(
        pipeline,
        "ready_runs",
        lambda profile, papers, cache, failed_keys=(), **k: pipeline.Ready(
            [], [c for c in cfgs if not cache.has(c)], 0
        ),
    )
    monkeypatch.setattr(tuning_tables, "write_tuning_summary", lambda *a, **k: None)
    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path))
    monkeypatch.setattr(ledger_files, "collect", lambda d, **kw: None)
    seen = {}
    monkeypatch.setattr(ledger_files, "write_manifest", lambda *a, **k: seen.update(k))
    argv = ["--profile", "smoke", "--data", "synthetic", "--skip-notebooks", "--no-progress", "--workers", "1"]
    assert driver.main(argv) == 0
    assert seen["runs_trained"] == 1 and seen["runs_evaluated"] == 2
    assert seen["by_data"] == {"synthetic": {"runs_trained": 1, "runs_evaluated": 2}}
    est = seen["estimate"]  # the plan's estimate against what the invocation took (reproduce.protocol.progress)
    assert est["runs_done"] == 2 and est["actual_s"] > 0 and est["estimated_s"] > 0
    assert all(cache.has(c) for c in cfgs)


def test_trained_tuning_runs_leave_nothing_to_do(tmp_path, monkeypatch):
    """Tuning runs are trained, never evaluated: a plan whose tuning runs are all trained has nothing to do,
    so the notebooks are not re-executed for it (a rerun with nothing changed used to count every unevaluated
    tuning run as work and re-execute all 16 notebooks: 408 s instead of seconds)."""
    from reproduce.protocol import tuning

    cache = RunCache(tmp_path)
    cfgs = tiny_configs(2)
    LocalExecutor(progress=False).run(cfgs, cache, evaluate=False)  # trained, not evaluated
    assert not any(cache.has(c) for c in cfgs) and all(cache.has_training(c) for c in cfgs)
    monkeypatch.setattr(tuning, "tuning_configs", lambda profile, papers=None: cfgs)
    args = driver.parse_args(["--profile", "smoke", "--data", "synthetic"])
    plan = plan_mod.data_set_plan(get_profile(args.profile), "synthetic", args.papers, cache)
    assert plan.tuned and plan.configs == cfgs and plan.todo == []
    monkeypatch.setattr(tuning, "tuning_configs", lambda profile, papers=None: [*cfgs, tiny_configs(3)[2]])
    again = plan_mod.data_set_plan(args.profile, "synthetic", args.papers, cache)
    assert len(again.todo) == 1  # an untrained one still is work


def test_the_notebook_estimate_is_each_notebooks_last_execution_else_its_share_of_a_cold_run(tmp_path):
    """``--papers data`` used to be priced as every notebook of a cold run (≈ 5 min for a 10 s notebook)."""
    from reproduce.driver import notebooks
    from reproduce.spec.paths import notebook_paths

    sam, data = notebook_paths(["03"])[0], notebook_paths(["06"])[0]
    (tmp_path / "notebooks").mkdir()
    json.dump({"status": "ok", "started": 100.0, "finished": 140.0}, open(notebooks.stamp_path(tmp_path, sam), "w"))
    json.dump({"status": "failed", "started": 100.0}, open(notebooks.stamp_path(tmp_path, data), "w"))
    share = 2 * 80.0 / len(notebook_paths())  # a cold run's notebooks were measured with two kernels
    sets, cold = [("synthetic", tmp_path)], {"synthetic": 80.0}
    assert notebooks.expected_seconds(sets, ["03"], 1, cold) == pytest.approx(40.0)
    assert notebooks.expected_seconds(sets, ["06"], 1, cold) == pytest.approx(share)  # failed: no duration
    assert notebooks.expected_seconds(sets, ["03", "06"], 1, cold) == pytest.approx(40.0 + share)
    assert notebooks.expected_seconds(sets, ["03", "06"], 2, cold) == pytest.approx((40.0 + share) / 2)
    assert notebooks.expected_seconds(sets, ["03"], 2, cold) == pytest.approx(40.0)  # one notebook: one kernel
    every = notebooks.expected_seconds([("synthetic", tmp_path / "none")], None, 2, cold)
    assert every == pytest.approx(80.0)  # no stamp at all: the cold run's measured wall time


def test_a_notebooks_inputs_include_the_claims_file_and_the_paper_tables(tmp_path):
    """Notebooks write their claim rows from ``reproduce/data/claims.toml``: a change there alone (an arm group,
    a statement) must re-execute them, as a change of a module or a paper-number table does."""
    from reproduce.driver import notebooks
    from reproduce.spec.paths import notebook_paths

    pkg = tmp_path / "pkg"
    (pkg / "data" / "paper_tables").mkdir(parents=True)
    (pkg / "mod.py").write_text("x = 1\n")
    (pkg / "data" / "claims.toml").write_text('[[claim]]\nid = "S3"\n')
    (pkg / "data" / "paper_tables" / "sam.csv").write_text("a,b\n1,2\n")
    nb = notebook_paths(["03"])[0]
    base = notebooks.inputs_hash(nb, "default", "synthetic", pkg)
    assert base == notebooks.inputs_hash(nb, "default", "synthetic", pkg)
    seen = {base}
    for f, text in [
        ("data/claims.toml", '[[claim]]\nid = "S3"\narm_groups = ["grid"]\n'),
        ("data/paper_tables/sam.csv", "a,b\n1,3\n"),
        ("mod.py", "x = 2\n"),
    ]:
        (pkg / f).write_text(text)
        h = notebooks.inputs_hash(nb, "default", "synthetic", pkg)
        assert h not in seen, f
        seen.add(h)
    assert notebooks.inputs_hash(nb, "default", "flickr8k", pkg) not in seen

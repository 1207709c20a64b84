"""The runs a qualitative view reads: the ledger's tuned runs of one seed, never trained, a missing one named."""

from __future__ import annotations

import numpy as np
import pytest

from reproduce.present import view_runs


class _Arm:
    def __init__(self, name):
        self.name = name


class _TunedStudy:
    """A stand-in Study whose tuned configs differ from the arm's base setting; it records what is read."""

    def __init__(self, cached: bool = True, tuned: bool = True):
        from coherent_itr.config import Config

        self.seeds = (0, 1)
        self.profile = type("P", (), {"name": "stub"})()
        self._arms = [_Arm("VSE++"), _Arm("BCLS")]
        self.tuned = {
            a.name: [Config(epochs=1, lr=6e-4, warmup_epochs=1, seed=s) for s in self.seeds] for a in self._arms
        }
        self.read, self.cached, self.is_tuned = [], cached, tuned
        outer = self

        class Cache:
            def load_training(self, cfg):
                outer.read.append(cfg.key())
                if not outer.cached:
                    return None
                arrays = {"test_img": np.eye(2, dtype=np.float32), "test_cap": np.eye(2, dtype=np.float32)}
                return type("R", (), {"arrays": arrays})()

            def get_or_train(self, *a, **k):  # a view must never train
                raise AssertionError("a view trained a run")

        self.cache = Cache()

    def arms(self, paper):
        return self._arms

    def configs(self, arm, train_missing=True):
        from reproduce.protocol.tuning import TuningIncomplete

        assert train_missing is False, "views must not train tuning runs"
        if not self.is_tuned:
            raise TuningIncomplete("2 tuning run(s) are not in the cache")
        return self.tuned[arm.name]


def test_arm_embeddings_reads_exactly_the_ledgers_tuned_runs_and_never_trains():
    st = _TunedStudy()
    out = view_runs.arm_embeddings(st, "overview", ["VSE++", "BCLS"], seed=1)
    assert list(out) == ["VSE++", "BCLS"]
    assert st.read == [st.tuned["VSE++"][1].key(), st.tuned["BCLS"][1].key()]


def test_arm_embeddings_says_which_run_is_missing():
    with pytest.raises(
        view_runs.MissingRun, match=r"'BCLS'.*seed 0 \(run [0-9a-f]{16}, lr 0.0006, warm-up 1\).*make reproduce"
    ):
        view_runs.arm_embeddings(_TunedStudy(cached=False), "overview", ["BCLS"])
    with pytest.raises(view_runs.MissingRun, match="tuned setting is not known yet"):
        view_runs.arm_embeddings(_TunedStudy(tuned=False), "overview", ["VSE++"])

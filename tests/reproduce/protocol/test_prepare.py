"""Data preparation before training (``reproduce.protocol.prepare``)."""

from __future__ import annotations

from coherent_itr.config import Config


def test_preparation_featurises_the_later_final_runs_of_its_own_data_sets_only(monkeypatch):
    """``prepare(todo, later=bound)``: the final runs' subsets (other seeds) are loaded with the tuning runs';
    a later run of a data set not being prepared now is left to its own preparation."""
    from reproduce.protocol import prepare as prep

    seen = {}
    real_check = Config.check_train_size
    monkeypatch.setattr(Config, "check_train_size", lambda self, n, cpi: real_check(self, 6000, cpi))

    def fake_load(data, configs, **kw):
        seen[data] = [c.seed for c in configs]
        from coherent_itr.data.toy import make_toy_splits

        return make_toy_splits(20, 5, 5, seed=0)

    monkeypatch.setattr(prep, "load_for", fake_load)
    monkeypatch.setattr(prep, "embed_captions", lambda captions, progress=True, within=None: None)
    todo = [Config(data="flickr8k", train_fraction=0.1, seed=0)]
    later = [Config(data="flickr8k", train_fraction=0.1, seed=s) for s in (1, 2)] + [Config(seed=9)]
    prep.prepare(todo, progress=False, later=later)
    assert seen == {"flickr8k": [0, 1, 2]}

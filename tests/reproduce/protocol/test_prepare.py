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


def test_the_notebooks_data_is_prepared_once_as_their_study_loads_it(monkeypatch, capsys):
    """``prepare_analyses``: the data set's splits as its Study loads them for the notebooks (with the bar asked
    for), then one Sentence-BERT call over every caption of the three splits, ``within`` the whole set (the file the
    notebooks' relevance reads); a split that carries its embeddings (a bundle) embeds nothing."""
    from coherent_itr.data.toy import make_toy_splits

    from reproduce.protocol import prepare as prep

    calls = []
    splits = make_toy_splits(20, 5, 5, seed=0)

    class FakeStudy:
        def __init__(self, profile, data, progress=True):
            calls.append(("study", profile, data, progress))
            self.profile = type("P", (), {"data_scale": "default"})()

        def splits(self, progress=True):
            calls.append(("splits", progress))
            return splits

    def embed(captions, progress=True, within=None):
        calls.append(("embed", len(captions), within == captions))

    monkeypatch.setattr(prep, "Study", FakeStudy)
    monkeypatch.setattr(prep, "embed_captions", embed)
    n = sum(len(s.captions) for s in (splits.train, splits.dev, splits.test))
    took = prep.prepare_analyses("default", "synthetic", progress=False)
    assert calls == [("study", "default", "synthetic", False), ("splits", False), ("embed", n, True)]
    assert set(took) == {"synthetic_analyses_prepare_s"}
    said = capsys.readouterr().out
    distinct = len({c for s in (splits.train, splits.dev, splits.test) for c in s.captions})
    assert f"Sentence-BERT embeddings of {distinct:,} distinct captions" in said
    for s in (splits.train, splits.dev, splits.test):
        s.extras["sbert_embeddings"] = None
    calls.clear()
    prep.prepare_analyses("default", "flickr8k", progress=True)
    assert calls == [("study", "default", "flickr8k", False), ("splits", True)]


def test_the_notebooks_data_is_priced_cold_only_on_a_cache_without_it(tmp_path):
    """The plan prices the notebooks' data at its measured cold cost where this CPU's caches hold none of it (a fresh
    clone), and at nothing once they hold the caption embeddings (and, for Flickr8k, this CPU's image features)."""
    from coherent_itr.data.sbert import model_id
    from coherent_itr.determinism import cpu_tag

    from reproduce.protocol import prepare as prep
    from reproduce.spec.profiles import COSTS

    cold = {d: COSTS[d]["analyses_prepare_s"] for d in ("synthetic", "flickr8k")}
    both = ["synthetic", "flickr8k"]
    assert prep.analyses_estimate_s(both, tmp_path) == cold["synthetic"] + cold["flickr8k"]
    sbert = tmp_path / "sbert" / model_id(str(tmp_path)).replace("/", "_")
    sbert.mkdir(parents=True)
    (sbert / "0123.npz").write_bytes(b"")
    assert prep.analyses_estimate_s(both, tmp_path) == cold["flickr8k"]
    (tmp_path / "features" / f"efficientnet-lite0-x{cpu_tag() or ''}").mkdir(parents=True)
    assert prep.analyses_estimate_s(both, tmp_path) == 0.0
    other = "@SomeOtherCPU" if cpu_tag() == "" else ""
    for f in (tmp_path / "features").iterdir():
        f.rename(f.with_name("efficientnet-lite0-x" + other))
    assert prep.analyses_estimate_s(["flickr8k"], tmp_path) == cold["flickr8k"]

"""The label map covers every metric the evaluation produces; numbers print for reading."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from coherent_itr import evaluation, metrics
from coherent_itr.metrics.human import HumanJudgements, provider_agreement
from reproduce.spec import labels


def _record(fold_size=None) -> dict[str, float]:
    """Every key of ``metrics.evaluate`` as the study calls it (coherent_itr.evaluation): each pseudo-label
    provider of ``evaluation.PSEUDO_PROVIDERS``, true relevance with its positives, expert and crowd judgements."""
    rng = np.random.default_rng(0)
    n_img, cpi = 12, 5
    n_cap = n_img * cpi
    sim = rng.normal(size=(n_img, n_cap))
    rel = {name: rng.uniform(size=(n_img, n_cap)) for name in evaluation.PSEUDO_PROVIDERS}

    def judged(scores):
        return pd.DataFrame(
            {"image_idx": rng.integers(0, n_img, 60), "caption_idx": rng.integers(0, n_cap, 60), "score": scores}
        )

    human = {"expert": judged(rng.integers(1, 5, 60).astype(float)), "crowd": judged(rng.uniform(size=60))}
    return metrics.evaluate(
        sim,
        np.arange(n_cap) // cpi,
        rel=rel,
        true_rel=rng.uniform(size=(n_img, n_cap)),
        human=human,
        true_positive_threshold=evaluation.TRUE_POSITIVE_THRESHOLD,
        fold_size=fold_size,
    )


@pytest.mark.parametrize("fold_size", [None, 6])
def test_every_metric_key_of_evaluate_has_a_label(fold_size):
    rec = _record(fold_size)
    assert len(rec) > 250  # the record really holds every family (R@K … agreement), not a stub
    missing = [k for k in rec if not labels.has_label(k)]
    assert missing == [], f"metric keys without a label in reproduce/spec/labels.py: {missing}"
    # the labels tell keys apart (the parser keeps direction, K, yardstick and variant)
    lab = {k: labels.label(k) for k in rec}
    dup = pd.Series(lab).duplicated(keep=False)
    assert not dup.any(), f"keys sharing a label: {sorted(pd.Series(lab)[dup].index)}"
    # a label shows no raw key fragment
    for k, v in lab.items():
        assert not re.search(r"\b(i2t|t2i|sbert|cider|ngt|nongt)\b", v), (k, v)


def test_provider_agreement_and_study_columns_have_labels():
    rng = np.random.default_rng(1)
    h = HumanJudgements(np.array([0, 1, 2, 0]), np.array([0, 3, 7, 9]), np.array([4.0, 1.0, 2.5, 3.0]), "expert")
    rec = provider_agreement(
        {"sbert": rng.uniform(size=(3, 15)), "cider": rng.uniform(size=(3, 15))}, h, np.arange(15) // 5
    )
    assert all(labels.has_label(k) for k in rec), [k for k in rec if not labels.has_label(k)]
    for k in [
        "seed",
        "n_seeds",
        "best_epoch",
        "time_total_s",
        "val_rsum",
        "val_i2t_r1",
        "rsum_std",
        "cs100_i2t_true_nq",
    ]:
        assert labels.has_label(k), k


def test_examples_and_unknown_key():
    assert labels.label("cs100_i2t_true") == "CS@100 image→text (true relevance) [τ-b, −1…1] ↑"
    assert labels.label("rsum") == "RSUM (sum of R@1,5,10 both directions, %) ↑"
    assert labels.label("t2i_medr").endswith("↓")
    assert labels.info("ncs5ngt_t2i_cider").unit == "%"
    assert "ground truth removed" in labels.label("ncs5ngt_t2i_cider")
    assert "non-GT" in labels.label("expert_kendall_nongt")
    # a new metric (or yardstick) without a pattern fails loudly, naming the key and the file to edit
    for k in ["cs100_i2t_newyard", "foo_i2t_true", "rsum2"]:
        assert not labels.has_label(k)
        with pytest.raises(KeyError, match=re.escape(k) + ".*reproduce/spec/labels.py"):
            labels.info(k)


@pytest.mark.parametrize(
    "value,kind,text",
    [
        (59.08, "rsum", "59.1"),
        (459.08, "rsum", "459.1"),
        (1e-7, "rsum", "0.0"),
        (123456.78, "rsum", "123456.8"),
        (6000.0, "count", "6000"),
        (2.5, "count", "2.5"),
        (3.0, "int", "3"),
        (12.0, "rank", "12"),
        (12.5, "rank", "12.5"),
        (0.12345, "correlation", "0.123"),
        (-0.5, "correlation", "-0.500"),
        (0.000123456, "ratio", "0.0001235"),
        (1234567.0, "ratio", "1234567"),
        (float("nan"), "percent", "–"),
        (None, "unit", "–"),
        (np.float32(7.0), "count", "7"),
        ("VSE++", "text", "VSE++"),
    ],
)
def test_fmt_number(value, kind, text):
    assert labels.fmt_number(value, kind) == text


def test_fmt_number_never_scientific():
    for v in [5.908e01, 1e-12, 3.3e-5, 9.99e15, -2e-9]:
        for kind in labels.KINDS:
            assert "e" not in labels.fmt_number(v, kind).lower().replace("–", ""), (v, kind)
    with pytest.raises(ValueError, match="kind='pct'"):
        labels.fmt_number(1.0, "pct")


def test_readable_renames_formats_and_merges_std():
    df = pd.DataFrame(
        {
            "rsum": [459.08, 401.0],
            "rsum_std": [2.345, float("nan")],
            "n_seeds": [3.0, 1.0],
            "cs100_i2t_true": [0.4567, 0.5],
            "note": ["a", "b"],
        },
        index=pd.Index(["VSE++ (Triplet-HN)", "τ=3 RS keep=True"], name="arm"),
    )
    out = labels.readable(df)
    assert list(out.columns) == [labels.label("rsum"), labels.label("n_seeds"), labels.label("cs100_i2t_true"), "note"]
    assert out.iloc[:, 0].tolist() == ["459.1 ± 2.3", "401.0"]
    assert out.iloc[:, 1].tolist() == ["3", "1"]
    assert out.iloc[:, 2].tolist() == ["0.457", "0.500"]
    assert list(out.index) == ["VSE++ (Triplet-HN)", "SAM τ=3, random negative (RS), triplet kept"]
    md = labels.markdown(df)
    assert "e+" not in md and "rsum" not in md and "cs100_i2t_true" not in md
    assert "| 0.500 " in md and "| 401.0 " in md  # the formatted text survives (not re-parsed to 0.5, 401)


def test_glossary_spells_out_the_abbreviations():
    g = labels.glossary(["RS / HN / SN", "Triplet (mean)"])
    assert "random negative" in g and "hardest" in g and "least similar" in g and "averaged" in g
    assert g.count("\n") == 1
    with pytest.raises(KeyError, match="XYZ"):
        labels.glossary(["XYZ"])


def test_key_builds_the_record_keys_and_refuses_typos():
    rec = _record()
    built = [
        labels.key("cs", "i2t", "true", k=100),
        labels.key("ncs", "t2i", "cider", k=5, ngt=True),
        labels.key("nsum", yardstick="sbert", ngt=True),
        labels.key("sr", "i2t", "true", k=5, m=10),
        labels.key("r", "t2i", k=10),
        labels.key("mapr", "i2t", "expert"),
        labels.key("ndcg", "i2t", "sbert"),
    ]
    assert built == [
        "cs100_i2t_true",
        "ncs5ngt_t2i_cider",
        "nsumngt_sbert",
        "sr5m10_i2t_true",
        "t2i_r10",
        "mapr_i2t_expert",
        "ndcg_i2t_sbert",
    ]
    assert all(b in rec for b in built)
    with pytest.raises(KeyError, match="'cs100_i2t_ture'"):
        labels.key("cs", "i2t", "ture", k=100)
    with pytest.raises(KeyError, match="families"):
        labels.key("coherence", "i2t", "true")


def test_in_text_replaces_only_metric_keys():
    text = "mean val_rsum, epochs 1–2; Δ cs1000_i2t_sbert vs seed rsum_x"
    out = labels.in_text(text)
    assert labels.label("val_rsum") in out and labels.label("cs1000_i2t_sbert") in out
    assert "seed" in out and "rsum_x" in out and "epochs 1–2" in out  # study columns and non-keys stay
    assert not [t for t in labels._TOKEN.findall(out) if labels.is_metric_key(t)]
    assert labels.in_text("no keys here") == "no keys here"
    tab = labels.readable(pd.DataFrame({"Δ cs1000_i2t_true": [0.01234]}, index=pd.Index(["BCLS"], name="arm")))
    assert list(tab.columns) == [f"Δ {labels.label('cs1000_i2t_true')}"]

"""The metric registry: a metric registered from outside the package joins ``evaluate`` (each kind),
leaves it when unregistered, is selected by include / exclude, changes the evaluation key; options
are checked; the metric modules import each other without a cycle."""

import ast
from pathlib import Path

import numpy as np
import pytest
from pinned_evaluate import problem

from coherent_itr import metrics, runs
from coherent_itr.metrics import registry


@pytest.fixture
def study_problem():
    sim, img, rel, true, human, _ = problem(0, n_img=8)
    return sim, img, dict(rel=rel, true_rel=true, human=human, true_positive_threshold=0.8)


def _mean_diag(problem):
    sim, img = problem.sim, problem.image_of_caption
    return {"mean_diag": float(sim[img, np.arange(len(img))].mean())}


def test_a_matrix_metric_from_outside_joins_evaluate_and_leaves_it(study_problem):
    sim, img, kw = study_problem
    before = metrics.evaluate(sim, img, **kw)
    assert "mean_diag" not in before
    with metrics.registered("mean_diag", "matrix", _mean_diag):
        assert metrics.available()[-1] == "mean_diag"
        res = metrics.evaluate(sim, img, **kw)
        folded = metrics.evaluate(sim, img, fold_size=4, **kw)
    assert res["mean_diag"] == pytest.approx(np.mean([sim[i, c] for c, i in enumerate(img)]))
    assert {k: v for k, v in res.items() if k != "mean_diag"} == before  # nothing else moved
    per_fold = [np.mean([sim[i, c] for c, i in enumerate(img) if f * 4 <= i < f * 4 + 4]) for f in (0, 1)]
    assert folded["mean_diag"] == pytest.approx(np.mean(per_fold)) and folded["n_folds"] == 2
    assert "mean_diag" not in metrics.available()
    assert metrics.evaluate(sim, img, **kw) == before


def test_per_query_and_derived_metrics_from_outside(study_problem):
    sim, img, kw = study_problem

    def top1(rr, top1_scale):  # relevance of the model's first candidate, per query
        return {"top1rel": (top1_scale * rr.rel[:, 0], np.ones(len(rr.rel), dtype=bool))}

    def hit1(ranking, pos):  # is the first candidate a positive
        first = ranking.order(pos)[:, 0]
        return {"hit1": (pos[np.arange(len(pos)), first].astype(float), pos.any(axis=1))}

    def top1_sum(problem, record):
        return {f"top1sum_{n}": record[f"top1rel_i2t_{n}"] + record[f"top1rel_t2i_{n}"] for n in problem.rels}

    metrics.register("toy_top1", "relevance", options={"top1_scale": 1.0})(top1)
    metrics.register("toy_hit1", "positives", targets=lambda name: name != "gt")(hit1)
    metrics.register("toy_top1_sum", "derived")(top1_sum)
    try:
        res = metrics.evaluate(sim, img, top1_scale=2.0, **kw)
    finally:
        for n in ("toy_top1", "toy_hit1", "toy_top1_sum"):
            metrics.unregister(n)
    first = np.argmax(sim, axis=1)  # continuous scores: no ties
    assert res["top1rel_i2t_sbert"] == pytest.approx(2 * kw["rel"]["sbert"][np.arange(len(sim)), first].mean())
    assert res["top1rel_t2i_true_nq"] == sim.shape[1]
    assert res["top1sum_cider"] == res["top1rel_i2t_cider"] + res["top1rel_t2i_cider"]
    pos = kw["true_rel"] >= 0.8
    has = pos.any(axis=1)
    assert res["hit1_i2t_true"] == pytest.approx(pos[np.arange(len(sim)), first][has].mean())
    assert "hit1_i2t_expert" in res and "hit1_i2t_gt" not in res
    assert not any(k.startswith(("top1", "hit1")) for k in metrics.evaluate(sim, img, **kw))


def test_include_exclude_and_options(study_problem):
    sim, img, kw = study_problem
    full = metrics.evaluate(sim, img, **kw)
    only = metrics.evaluate(sim, img, include=["retrieval", "ndcg"], **kw)
    assert only == {
        k: v for k, v in full.items() if k.startswith(("i2t_r", "t2i_r", "i2t_me", "t2i_me", "rsum", "ndcg"))
    }
    no_cs = metrics.evaluate(sim, img, exclude=["coherence"], **kw)
    assert no_cs == {k: v for k, v in full.items() if not k.startswith(("cs", "tau_"))}
    with pytest.raises(TypeError, match="unknown option.*cs_k'"):
        metrics.evaluate(sim, img, cs_k=(5,))
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        metrics.evaluate(sim, img, include=["nope"])


def test_registration_errors():
    metrics.register("toy_a", "matrix")(_mean_diag)
    try:
        with pytest.raises(ValueError, match="registered twice"):
            metrics.register("toy_a", "matrix")(lambda problem: {})
        with pytest.raises(ValueError, match="option 'ncs_ks' has default"):
            metrics.register("toy_b", "derived", options={"ncs_ks": (3,)})(lambda problem, record, ncs_ks: {})
        with pytest.raises(ValueError, match="kind must be one of"):
            metrics.register("toy_c", "query")(_mean_diag)
    finally:
        metrics.unregister("toy_a")
    assert "toy_b" not in metrics.available() and "toy_c" not in metrics.available()


def test_an_outside_metric_changes_the_evaluation_key():
    base = runs.evaluation_code_hash()
    assert registry.fingerprint() == ""  # the package's own metrics enter the key by their files
    with metrics.registered("mean_diag", "matrix", _mean_diag):
        with_toy = runs.evaluation_code_hash()
    assert with_toy != base and runs.evaluation_code_hash() == base


def test_metric_modules_import_each_other_without_a_cycle():
    root = Path(metrics.__file__).parent
    graph = {}
    for f in root.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):  # imports inside functions count too
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
        graph[f.stem] = deps & {g.stem for g in root.glob("*.py")}
    assert graph["_engine"] <= {"_blocks", "_orders", "registry"}  # the engine knows no metric
    assert graph["_orders"] <= {"_blocks"}  # the sort of a relevance matrix, no metric either
    assert graph["registry"] == set()

    def visit(node, path):
        assert node not in path, f"import cycle: {' -> '.join([*path, node])}"
        for dep in graph.get(node, ()):
            visit(dep, [*path, node])

    for node in graph:
        if node != "__init__":
            visit(node, [])

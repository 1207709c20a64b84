"""The usage examples in the library's docstrings run (``doctest`` over every module of
``src/coherent_itr``), and the modules whose docstrings carry the README-level examples keep them."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import coherent_itr
from coherent_itr import losses, metrics

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(coherent_itr.__path__, prefix="coherent_itr.") if not m.ispkg
) + ["coherent_itr", "coherent_itr.data", "coherent_itr.losses", "coherent_itr.metrics"]

WITH_EXAMPLES = {  # module -> the least number of example lines it runs
    "coherent_itr": 4,
    "coherent_itr.registry": 5,
    "coherent_itr.config": 3,
    "coherent_itr.data": 2,
    "coherent_itr.data.relevance_stats": 3,
    "coherent_itr.losses": 4,
    "coherent_itr.losses.registry": 4,
    "coherent_itr.metrics.evaluate": 3,
    "coherent_itr.metrics.queries": 5,
    "coherent_itr.metrics.registry": 4,
}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    before = (losses.available(), metrics.available())
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (see the output)"
    assert result.attempted >= WITH_EXAMPLES.get(name, 0), f"{name} lost its examples"
    assert (losses.available(), metrics.available()) == before  # an example leaves the registries as it found them


def test_the_example_list_names_real_modules():
    assert set(WITH_EXAMPLES) <= set(MODULES)


def _public_api():
    import inspect

    from coherent_itr import data, evaluation, train
    from coherent_itr.config import Config

    out = {"coherent_itr.train.train": train.train, "coherent_itr.config.Config": Config}
    out.update(
        {f"coherent_itr.evaluation.{n}": getattr(evaluation, n) for n in ("evaluate_run", "evaluate_embeddings")}
    )
    for mod in (metrics, losses, data):
        for n in mod.__all__:
            obj = getattr(mod, n)
            if callable(obj) and not inspect.isclass(obj):
                out[f"{mod.__name__}.{n}"] = obj
    return out


def test_the_public_api_documents_its_arguments_and_results():
    import inspect

    api = _public_api()
    assert len(api) > 30 and "coherent_itr.metrics.per_query" in api and "coherent_itr.losses.build" in api
    missing = {}
    for name, obj in api.items():
        doc = inspect.getdoc(obj) or ""
        sections = ("Args:", "Raises:") if inspect.isclass(obj) else ("Args:", "Returns:")
        lacking = [s for s in sections if s not in doc]
        if lacking:
            missing[name] = lacking
    assert missing == {}

"""The runs a qualitative view shows: each arm's cached run of one seed at its family's tuned setting (never trained
here), its rankings of the test split, and what :mod:`reproduce.present.qualitative` draws them against (the split, its
relevance, the expert judgements, the photos). Re-exported by :mod:`reproduce.present.qualitative`.
"""

from __future__ import annotations

from coherent_itr import evaluation, paths

from reproduce.protocol.tuning import TuningIncomplete
from reproduce.present.rankings import Ranking


class MissingRun(LookupError):
    """A run a view needs is not in the run cache (views never train: they show the study's own runs)."""


def _arm_runs(study, paper: str, arms: list[str], seed: int | None = None) -> dict:
    """``{arm: cached run}`` of ``arms`` of ``paper`` for one seed (see :func:`arm_embeddings`)."""
    seed = study.seeds[0] if seed is None else seed
    by_name = {a.name: a for a in study.arms(paper)}
    unknown = [a for a in arms if a not in by_name]
    if unknown:
        raise KeyError(f"paper {paper!r} has no arm(s) {unknown}; arms: {list(by_name)}")
    todo = f"run `make reproduce` (or `python -m reproduce --papers {paper}`) first"
    out = {}
    for name in arms:
        try:
            configs = study.configs(by_name[name], train_missing=False)
        except TuningIncomplete as e:
            raise MissingRun(f"arm {name!r} of {paper!r}: its tuned setting is not known yet ({e}); {todo}") from e
        cfg = next((c for c in configs if c.seed == seed), None)
        if cfg is None:
            raise ValueError(f"arm {name!r} has no run with seed {seed} under profile {study.profile.name}")
        res = study.cache.load_training(cfg)
        if res is None:
            raise MissingRun(
                f"arm {name!r} of {paper!r}, seed {seed} (run {cfg.key()}, lr {cfg.lr:g}, warm-up "
                f"{cfg.warmup_epochs}) is not in the run cache; {todo}"
            )
        out[name] = res
    return out


def arm_embeddings(study, paper: str, arms: list[str], seed: int | None = None) -> dict:
    """``{arm: (test_img, test_cap)}`` of ``arms`` of ``paper`` under ``study`` (a
    :class:`reproduce.protocol.study.Study`) for one seed (default: the profile's first), from exactly the runs
    the tables and the ledger use: each arm at its family's tuned setting (``Study.configs``). Nothing is
    trained here: a run (or a tuning run that decides the setting) missing from the cache raises
    :class:`MissingRun`, naming the arm, the seed, the run key and the command that trains it."""
    return {
        a: (res.arrays["test_img"], res.arrays["test_cap"]) for a, res in _arm_runs(study, paper, arms, seed).items()
    }


def arm_rankings(study, paper: str, arms: list[str], seed: int | None = None) -> dict[str, Ranking]:
    """``{arm: Ranking}`` of the same runs as :func:`arm_embeddings`: from their test embeddings, or from the
    rankings an archive carried for a run imported without them (:meth:`Ranking.of_run`)."""
    return {a: Ranking.of_run(res) for a, res in _arm_runs(study, paper, arms, seed).items()}


def study_views(study, paper: str, arms: list[str], seed: int | None = None) -> dict:
    """What the views need for ``arms`` of ``paper`` under ``study``, as keyword arguments of
    :func:`explorer` / :func:`figure_qualitative`: ``sims`` (per arm, its :class:`Ranking`), the test ``split``,
    ``relevance`` (Sentence-BERT relevance of :func:`coherent_itr.evaluation.yardsticks`, (1 + cos)/2
    in [0, 1], plus the synthetic world's true relevance when known), ``human`` (the expert judgements,
    when the data set has them) and ``images_dir`` (the Flickr8k photos, when configured)."""
    split = study.splits().test
    sims = arm_rankings(study, paper, arms, seed)
    for arm, sim in sims.items():
        if sim.shape != (split.n_images, split.n_captions):
            raise ValueError(
                f"arm {arm!r}: test embeddings give a {sim.shape} similarity, the {split.name} split "
                f"has {split.n_images} images × {split.n_captions} captions"
            )
    rel, true, human = evaluation.yardsticks(split)
    relevance = {"sbert": rel["sbert"], **({"true": true} if true is not None else {})}
    images_dir = None
    if split.name.startswith("flickr8k"):
        root = paths.flickr8k_dir(required=False)
        images_dir = None if root is None else root / "images"
    return dict(sims=sims, split=split, relevance=relevance, human=(human or {}).get("expert"), images_dir=images_dir)

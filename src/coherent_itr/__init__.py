"""coherent_itr: losses, metrics and a seeded training loop for image-text retrieval.

* :mod:`coherent_itr.losses` — the five papers' objectives, built by name (``losses.build``);
* :mod:`coherent_itr.metrics` — every metric in one record (``metrics.evaluate``) and its per-query
  values (``metrics.per_query``);
* :mod:`coherent_itr.data` — data sources, relevance (pseudo-label) providers, relevance statistics;
* :mod:`coherent_itr.train` / :mod:`coherent_itr.evaluation` — one training run from a
  :class:`~coherent_itr.config.Config`, and its test evaluation;
* :mod:`coherent_itr.registry` — the name → object registry losses and metrics are kept in.

A loss and a metric in a few lines::

    >>> import numpy as np, torch
    >>> from coherent_itr import losses, metrics
    >>> sim = np.array([[0.9, 0.1, 0.3, 0.2], [0.2, 0.8, 0.7, 0.1]])   # 2 images × 4 captions
    >>> image_of_caption = [0, 0, 1, 1]                                # captions 0, 1 describe image 0
    >>> metrics.evaluate(sim, image_of_caption, include=["retrieval"], ks=(1,))["rsum"]
    100.0
    >>> crit = losses.build("triplet", margin=0.2)                     # VSE++ hardest-negative triplet
    >>> float(crit(torch.eye(3)))                                      # B×B batch similarities
    0.0
"""

"""The five papers' objectives as ``torch.nn.Module`` losses, built by name.

Every loss is called as ``loss(sim, rel=None)`` (see :mod:`coherent_itr.losses.base`) and
registered under a name for :func:`build`::

    >>> import torch
    >>> from coherent_itr import losses
    >>> crit = losses.build("triplet", margin=0.2, max_violation=True)
    >>> sim = torch.tensor([[0.9, 0.5], [0.1, 0.8]])   # B×B image-caption similarities, diagonal = pairs
    >>> round(float(crit(sim)), 4)                     # every positive beats its hardest negative by > 0.2
    0.0
    >>> round(float(losses.build("triplet", margin=0.5)(sim)), 4)  # (0.5 − 0.9 + 0.5) + (0.5 − 0.8 + 0.5)
    0.3

Importing this package imports every loss module in it (one per family), so the registry is
complete; ``available()`` lists the names, ``register`` / ``unregister`` / ``registered`` add and
remove a loss from user code (:mod:`.registry`).
"""

from __future__ import annotations

import importlib
import pkgutil

from .registry import LossParameterTypeError, available, build, parameters, register, registered, unregister

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name not in ("registry", "base"):
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["LossParameterTypeError", "available", "build", "parameters", "register", "registered", "unregister"]

"""The five papers' objectives as ``torch.nn.Module`` losses, built by name.

Every loss is called as ``loss(sim, rel=None)`` (see :mod:`coherent_itr.losses.base`) and
registered under a name for :func:`build`::

    from coherent_itr import losses
    crit = losses.build("triplet", margin=0.2, max_violation=True)
    value = crit(sim)                      # sim: B×B image-caption similarities

Importing this package imports every loss module in it (one per family), so the registry is
complete; ``available()`` lists the names.
"""

from __future__ import annotations

import importlib
import pkgutil

from .registry import LossParameterTypeError, available, build, parameters, register, registered, unregister

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name not in ("registry", "base"):
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["LossParameterTypeError", "available", "build", "parameters", "register", "registered", "unregister"]

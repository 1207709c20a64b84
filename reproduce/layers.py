"""The import layers of ``reproduce/``, bottom to top; ``tests/test_import_layers.py`` enforces them.

A module imports only modules of its own layer or of a layer below, and no import circle anywhere (function-local
imports included). The layers are the package's folders:

* ``spec/`` — **specification**, what the study is: the profiles (sizes, schedules, costs per run), the arms of every
  paper, the claims and their loader, the papers' published numbers, the label map; and the two leaf helpers
  everything is written with: where the files are (:mod:`reproduce.spec.paths`, the one ``ROOT``) and the Markdown
  table format (:mod:`reproduce.spec.tables`). No training, no run cache.
* ``protocol/`` — **protocol**, how the study is run and decided: the tuner, the
  :class:`~reproduce.protocol.study.Study` that resolves arms to tuned runs, the plan with its cost and progress, data
  preparation, the verdict rule and the ledger, the claim rows, the verdict simulation, the θ calibration and the
  main comparison.
* ``present/`` — **presentation**, what the notebooks show: the page every notebook starts with, tables and figures,
  the qualitative views, the static site and the per-paper analyses (``present/analyses/``).
* ``driver/`` — **driver**, what runs it all: the command line (``python -m reproduce``), the executors (local
  processes, Ray), notebook execution and the data bundle.

The package's own files sit in :data:`ROOT_MODULES`. Module names are relative to the package
(``"present.analyses.bcls"`` is ``reproduce.present.analyses.bcls``; ``"__init__"`` is the package itself).
"""

from __future__ import annotations

ORDER = ("specification", "protocol", "presentation", "driver")
FOLDERS = {"spec": "specification", "protocol": "protocol", "present": "presentation", "driver": "driver"}
# the package itself, this map, and the two commands at its root (python -m reproduce, python -m reproduce.bundle)
ROOT_MODULES = {"__init__": "specification", "layers": "specification", "__main__": "driver", "bundle": "driver"}


def layer_of(module: str) -> str | None:
    """The layer of ``module`` (relative to the package): its top folder's, or a root module's; None for any other."""
    if module in ROOT_MODULES:
        return ROOT_MODULES[module]
    return FOLDERS.get(module.split(".")[0])


def layer_map(modules) -> dict[str, str]:
    """``{module: layer}`` for the ``modules`` that :func:`layer_of` places (the others are in no layer)."""
    return {m: layer for m in modules if (layer := layer_of(m)) is not None}

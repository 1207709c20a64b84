"""The import layers of ``reproduce/``, bottom to top; ``tests/test_import_layers.py`` enforces them.

A module imports only modules of its own layer or of a layer below, and no import circle anywhere (function-local
imports included). The layers:

* **specification** — what the study is: the profiles (sizes, schedules, costs per run), the arms of every paper,
  the claims and their loader, the papers' published numbers, the label map; and the two leaf helpers everything
  is written with: where the files are (:mod:`reproduce.paths`, the one ``ROOT``) and the Markdown table format
  (:mod:`reproduce.tables`). No training, no run cache.
* **protocol** — how the study is run and decided: the tuner, the :class:`~reproduce.study.Study` that resolves
  arms to tuned runs, the plan with its cost and progress, data preparation, the verdict rule and the ledger, the
  claim rows, the verdict simulation, the θ calibration and the main comparison.
* **presentation** — what the notebooks show: the page every notebook starts with, tables and figures, the
  qualitative views, the static site and the per-paper analyses (``reproduce/analyses/``).
* **driver** — what runs it all: the command line (``python -m reproduce``), the executors (local processes,
  Ray), notebook execution and the data bundle.

Module names are relative to the package (``"analyses.bcls"`` is ``reproduce.analyses.bcls``; ``"__init__"`` is
the package itself).
"""

from __future__ import annotations

ORDER = ("specification", "protocol", "presentation", "driver")

LAYERS = {
    # specification
    "__init__": "specification",
    "layers": "specification",
    "paths": "specification",
    "tables": "specification",
    "profiles": "specification",
    "claim_data": "specification",
    "experiments": "specification",
    "labels": "specification",
    "claims": "specification",
    "paper_numbers": "specification",
    # protocol
    "tuning": "protocol",
    "study": "protocol",
    "prepare": "protocol",
    "progress": "protocol",
    "ledger": "protocol",
    "ledger_io": "protocol",
    "claim_rows": "protocol",
    "verdict_simulation": "protocol",
    "calibration": "protocol",
    "main_comparison": "protocol",
    # presentation
    "report": "presentation",
    "qualitative": "presentation",
    "page": "presentation",
    "site": "presentation",
    "analyses": "presentation",
    "analyses.plotting": "presentation",
    "analyses.overview": "presentation",
    "analyses.bcls": "presentation",
    "analyses.ladder": "presentation",
    "analyses.sam": "presentation",
    "analyses.listwise": "presentation",
    "analyses.unified": "presentation",
    # driver
    "__main__": "driver",
    "executors": "driver",
    "notebooks": "driver",
    "bundle": "driver",
}

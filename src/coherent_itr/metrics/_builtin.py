"""Imports the package's metric modules in the order their metrics are registered — which is the
order of the keys in the record of ``evaluate``: binary R@K, the per-query pass (coherence, then
the semantic metrics), Nsum, human agreement. Imported first by the package."""

import importlib

for _name in ("binary", "coherence", "semantic", "human"):
    importlib.import_module(f"{__package__}.{_name}")

"""The arms whose runs' test embeddings the notebooks read, beyond their test metrics.

Every other consumer of a run reads its record (config, history, health), its test metrics, or — for the
ledger's test-set variance — its per-query R@K hits. A run archive (``python -m reproduce --export-runs``)
therefore keeps the test embeddings of these arms' runs only (every seed) and the per-query hits of all
the others, so that it fits the size a GPU machine can send back.

Per paper, the arms of:

* the qualitative figures (``Page.qualitative`` in notebooks 01, 02, 04; the explorer of notebook 07);
* SAM Table 1's model-based variant (per-query NCS of the 100 %-data arms, ``analyses.sam.ARMS_100``);
* listwise Fig. 7 (b) (the direct S-NDCG error on the stored embeddings of ``Triplet + S-NDCG``).

``tests/reproduce/driver/test_run_archive.py`` checks this list against the notebooks and the analyses' arm constants.
"""

from __future__ import annotations

EMBEDDING_VIEWS: dict[str, tuple[str, ...]] = {
    "overview": ("VSE++ (Triplet-HN)", "BCLS (Triplet-SN + Kendall SW-HS)"),
    "bcls": ("Triplet-HN", "BCLS"),
    "ladder": ("VSE++", "Ladder (manual)", "Ladder (adaptive)"),
    "sam": ("100% data, Triplet-HN", "100% data, + SAM"),
    "listwise": ("Triplet (mean)", "Triplet + S-NDCG"),
}

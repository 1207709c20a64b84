"""The views that read runs' test embeddings beyond their test metrics, and what each reads.

Every other consumer of a run reads its record (config, history, health), its test metrics, or — for the
ledger's test-set variance — its per-query R@K hits. A run archive (``python -m reproduce --export-runs``)
therefore carries, for a run exported without its test embeddings, its per-query hits and, for the runs these
views read, what they read of them (:mod:`reproduce.present.rankings`), so that it fits the size a GPU machine can
send back and another machine draws every view from it:

* ``qualitative`` — the qualitative figures (``Page.qualitative`` in notebooks 01, 02, 04) and the explorer of
  notebook 07: the first seed's top :data:`VIEW_K` candidates of every image and caption query;
* ``sam_table1`` — SAM Table 1's model-based variant (``analyses.sam_agreement.ARMS_100``): every seed's top
  :data:`SAM_K` captions of every image query (it reads the top 5);
* ``fig7b`` — listwise Fig. 7 (b): every seed's |NDCG-hat − NDCG| on its test batches (``analyses.listwise``).

``tests/reproduce/driver/test_run_archive.py`` checks these arms against the notebooks and the analyses' constants.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VIEW_K = 10  # candidates per query kept for the qualitative views (they show 5; the explorer may show up to 10)
# candidates per image query kept for SAM Table 1, which reads the top 5 under the library's tie rule: the 5 and
# those after them, so that every candidate tied with the 5th is kept unless 4 more tie (then the view says so)
SAM_K = 8


@dataclass(frozen=True)
class View:
    """What one view reads of each run of its arms (``{paper: arm names}``): the runs of the first seed only
    (``first_seed``) or of every seed; the top ``ranks[query]`` candidates of each query (``"image"``: image→text,
    ``"caption"``: text→image); and stored sets of an analysis by name (``arrays``)."""

    arms: dict[str, tuple[str, ...]]
    first_seed: bool
    ranks: dict[str, int] = field(default_factory=dict)
    arrays: tuple[str, ...] = ()


VIEWS: dict[str, View] = {
    "qualitative": View(
        arms={
            "overview": ("VSE++ (Triplet-HN)", "BCLS (Triplet-SN + Kendall SW-HS)"),
            "bcls": ("Triplet-HN", "BCLS"),
            "ladder": ("VSE++", "Ladder (manual)", "Ladder (adaptive)"),
            "listwise": ("Triplet (mean)", "Triplet + S-NDCG"),
        },
        first_seed=True,
        ranks={"image": VIEW_K, "caption": VIEW_K},
    ),
    "sam_table1": View(
        arms={"sam": ("100% data, Triplet-HN", "100% data, + SAM")}, first_seed=False, ranks={"image": SAM_K}
    ),
    "fig7b": View(arms={"listwise": ("Triplet + S-NDCG",)}, first_seed=False, arrays=("fig7b",)),
}

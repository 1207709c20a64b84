"""The ledger, the ladder and Unified notebooks' claim rows and the qualitative figure on planted inputs
(``tests/output_fingerprints.py``) give the outputs recorded in ``tests/data/output_fingerprints.json``: those of
the code before its long functions were split into named steps (commit 5af0466). A refactor of
``ledger_rows.build_ledger``, ``analyses.ladder_claims.claim_rows``, ``analyses.unified_claims.claim_rows`` /
``identity_claim_rows`` or ``qualitative.figure_qualitative`` must leave every fingerprint as it is; a change
of what they compute updates the file on purpose (``python tests/output_fingerprints.py``)."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import output_fingerprints
from helpers import DATA

RECORDED = DATA / "output_fingerprints.json"


def test_outputs_are_those_recorded_before_the_split():
    want = json.loads(RECORDED.read_text())
    with plt.style.context("default"):  # as recorded: not the style another test (or a notebook) left set
        got = output_fingerprints.fingerprints(want["digits"])
    assert sorted(got) == sorted(want["fingerprints"])
    changed = [k for k in got if got[k] != want["fingerprints"][k]]
    assert not changed, f"outputs differ from those recorded at {want['recorded_at']}: {changed}"

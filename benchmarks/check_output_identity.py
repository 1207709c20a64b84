"""Check: the sha256 of what four ``reproduce/`` functions produce, to show a refactor changed no output byte.

The functions: ``ledger_rows.build_ledger`` (through ``ledger_files.collect``: ``claims.csv`` and ``claims.md``),
``analyses.ladder_claims.claim_rows``, ``analyses.unified_claims.claim_rows`` / ``identity_claim_rows`` and
``qualitative.figure_qualitative``. The inputs:

* the committed claim files (``results/*/claims_*.csv``, ``results/flickr8k/*/claims_*.csv``), copied to a
  temporary folder and collected there without and with planted collapsed arms. Claim files
  written before the registry changed a primary contrast's statement carry a row declared ``primary`` that
  is no longer the registry's; ``collect`` refuses them, so here they are read as secondary rows (the count
  is printed);
* the planted inputs of ``tests/output_fingerprints.py`` (every branch of the four functions), at every bit
  (``repr`` of each float) and the qualitative figure's rendered pixels.

Run it at two commits and compare the lines (``diff``); nothing is trained, no cache is read:

    .venv/bin/python benchmarks/check_output_identity.py > /tmp/after.txt

Prints ``<sha256>  <output>`` lines, then how the rebuilt ledger differs from the committed ``results/claims.csv``.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import pandas as pd  # noqa: E402

import output_fingerprints  # noqa: E402
from reproduce.spec import claims as registry  # noqa: E402
from reproduce.protocol import claim_files  # noqa: E402
from reproduce.driver import ledger_files  # noqa: E402


def _stale_primaries(df: pd.DataFrame) -> pd.Series:
    """Rows declared ``primary`` whose statement is not their claim's primary statement in the registry."""
    role = df["role"] if "role" in df else pd.Series("", index=df.index)
    want = df["id"].map(lambda c: registry.CLAIMS[c].primary.statement if c in registry.CLAIMS else None)
    return (role.astype(str) == "primary") & (df["statement"] != want)


def copy_claim_files(dest: Path) -> int:
    """The committed claim files under ``dest`` (same layout); stale primaries read as secondary. Their count."""
    n = 0
    for p in claim_files.claim_files(ROOT / "results"):
        out = dest / p.relative_to(ROOT / "results")
        out.parent.mkdir(parents=True, exist_ok=True)
        df = pd.read_csv(p)
        stale = _stale_primaries(df)
        n += int(stale.sum())
        if stale.any():
            df.loc[stale, "role"] = float("nan")
            df.to_csv(out, index=False)
        else:
            shutil.copyfile(p, out)
    return n


def committed_ledgers() -> tuple[dict, int, pd.DataFrame]:
    """{output name: bytes} of ``collect`` on the committed claim files, the number of stale primaries read as
    secondary, and the plain ledger."""
    out = {}
    cases = {
        "plain": {},
        "collapsed": dict(
            collapsed={("synthetic", "Triplet-HN"): "gap 0.0003", ("flickr8k", "VSE++"): "gap 0.0002"},
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        n_stale = copy_claim_files(Path(tmp))
        for name, kw in cases.items():
            df = ledger_files.collect(tmp, **kw)
            for f in ("claims.csv", "claims.md"):
                out[f"committed claim files, {name}: {f}"] = (Path(tmp) / f).read_bytes()
            if name == "plain":
                plain = df
    return out, n_stale, plain


def compare_with_committed(df: pd.DataFrame) -> list[str]:
    """How the rebuilt ledger differs from ``results/claims.csv`` (columns, then rows of the shared columns)."""
    old = pd.read_csv(ROOT / "results" / "claims.csv")
    new = pd.read_csv(io.StringIO(df.to_csv(index=False)))
    lines = [
        f"columns only in the rebuilt ledger: {[c for c in new.columns if c not in old.columns]}",
        f"columns only in results/claims.csv: {[c for c in old.columns if c not in new.columns]}",
        f"rows: rebuilt {len(new)}, committed {len(old)}",
    ]
    common = [c for c in old.columns if c in new.columns and c != "health_evaluated"]
    if len(old) == len(new):
        a, b = old[common].astype(str), new[common].astype(str)
        diff = (a != b).any(axis=1)
        cols = [c for c in common if (a[c] != b[c]).any()]
        lines.append(f"rows differing in the shared columns: {int(diff.sum())} (columns: {cols})")
    return lines


def main() -> None:
    ledgers, n_stale, plain = committed_ledgers()
    for name, data in ledgers.items():
        print(f"{hashlib.sha256(data).hexdigest()}  {name}")
    for name, sha in output_fingerprints.fingerprints(digits=None, pixels=True).items():
        print(f"{sha}  planted: {name}")
    print(
        f"# {n_stale} committed row(s) declared primary with a statement the registry no longer has: read as secondary"
    )
    for line in compare_with_committed(plain):
        print(f"# {line}")


if __name__ == "__main__":
    main()

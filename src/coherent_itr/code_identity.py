"""The code identity of the run keys: edit the library without retraining runs whose numbers the edit keeps.

A training key hashes the source of the files a run executes (:func:`coherent_itr.runs.training_files`), so any
edit of those files — a comment, a clearer error message, a new code path that the run never takes — moved every
affected key, and a cache of hundreds of CPU-hours had to train again. ``code_identity.json`` beside this module
records, at one *freeze*, the code hash of every file set the study's runs execute (and of the evaluation code)
and the sha256 of every file in them. While a file set's files are as frozen, its live hash is its frozen hash.
After an edit:

* an edit that keeps every number of every run (a message, a comment, a branch the study's runs never enter)
  is **declared** in the file's ``neutral_edits`` entry — the sha256 of its new content and *why* the numbers
  are unchanged — and the file set keeps its frozen hash, so the cached runs keep their keys. A declaration
  that holds on some device types only (``devices``, e.g. ``["cpu"]``: an edit of a CUDA-only path, whose GPU
  numbers the CPU cannot check) keeps the frozen hash for those; the keys of other devices' runs hash the file
  as it is, so those runs train again (an entry without ``devices`` holds on every device);
* an edit that changes numbers is **frozen again** (``python -m reproduce.driver.code_identity --freeze FILE …``):
  every file set holding one of those files gets the live hash, and only its runs train again.

What checks a declaration: ``tests/lib/test_code_identity.py`` fails for a file whose content is neither as frozen
nor as declared (so every edit is looked at), and it trains pinned tiny runs of every loss (histories and test
embeddings, bit for bit on the CPU that pinned them, ``tests/data/engine_pins.json``) so an edit declared neutral
that moves a number is caught. File sets that are not frozen (a new loss, the toy data) are hashed live as before.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
IDENTITY_FILE = PACKAGE_DIR / "code_identity.json"


def file_sha256(rel: str, package_dir: Path = PACKAGE_DIR) -> str:
    return hashlib.sha256((package_dir / rel).read_bytes()).hexdigest()


@lru_cache(maxsize=1)
def load() -> dict:
    """The identity file (``{}`` when absent: every hash live)."""
    try:
        return json.loads(IDENTITY_FILE.read_text())
    except FileNotFoundError:
        return {}


def frozen_hash(rel_paths: tuple[str, ...], device: str = "cpu") -> str | None:
    """The frozen code hash of the file set ``rel_paths`` (sorted package-relative paths) for the runs of a
    ``device`` type (``"cpu"``, ``"cuda"``), or ``None`` when the set is not frozen or one of its files changed
    without a declaration that holds on that device (then the live hash applies: an undeclared edit moves the
    keys, as every edit did before the freeze)."""
    frozen = _frozen_sets().get(rel_paths)
    if frozen is None:
        return None
    changed = _changed_now()
    return None if any(not holds(changed.get(rel), device) for rel in rel_paths) else frozen


def holds(state: str | None, device: str) -> bool:
    """Whether a file in ``state`` (:func:`changed_files`; ``None``: as frozen) keeps its frozen hash on ``device``."""
    if state is None or state == "declared":
        return True
    if state.startswith("declared:"):
        return device in state.split(":", 1)[1].split(",")
    return False


@lru_cache(maxsize=1)
def _changed_now() -> dict[str, str]:
    return changed_files()


@lru_cache(maxsize=1)
def _frozen_sets() -> dict[tuple[str, ...], str]:
    return {tuple(s["files"]): s["hash"] for s in load().get("sets", [])}


def changed_files(package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """``{file: state}`` for every frozen file whose content is not as frozen: ``"declared"`` (its sha256 is the one
    its ``neutral_edits`` entry declares), ``"declared:cpu"`` (declared for the runs of those device types only:
    the entry's ``devices``), ``"undeclared"``, or ``"missing"``."""
    ident = load()
    out = {}
    for rel, sha in ident.get("files", {}).items():
        if not (package_dir / rel).is_file():
            out[rel] = "missing"
            continue
        now = file_sha256(rel, package_dir)
        if now != sha:
            declared = ident.get("neutral_edits", {}).get(rel, {})
            if declared.get("sha256") != now:
                out[rel] = "undeclared"
            else:
                devices = declared.get("devices")
                out[rel] = f"declared:{','.join(devices)}" if devices else "declared"
    return out


def freeze(sets: list[tuple[str, ...]], live_hash, only: set[str] | None = None) -> dict:
    """A new identity: every set in ``sets`` with ``live_hash(set)`` — or, with ``only``, the sets holding one of
    those files take their live hash and every other frozen set keeps its frozen one. The declarations of the
    re-frozen files are dropped (their content is now the frozen one)."""
    old = load()
    keep = {tuple(s["files"]): s["hash"] for s in old.get("sets", [])}
    files = dict(old.get("files", {}))
    new_sets = []
    for s in sorted(set(sets)):
        if only is not None and s in keep and not (set(s) & only):
            new_sets.append({"files": list(s), "hash": keep[s]})
            continue
        new_sets.append({"files": list(s), "hash": live_hash(s)})
        for rel in s:
            if only is None or rel in only or rel not in files:
                files[rel] = file_sha256(rel)
    edits = {k: v for k, v in old.get("neutral_edits", {}).items() if only is not None and k not in only}
    about = old.get("about", ABOUT)
    return {"about": about, "sets": new_sets, "files": dict(sorted(files.items())), "neutral_edits": edits}


ABOUT = (
    "Frozen code hashes of the run keys (coherent_itr/code_identity.py): 'sets' gives each file set a study run "
    "executes its frozen hash; 'files' the sha256 of each file at the freeze; 'neutral_edits' the edits since then "
    "that keep every number ({file: {sha256, why, devices (if only those device types)}})."
)

"""The code lock: the run keys' code identity (and the views'), one file, checked when written.

A training key hashes the source of the files a run executes (:func:`coherent_itr.runs.training_files`), so any
edit of those files — a comment, a clearer error message, a new code path that the run never takes — moved every
affected key, and a cache of hundreds of CPU-hours had to train again. ``code_identity.json`` beside this module
(the one lock file) records, at one *freeze*, the code hash of every file set the study's runs execute (and of the
evaluation code and the CUDA-graph engine) — the set's *label*, which the keys name — and the sha256 of every file
in them; and, under ``views``, the code label of each set of arrays a run archive carries for the views
(:mod:`reproduce.present.rankings`) with the source hashes accepted for it. While a file set's files are as frozen,
its live hash is its label. Two verbs change the lock (``python -m reproduce.driver.code_identity``):

* **accept** FILE WHY — an edit that keeps every number of every run (a message, a comment, a branch the study's
  runs never enter): the pins of every run that executes FILE (:mod:`reproduce.driver.pins`) run on this machine
  first, and the acceptance is refused if one bit moves; else the file's new sha256 goes into ``neutral_edits`` and
  the sets holding it keep their label, so the cached runs keep their keys. An acceptance that holds on some
  device types only (``devices``, e.g. ``["cpu"]``: an edit of a CUDA-only path, whose GPU numbers the CPU cannot
  check) keeps the label for those; other devices' runs hash the file as it is and train again;
* **bump** FILE — an edit that changes numbers: every set holding FILE takes the live hash as its new label and
  only its runs train again.

Why each edit was accepted or bumped goes to ``code_identity.log`` (one JSON line an event, appended only), not
into the lock. ``tests/lib/test_code_identity.py`` fails for a file whose content is neither as frozen nor accepted
(so every edit is looked at) and runs every pin. File sets that are not frozen (a new loss, the toy data) are
hashed live.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
IDENTITY_FILE = PACKAGE_DIR / "code_identity.json"  # the lock
LOG_FILE = PACKAGE_DIR / "code_identity.log"  # why each acceptance and bump: JSON lines, appended only


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
    out = {"about": ABOUT, "sets": new_sets, "files": dict(sorted(files.items())), "neutral_edits": edits}
    return {**out, "views": old.get("views", {})}


def accepted(ident: dict, rel: str, devices: list[str] | None = None) -> dict:
    """``ident`` with ``rel``'s current content accepted as neutral (on ``devices`` only, when given). The caller
    runs the pins first (:func:`reproduce.driver.code_identity.accept`)."""
    entry = {"sha256": file_sha256(rel)}
    if devices:
        entry["devices"] = list(devices)
    return {**ident, "neutral_edits": {**ident.get("neutral_edits", {}), rel: entry}}


def write(ident: dict) -> None:
    """Write the lock (atomically) and forget what was read of it."""
    tmp = IDENTITY_FILE.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(ident, indent=1) + "\n")
    tmp.replace(IDENTITY_FILE)
    load.cache_clear()
    _changed_now.cache_clear()
    _frozen_sets.cache_clear()


def log(event: dict, path: Path | None = None) -> dict:
    """Append ``event`` (a verb, what it changed, why) to the log with the UTC time; returns the line's object."""
    line = {"at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), **event}
    with open(path or LOG_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return line


def read_log(path: Path | None = None) -> list[dict]:
    """The log's events, oldest first (``[]`` when there is none)."""
    try:
        text = Path(path or LOG_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


ABOUT = (
    "The code lock of the run keys and of the views' stored arrays (coherent_itr/code_identity.py): 'sets' gives each "
    "file set a study run executes its label (the frozen code hash its keys name); 'files' the sha256 of each file at "
    "the freeze; 'neutral_edits' the accepted edits since then ({file: {sha256, devices (if only those device "
    "types)}}); 'views' each stored view set's code label and the accepted source hashes. Why each edit was accepted: "
    "code_identity.log, one JSON line an acceptance or bump, appended only."
)

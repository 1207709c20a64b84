"""Execute the study's notebooks with papermill (profile and data as parameters).

Notebooks are views over cached runs: by the time they execute, the driver has already trained
every run they need, so a notebook only reads the cache and draws. Executed copies land in
``<results>/notebooks/``; a failing notebook is reported and the others still run.

A notebook whose inputs have not changed since it last succeeded is not executed again: its
inputs are the notebook file, the ``reproduce`` package, the library source hash (which fixes
every cached run), the profile and the data set; their hash is stamped next to the executed copy.
The driver forces execution whenever it trained a run for that data set (a GPU may give other
numbers than the CPU that made the committed results).
"""
from __future__ import annotations

import hashlib
import traceback
from pathlib import Path

from coherent_itr.io import atomic_write_text
from coherent_itr.runs import source_hash

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
KERNEL = "coherent-itr"   # installed into .venv by `make` (ipykernel install --sys-prefix)


def kernel_name() -> str:
    """The project's kernel when installed, else the running environment's ``python3``."""
    from jupyter_client.kernelspec import KernelSpecManager
    return KERNEL if KERNEL in KernelSpecManager().find_kernel_specs() else "python3"


def notebook_paths(only: list[str] | None = None) -> list[Path]:
    nbs = sorted(p for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
    if only:
        nbs = [p for p in nbs if any(p.stem.startswith(o) or p.stem == o for o in only)]
    return nbs


def inputs_hash(nb: Path, profile: str, data: str) -> str:
    """Hash of everything an executed notebook depends on (see the module docstring)."""
    h = hashlib.sha256()
    for f in [nb, *sorted(Path(__file__).resolve().parent.glob("*.py"))]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(f"{source_hash()}|{profile}|{data}".encode())
    return h.hexdigest()[:16]


def execute(profile: str, data: str, results_dir: str | Path, only: list[str] | None = None,
            progress: bool = True, force: bool = False) -> list[tuple[str, str]]:
    """Run every notebook whose inputs changed (all with ``force``); return
    ``[(notebook, traceback), ...]`` of the failures."""
    import papermill as pm
    out_dir = Path(results_dir) / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    failures = []
    for nb in notebook_paths(only):
        out, stamp = out_dir / nb.name, out_dir / f".{nb.stem}.inputs"
        key = inputs_hash(nb, profile, data)
        if not force and out.exists() and stamp.exists() and stamp.read_text().strip() == key:
            print(f"notebook {nb.name} [{data}]: inputs unchanged since its last run, not executed again", flush=True)
            continue
        stamp.unlink(missing_ok=True)
        try:
            pm.execute_notebook(str(nb), str(out), parameters={"profile": profile, "data": data},
                                kernel_name=kernel_name(), cwd=str(NOTEBOOK_DIR), progress_bar=progress,
                                log_output=False)
            atomic_write_text(stamp, key + "\n")
        except Exception:  # noqa: BLE001 — reported, and the driver exits non-zero
            failures.append((nb.name, traceback.format_exc(limit=3)))
    return failures

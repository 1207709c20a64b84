"""Execute the study's notebooks with papermill (profile and data as parameters).

Notebooks are views over cached runs: by the time they execute, the driver has already trained
every run they need, so a notebook only reads the cache and draws. Executed copies land in
``<results>/notebooks/``; a failing notebook is reported and the others still run.
"""
from __future__ import annotations

import traceback
from pathlib import Path

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


def execute(profile: str, data: str, results_dir: str | Path, only: list[str] | None = None,
            progress: bool = True) -> list[tuple[str, str]]:
    """Run every notebook; return ``[(notebook, traceback), ...]`` of the failures."""
    import papermill as pm
    out_dir = Path(results_dir) / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    failures = []
    for nb in notebook_paths(only):
        try:
            pm.execute_notebook(str(nb), str(out_dir / nb.name), parameters={"profile": profile, "data": data},
                                kernel_name=kernel_name(), cwd=str(NOTEBOOK_DIR), progress_bar=progress,
                                log_output=False)
        except Exception:  # noqa: BLE001 — reported, and the driver exits non-zero
            failures.append((nb.name, traceback.format_exc(limit=3)))
    return failures

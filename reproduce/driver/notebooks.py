"""Execute the study's notebooks with papermill (profile and data as parameters).

Notebooks are views over cached runs: by the time they execute, the driver has already trained
every run they need, so a notebook only reads the cache and draws. Executed copies land in
``<results>/notebooks/``; a failing notebook is reported and the others still run.

A notebook whose inputs have not changed since it last succeeded is not executed again: its
inputs are the notebook file, the ``reproduce`` package (its modules and every file under
``reproduce/data/``: the claims file, the papers' tables), the library source hash (which fixes
every cached run), the profile and the data set; their hash is stamped next to the executed copy
(``.<notebook>.inputs``, JSON: inputs hash, status ``ok``/``failed``, when it started, the claim
files it wrote, and the machine that executed it: :func:`analyses_machine`). A notebook executed on another kind of
machine is executed again: what it computes from the data differs there in its last bits, and a fresh clone's
``make reproduce`` rebuilds every table from the runs. The driver asks for an execution that started after its own
training ended (``fresh_after``) whenever it trained a run for that data set (a GPU may give other numbers than the
CPU that made the committed results).

Two drivers on one results folder never execute a notebook side by side: each notebook is
executed under a file lock (``.<notebook>.lock``, :mod:`filelock`); the second driver waits, then
finds the first one's fresh stamp and skips it.

:func:`stale_claims` tells which claim files no current, successful execution vouches for, so the
ledger marks them instead of passing off an earlier run's verdicts as this one's.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import importlib.metadata
import json
import math
import os
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from filelock import FileLock, Timeout

from coherent_itr.io import atomic_write_json, atomic_write_text

from reproduce.spec.paths import NOTEBOOK_DIR, PAPER_NOTEBOOKS, for_papers, notebook_paths  # noqa: F401 (notebooks.for_papers …)

KERNEL = "coherent-itr"  # installed into .venv by `make` (ipykernel install --sys-prefix)


def _rel(path: Path) -> str:
    """``path`` relative to the repository (no machine path in a committed manifest), else as is."""
    try:
        return str(Path(path).resolve().relative_to(NOTEBOOK_DIR.parent))
    except ValueError:
        return str(path)


def kernel_name() -> str:
    """The project's kernel when installed, else the running environment's ``python3``."""
    # only to name the kernel; keeps python -m reproduce --help light
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL if KERNEL in KernelSpecManager().find_kernel_specs() else "python3"


@contextlib.contextmanager
def ipc_kernel_config():
    """A traitlets config that connects papermill to its kernel over IPC (Unix sockets) in a private
    temporary folder, removed afterwards, instead of localhost TCP: nothing on the machine can listen in,
    and ipykernel's "running over TCP without encryption" warning stays out of the driver's log."""
    # only when notebooks execute (traitlets comes with jupyter)
    from traitlets.config import Config

    with tempfile.TemporaryDirectory(prefix="coherent-itr-kernel-") as folder:
        yield Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(folder, "kernel")}})


def expected_seconds(sets: list[tuple[str, Path]], only: list[str] | None, workers: int, cold_s: dict) -> float:
    """Estimated wall seconds of executing the selected notebooks of every ``(data, results_dir)`` in one
    pool of ``workers`` kernels: each notebook's last successful execution (its stamp's ``finished`` −
    ``started``), else its share of ``cold_s[data]`` (a whole cold run's notebooks, measured with two
    kernels). An upper bound: a notebook whose inputs are unchanged is not executed again."""
    nbs = notebook_paths(only)
    total = 0.0
    for data, results_dir in sets:
        share = 2 * cold_s.get(data, 0.0) / max(1, len(notebook_paths()))
        for nb in nbs:
            st = read_stamp(stamp_path(results_dir, nb)) or {}
            took = float(st.get("finished") or 0) - float(st.get("started") or 0)
            total += took if st.get("status") == "ok" and took > 0 else share
    return total / max(1, min(workers, len(nbs) * len(sets)))


def inputs_hash(nb: Path, profile: str, data: str, pkg: Path | None = None) -> str:
    """Hash of everything an executed notebook depends on (see the module docstring); ``pkg``: the package
    folder (default: ``reproduce/``)."""
    # heavy (torch): __main__ imports this module for --help
    from coherent_itr.runs import source_hash

    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parents[1] if pkg is None else Path(pkg)
    # modules, the claims file and the paper-number files (what a notebook's claim rows are written from)
    inputs = sorted([*pkg.rglob("*.py"), *(p for p in (pkg / "data").rglob("*") if p.is_file())])
    for f in [nb, *inputs]:
        name = f.name if f == nb else str(f.relative_to(pkg))
        h.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(f"{source_hash()}|{profile}|{data}".encode())
    return h.hexdigest()[:16]


def stamp_path(results_dir: str | Path, nb: Path) -> Path:
    return Path(results_dir) / "notebooks" / f".{nb.stem}.inputs"


def read_stamp(path: Path) -> dict | None:
    """A stamp as a dict (``inputs``, ``status``, ``started``, ``claims``); None if absent or unreadable.
    A stamp of the earlier plain-text format (the hash alone) reads as ``ok``, started at 0, claims unknown."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    try:
        st = json.loads(text)
        return st if isinstance(st, dict) else None
    except ValueError:
        return {"inputs": text, "status": "ok", "started": 0.0, "claims": None} if text else None


def _claim_folder(nb: Path) -> str | None:
    """The results sub-folder whose ``claims_*.csv`` notebook ``nb`` writes (``01_bcls`` → ``bcls``)."""
    return next((paper for paper, prefix in PAPER_NOTEBOOKS.items() if nb.stem.startswith(prefix + "_")), None)


def _claim_mtimes(results_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(results_dir)): p.stat().st_mtime_ns for p in results_dir.glob("*/claims_*.csv")}


def _when(t: float | None) -> str:
    if not t:
        return "an unknown time"
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def scrub_machine_paths(notebook: Path, root: Path | str | None = None) -> int:
    """Make an executed notebook free of this machine's paths (it is committed): papermill's ``input_path`` /
    ``output_path`` become relative to the repository root ``root``, and the prefix ``<root>/`` is cut
    from every text output (warnings name files). Written atomically; returns how many strings changed."""
    root = str(Path(root or NOTEBOOK_DIR.parent).resolve()).rstrip("/") + "/"
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    n = 0

    aliases = {root: ""}
    release = os.environ.get("FLICKR8K_DIR")
    if release:  # the data folder named in a warning → the variable that names it
        aliases[str(Path(release).resolve()).rstrip("/") + "/"] = "$FLICKR8K_DIR/"
        aliases[release.rstrip("/") + "/"] = "$FLICKR8K_DIR/"

    def fix(x):
        nonlocal n
        if isinstance(x, str) and any(a in x for a in aliases):
            n += 1
            for a, b in aliases.items():
                x = x.replace(a, b)
            return x
        if isinstance(x, list):
            return [fix(v) for v in x]
        if isinstance(x, dict):
            return {k: fix(v) for k, v in x.items()}
        return x

    pm_meta = nb.get("metadata", {}).get("papermill", {})
    for k in ("input_path", "output_path"):
        if isinstance(pm_meta.get(k), str) and pm_meta[k].startswith(root):
            pm_meta[k], n = pm_meta[k][len(root) :], n + 1
    for cell in nb.get("cells", []):
        if "outputs" in cell:
            cell["outputs"] = fix(cell["outputs"])
    atomic_write_text(Path(notebook), json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return n


def _execute_one(nb: Path, profile: str, data: str, results_dir: Path, progress: bool, fresh_after: float | None):
    """Execute one notebook unless a matching, fresh stamp exists; the caller holds its lock.
    Returns None (ok or skipped) or the traceback of its failure."""
    # slow import, only when notebooks execute
    import papermill as pm

    out, stamp = results_dir / "notebooks" / nb.name, stamp_path(results_dir, nb)
    key = inputs_hash(nb, profile, data)
    old = read_stamp(stamp)
    if is_current(nb, profile, data, results_dir, fresh_after, key):
        print(
            f"notebook {nb.name} [{data}]: inputs unchanged since its execution on this machine at "
            f"{_when(old.get('started'))}, not executed again",
            flush=True,
        )
        return None
    stamp.unlink(missing_ok=True)
    before, started = _claim_mtimes(results_dir), time.time()
    try:
        bar = {"desc": f"notebook {nb.stem} [{data}]", "unit": "cell", "leave": False} if progress else False
        with ipc_kernel_config() as config:
            pm.execute_notebook(
                str(nb),
                str(out),
                parameters={"profile": profile, "data": data},
                kernel_name=kernel_name(),
                cwd=str(NOTEBOOK_DIR),
                progress_bar=bar,
                log_output=False,
                config=config,
                # jupyter_client's shutdown interrupts the kernel first: an idle kernel then logged "[IPKernelApp]
                # ERROR | KeyboardInterrupt caught in kernel." into the driver's output (2 of 16 notebooks of one
                # smoke run); a failing cell is still reported, through papermill
                extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
            )
    except Exception:  # noqa: BLE001 — reported, and the driver exits non-zero
        old = old or {}
        last_ok = old if old.get("status") == "ok" else old.get("previous")  # what the claim files come from
        atomic_write_json(stamp, {"inputs": key, "status": "failed", "started": started, "previous": last_ok})
        return traceback.format_exc(limit=3)
    scrub_machine_paths(out)
    after = _claim_mtimes(results_dir)
    own = _claim_folder(nb)  # notebooks may run side by side: only this notebook's folder is its own
    claims = sorted(p for p, m in after.items() if before.get(p) != m and p.split("/", 1)[0] == own)
    atomic_write_json(
        stamp,
        {
            "inputs": key,
            "status": "ok",
            "started": started,
            "finished": time.time(),
            "claims": claims,
            "machine": analyses_machine(),
        },
    )
    print(f"notebook {nb.name} [{data}]: executed in {time.time() - started:.0f} s", flush=True)
    return None


def analyses_machine() -> str:
    """What of this machine changes the numbers a notebook computes from the data itself (caption embeddings,
    relevance, image features: float32 kernels on the CPU): the CPU's vendor and kernel instruction set
    (:func:`coherent_itr.determinism.cpu_identity`, which reads ``ATEN_CPU_CAPABILITY``) and torch's version."""
    # heavy (torch): __main__ imports this module for --help
    from coherent_itr.runs import cpu_identity

    return f"{cpu_identity()} torch {importlib.metadata.version('torch')}"


def is_current(
    nb: Path, profile: str, data: str, results_dir: str | Path, fresh_after: float | None = None, key=None
) -> bool:
    """Whether the executed copy of ``nb`` under ``results_dir`` stands for an execution now: its stamp says it
    succeeded with the current inputs (``key``: :func:`inputs_hash`, computed when not given), on this machine
    (:func:`analyses_machine`: a notebook drawn elsewhere is drawn again here, so that ``make reproduce`` on a fresh
    clone rebuilds every table from the runs), and not before ``fresh_after``."""
    results_dir = Path(results_dir)
    old = read_stamp(stamp_path(results_dir, nb))
    return bool(
        old
        and old.get("status") == "ok"
        and old.get("inputs") == (key if key is not None else inputs_hash(nb, profile, data))
        and old.get("machine") == analyses_machine()
        and (results_dir / "notebooks" / nb.name).exists()
        and (fresh_after is None or float(old.get("started") or 0) >= fresh_after)
    )


def execute(
    profile: str,
    data: str,
    results_dir: str | Path,
    only: list[str] | None = None,
    progress: bool = True,
    force: bool = False,
    fresh_after: float | None = None,
    jobs: int = 1,
) -> list[tuple[str, str]]:
    """Run every notebook whose inputs changed, or whose last execution started before ``fresh_after``
    (a ``time.time()``; ``force``: every notebook); return ``[(notebook, traceback), ...]`` of the failures,
    in notebook order. One data set's :func:`execute_all`."""
    fails = execute_all(profile, [(data, results_dir, fresh_after)], only, progress, force, jobs)
    return [(name, tb) for _, name, tb in fails]


def execute_all(
    profile: str,
    targets: list[tuple[str, str | Path, float | None]],
    only: list[str] | None = None,
    progress: bool = True,
    force: bool = False,
    jobs: int = 1,
) -> list[tuple[str, str, str]]:
    """The notebooks of several data sets in one pool: ``targets`` = ``[(data, results_dir, fresh_after),
    ...]``; returns ``[(data, notebook, traceback), ...]`` of the failures, in target then notebook order.
    ``jobs`` notebooks execute side by side (each its own kernel; the driver passes its ``--workers``: the
    runs are trained by then, so the cores are free), longest-first over every data set, so no core waits
    for one data set's last notebook while the other's could run. They are independent: each reads the
    cache and writes its own paper's claim file under its own results folder; the ledger is built after
    all of them.

    Each notebook runs under its file lock, so a concurrent driver waits rather than executing it too."""
    if jobs < 1:
        raise ValueError(f"jobs must be ≥ 1, got {jobs}")
    tasks = []
    for data, results_dir, fresh_after in targets:
        results_dir = Path(results_dir)
        (results_dir / "notebooks").mkdir(parents=True, exist_ok=True)
        for nb in notebook_paths(only):
            tasks.append((data, results_dir, math.inf if force else fresh_after, nb))

    def one(task) -> str | None:
        data, results_dir, fresh_after, nb = task
        lock = FileLock(str(results_dir / "notebooks" / f".{nb.stem}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            print(f"notebook {nb.name} [{data}]: another driver is executing it; waiting for it", flush=True)
            lock.acquire()
        try:
            return _execute_one(nb, profile, data, results_dir, progress and jobs == 1, fresh_after)
        finally:
            lock.release()

    if jobs == 1:
        tbs = [one(t) for t in tasks]
    else:  # each kernel is its own process; the threads only wait on them
        order = sorted(range(len(tasks)), key=lambda i: -_last_seconds(tasks[i]))  # longest first
        with ThreadPoolExecutor(jobs, thread_name_prefix="notebook") as pool:
            done = dict(zip(order, pool.map(one, [tasks[i] for i in order])))
        tbs = [done[i] for i in range(len(tasks))]
    return [(data, nb.name, tb) for (data, _, _, nb), tb in zip(tasks, tbs) if tb]


def _last_seconds(task) -> float:
    """How long the notebook's last execution took (its stamp), 0 when unknown: the pool's order only."""
    _, results_dir, _, nb = task
    st = read_stamp(stamp_path(results_dir, nb)) or {}
    try:
        return float(st.get("finished") or 0) - float(st.get("started") or 0)
    except (TypeError, ValueError):
        return 0.0


def stale_claims(profile: str, results_dirs: dict[str, str | Path]) -> dict[Path, str]:
    """Every claim file under ``results_dirs`` ({data set: results folder}) that no successful execution
    of its notebook with the current inputs wrote, with the reason (naming the stamp) — e.g. left by an
    earlier run before its notebook failed now, or made by another library version."""
    vouched: set[Path] = set()
    described: dict[Path, str] = {}
    for data, rd, nb, st, now in _stamps(profile, results_dirs):
        if not st:
            continue
        current = st.get("inputs") == now
        ok = st.get("status") == "ok"
        src = st if ok else (st.get("previous") or {})
        for c in src.get("claims") or []:
            p = rd / c
            if ok and current:
                vouched.add(p)
            elif not ok:
                described[p] = (
                    f"{nb.name} [{data}] failed in its execution of {_when(st.get('started'))}; "
                    f"this file is from its execution of {_when(src.get('started'))} "
                    f"(stamp {stamp_path(rd, nb)})"
                )
            else:
                described[p] = (
                    f"written by {nb.name} [{data}] at {_when(st.get('started'))} with other inputs "
                    f"(stamp {_rel(stamp_path(rd, nb))}: inputs {st.get('inputs')}, now "
                    f"{now})"
                )
    out = {}
    for rd in results_dirs.values():
        for p in sorted(Path(rd).glob("*/claims_*.csv")):
            if p not in vouched:
                out[p] = described.get(
                    p,
                    "no stamp in " + _rel(Path(rd) / "notebooks") + " names it as written "
                    "by a successful execution with the current inputs",
                )
    return out


def stale_notebooks(profile: str, results_dirs: dict[str, str | Path], pkg: Path | None = None) -> list[str]:
    """The executed notebooks under ``results_dirs`` (data set → results folder) that no successful execution with
    the current inputs (:func:`inputs_hash`; ``pkg``: the ``reproduce`` folder) vouches for, each with why: what a
    landing that changes code the notebooks execute must regenerate (``make reproduce``, on any machine)."""
    out = []
    for data, rd, nb, st, now in _stamps(profile, results_dirs, pkg):
        where = f"{_rel(rd / 'notebooks' / nb.name)} [{data}]"
        if not st:
            out.append(f"{where}: no stamp")
        elif st.get("status") != "ok":
            out.append(f"{where}: its last execution failed")
        elif st.get("inputs") != now:
            out.append(f"{where}: executed with inputs {st.get('inputs')}, the code's are {now}")
    return out


def _stamps(profile: str, results_dirs: dict[str, str | Path], pkg: Path | None = None):
    """``(data set, results folder, notebook, its stamp or None, the inputs hash its execution would have now)``
    for every notebook under every results folder: what :func:`stale_claims` and :func:`stale_notebooks` judge."""
    for data, rd in results_dirs.items():
        rd = Path(rd)
        for nb in notebook_paths():
            yield data, rd, nb, read_stamp(stamp_path(rd, nb)), inputs_hash(nb, profile, data, pkg)

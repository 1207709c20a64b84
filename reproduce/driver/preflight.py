"""The checks of ``python -m reproduce`` before any work: which data sets run and why (:func:`resolve_data_sets`),
whether the inputs are usable (:func:`validate`: the Flickr8k release or bundle, ``--runs-per-worker`` on this
machine, the run cache and the results folder writable; a bad one is a ``UsageError``, exit status 2, in seconds), and
how the release's warnings reach the driver's output while it reads the data (:func:`data_warnings_once`).

A unit because it all reads the study's inputs before :mod:`reproduce.driver.cli` plans or trains anything. Its
module level imports nothing heavy (torch, pandas), like the driver's, so ``--help`` and a usage error stay light.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

from coherent_itr import paths

from reproduce.driver.arguments import UsageError
from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import Profile


def resolve_data_sets(data_sets: list[str] | None, data_bundle: str | None = None) -> tuple[list[str], list[str]]:
    """The data sets to run (``data_sets``: ``--data``'s, None: auto) and one line per data set saying why;
    ``UsageError`` if Flickr8k is requested (or configured) but unusable. ``--data-bundle DIR`` (``data_bundle``)
    sets ``$FLICKR8K_DIR`` to DIR (for the workers and kernels too), which must then be a bundle."""
    if data_bundle:
        os.environ[paths.FLICKR8K_ENV] = str(Path(data_bundle).expanduser().resolve())
    env = os.environ.get(paths.FLICKR8K_ENV)
    wanted = data_sets or (["synthetic", "flickr8k"] if env else ["synthetic"])
    why = {"synthetic": "synthetic: the embedded generated world (always available)"}
    if "flickr8k" in wanted:
        if not env:
            raise UsageError(f"--data flickr8k needs ${paths.FLICKR8K_ENV} set to the Flickr8k release folder")
        try:
            folder = paths.flickr8k_dir()  # a typo is caught here, before the data module's imports
            # heavy (torch, pandas): --help and usage errors stay light (tests/reproduce/driver/test_cli.py)
            from coherent_itr.data import bundle, flickr8k

            if bundle.is_bundle(folder):  # a bundle (python -m reproduce.bundle): every file's sha256
                root = folder
                bundle.verify_bundle(root)
                missing, source = [], "the bundle"
            elif data_bundle:
                raise UsageError(
                    f"--data-bundle {data_bundle}: not a bundle: it has no {bundle.MANIFEST} "
                    "(python -m reproduce.bundle --data flickr8k --out DIR builds one)"
                )
            else:
                root = flickr8k.check_release()
                with warnings.catch_warnings():  # skipped captions are reported when the data set loads
                    warnings.simplefilter("ignore", flickr8k.Flickr8kWarning)
                    flickr8k.flickr8k_index(root)  # every caption line, split list and image file, in seconds
                missing, source = flickr8k.missing_judgements(root), "the release"
        except (FileNotFoundError, ValueError) as exc:
            raise UsageError(f"${paths.FLICKR8K_ENV}={env}: {exc}") from None
        why["flickr8k"] = f"flickr8k: {source} at {root} (from ${paths.FLICKR8K_ENV})" + (
            f"; without {', '.join(p.name for p in missing)}: the metrics needing human judgements are left out"
            if missing
            else ""
        )
    elif data_sets is None:
        why["flickr8k"] = f"flickr8k: not run (${paths.FLICKR8K_ENV} is not set)"
    return wanted, [why[d] for d in ("synthetic", "flickr8k") if d in why]


def validate(
    profile: Profile, data_sets: list[str] | None, data_bundle: str | None = None, runs_per_worker: int = 1
) -> tuple[list[str], list[str]]:
    """Every check of the inputs, before any work (seconds): the data sets (:func:`resolve_data_sets`), the runs side
    by side, the run cache and ``profile``'s results folder writable (a ``--pilot-only`` profile's is its own). Returns
    the data sets to run and why each runs (``UsageError`` if bad)."""
    sets, why = resolve_data_sets(data_sets, data_bundle)
    if runs_per_worker > 1:
        # heavy (numpy): only --runs-per-worker reads the runs' thread count here
        from coherent_itr.runs import THREADS_ENV, default_threads

        if default_threads() != 1:
            raise UsageError(
                f"--runs-per-worker {runs_per_worker}: runs side by side in one process need 1 intra-op "
                f"thread a run; ${THREADS_ENV}={default_threads()}"
            )
        # heavy (torch): only --runs-per-worker asks for the device here
        import torch

        if torch.cuda.is_available():
            raise UsageError(
                f"--runs-per-worker {runs_per_worker}: on CUDA, runs side by side in one process fail with "
                "cuDNN errors (CUDNN_STATUS_INTERNAL_ERROR in 5 of 16 runs at 4 × 4 on an H200) and train fewer "
                "epochs an hour than one run a process (results/benchmarks/gpu/README.md); use --workers N, and "
                "CUDA MPS to let their kernels overlap (docs/cluster.md)"
            )
    problem = paths.writable_problem(paths.cache_dir(create=False))
    if problem:
        raise UsageError(
            f"run cache from {paths.cache_origin()}: {problem}; set {paths.CACHE_ENV} to a writable folder"
        )
    problem = paths.writable_problem(ROOT / profile.results_dir)
    if problem:
        raise UsageError(problem)
    return sets, why


def data_warnings_once() -> None:
    """Each warning about the Flickr8k release (the captions of a missing image, malformed judgement lines) once in
    the driver's output, as one line without the source line that issued it: the preparation reads the same files
    from several places (the workers ignore them, ``worker.init_worker``), and a library that puts a filter of its
    own in front (``"default"``: once per place) would print it again, so each text is remembered here. Call inside
    ``warnings.catch_warnings()``, which puts ``warnings.showwarning`` back."""
    # heavy (torch, pandas): --help and usage errors stay light (tests/reproduce/driver/test_cli.py)
    from coherent_itr.data.flickr8k import Flickr8kWarning

    warnings.filterwarnings("once", category=Flickr8kWarning)
    shown: set[str] = set()
    show = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, Flickr8kWarning):
            return show(message, category, filename, lineno, file, line)
        if str(message) not in shown:
            shown.add(str(message))
            print(f"warning: {message}", file=file or sys.stderr, flush=True)

    warnings.showwarning = showwarning

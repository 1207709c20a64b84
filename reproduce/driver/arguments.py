"""The command line of ``python -m reproduce``: its options, their checks and its help (kept light: no torch, no
pandas, so ``--help`` and a usage error answer in a fraction of a second; ``tests/reproduce/driver/test_cli.py``)."""

from __future__ import annotations

import argparse
import os

from coherent_itr import paths

from reproduce.spec.paths import PAPER_NOTEBOOKS
from reproduce.spec.power_seeds import PILOT_ONLY_ENV
from reproduce.spec.profiles import PROFILES

DESCRIPTION = """Reproduce the study: train every run it needs (or, with --runs-from, read imported ones and train
none), execute its notebooks, collect the claims ledger. `make reproduce` reads the committed runs (--runs-from
committed) on any machine; `make retrain` trains them under this machine's numerics.

Per data set: plan the runs of the profile -> prepare their data once (image features, Sentence-BERT
embeddings) -> train the runs the cache lacks. Then prepare what the notebooks read of the data, execute every
data set's notebooks with papermill in one pool of ``--workers`` kernels, collect
the claims ledger, write it into README.md (profiles other than smoke, and only when nothing failed
and no claim is stale) and write the manifest. Exit status: 0 done, 1 a run or notebook failed
(the others still finish), 2 a bad argument or setting (reported before any work), 130 / 143 stopped by
Ctrl-C / SIGTERM (finished runs stay cached: rerun to continue; a second Ctrl-C exits without waiting for
a running notebook). With a ledger committed before, it ends comparing the two: verdicts, and the largest change
of an effect in each metric's units.
"""
PROG = "python -m reproduce"
RUNS_FROM_ENV = "COHERENT_ITR_RUNS_FROM"  # coherent_itr.runs.RUNS_FROM_ENV (imported lazily: --help stays light)
ENGINE_ENV = "COHERENT_ITR_ENGINE"  # coherent_itr.runs.ENGINE_ENV
ENGINES = ("auto", "solo", "pack")
DEFAULT_PACK_WIDTH = 8  # coherent_itr.packed.DEFAULT_WIDTH
COMMITTED = "committed"  # --runs-from committed: the machine of the committed run archives (results/runs/)
DATA_SETS = ("synthetic", "flickr8k")
EXECUTORS = ("local", "ray")
AUTO = "auto"  # --workers auto: chosen from the device (reproduce.driver.executors.auto_workers)
EXPORT_EMBEDDINGS = ("views", "all", "none")  # what a run archive keeps of the runs' test embeddings
# Every --papers value; experiments.PAPERS holds the trained ones (a test keeps the two in step)
PAPERS = tuple(PAPER_NOTEBOOKS)
EPILOG = f"""\
outputs (profile smoke: under results/smoke/ instead of results/):
  results/<paper>/              tables, figures and claims of the synthetic world
  results/flickr8k/<paper>/     the same on Flickr8k
  results/notebooks/            executed notebooks (results/flickr8k/notebooks/ for Flickr8k)
  results/claims.csv, .md       the claims ledger (rows of a notebook that failed or did not run with the
                                current inputs are marked STALE with the reason)
  results/manifest.json         what produced the results, phase timings, failures
  README.md                     its claims-ledger table is REWRITTEN by profiles default and paper when
                                nothing failed (stale rows are shown as awaiting a current run)

run cache under ${paths.CACHE_ENV} (now {paths.cache_dir(create=False)}; unset: the checkout's .cache/, the
  same for make, {PROG} and notebooks in Lab), two kinds of entries:
  training entries keyed by the run's config, its thread count and only the code it executes (model, data,
  train loop, its own loss modules); evaluation entries (every test metric) keyed by the training entry and
  the metrics code. Editing a metric re-evaluates from stored embeddings, adding a loss trains only its
  runs, editing a notebook trains nothing. Entries carry checksums verified on every read (--verify-cache).

data: synthetic (embedded, always available); flickr8k needs ${paths.FLICKR8K_ENV}=/path/to/the release
  folder (images/, Flickr8k.token.txt, Flickr_8k.*Images.txt, ExpertAnnotations.txt).

examples:
  {PROG} --runs-from committed           # every table, figure and verdict from the committed runs (make reproduce)
  {PROG} --dry-run                       # the plan and its cost; trains nothing (make retrain trains it)
  {PROG} --profile smoke                 # minutes: the whole pipeline at its smallest size
  {PROG} --papers bcls --data synthetic  # one paper (its runs, notebook 01 and the ledger)
"""


class UsageError(Exception):
    """A bad argument or setting: one line on stderr, exit status 2, before any work."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + error
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    pass


def _comma_list(allowed: tuple[str, ...], what: str):
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"invalid {what} {', '.join(map(repr, bad)) or repr(text)}; "
                f"choose from {', '.join(allowed)} (comma-separated)"
            )
        return list(dict.fromkeys(items))

    return parse


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer ≥ 1, got {text!r}")
    return v


def _workers(text: str) -> int | str:
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected an integer ≥ 1 or {AUTO!r}, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=_Formatter)
    ap.add_argument(
        "--profile",
        default="default",
        choices=list(PROFILES),
        help="study size: smoke = minutes (a check of the pipeline, results/smoke/), default = the "
        "study's protocol (about an hour on one GPU, several sittings of a 2-core CPU: docs/compute.md), "
        "paper = the papers' sizes (for GPUs)",
    )
    ap.add_argument(
        "--data",
        default="auto",
        help="data sets, comma-separated from: synthetic, flickr8k; auto = synthetic, plus flickr8k "
        f"when ${paths.FLICKR8K_ENV} is set (an unusable folder is an error, never skipped)",
    )
    ap.add_argument(
        "--papers",
        default=argparse.SUPPRESS,
        type=_comma_list(PAPERS, "paper"),
        help=f"only these papers' runs and notebooks (comma-separated from: {', '.join(PAPERS)}; "
        "'data' is the data card and trains nothing) (default: all)",
    )
    ap.add_argument(
        "--executor",
        default="local",
        choices=list(EXECUTORS),
        help="local = a pool of worker processes on this machine; ray = Ray tasks (a local Ray "
        "instance, or the cluster of RAY_ADDRESS)",
    )
    ap.add_argument(
        "--workers",
        type=_workers,
        default=min(2, os.cpu_count() or 1),
        help="parallel training processes (local) or CPUs of a local Ray instance; auto = one per CPU core, "
        "or one per CPU core up to 16 sharing a CUDA GPU (reproduce.driver.executors.auto_workers)",
    )
    ap.add_argument(
        "--runs-per-worker",
        type=_positive_int,
        default=1,
        help="runs each local worker trains side by side (threads, each run on its own CUDA stream): for a GPU "
        "that one run's kernels leave mostly idle; the numbers are those of the runs one after another",
    )
    ap.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="solo = one run a model (coherent_itr.train); pack = runs that share data, model shape and loss "
        "trained as one model (coherent_itr.packed: a GPU engine; its runs have keys of their own); auto = pack on "
        f"CUDA, solo on a CPU and when reading another machine's runs (--runs-from). Sets ${ENGINE_ENV} for workers "
        "and notebooks",
    )
    ap.add_argument(
        "--pack-width",
        type=_positive_int,
        default=DEFAULT_PACK_WIDTH,
        help="members of a pack under the packed engine, dummies included (part of a packed run's key)",
    )
    ap.add_argument(
        "--skip-notebooks",
        action="store_true",
        help="train the runs only; execute no notebook (the ledger then marks claims stale)",
    )
    ap.add_argument(
        "--rerun-notebooks",
        action="store_true",
        help="execute every notebook even if its inputs are unchanged since its last run",
    )
    ap.add_argument("--no-progress", action="store_true", help="no progress bars (log files, CI)")
    ap.add_argument(
        "--pilot-only",
        action="store_true",
        help="train and draw every arm with its pilot seeds only, without the seeds reproduce/data/power_seeds.toml "
        "adds, into results/pilot/study/ (the README is left alone): the ledger a seed plan is derived from "
        f"(results/pilot/README.md; sets ${PILOT_ONLY_ENV} for workers and notebooks)",
    )
    ap.add_argument(
        "--verify-cache",
        action="store_true",
        help="check the checksum of every cached training and evaluation entry, list the bad ones "
        "(they are redone by the next run) and exit: 0 all good, 1 problems found; trains nothing",
    )
    ap.add_argument(
        "--data-bundle",
        metavar="DIR",
        help="read Flickr8k from the bundle DIR (python -m reproduce.bundle: features, caption embeddings and "
        f"judgements, checksummed) instead of ${paths.FLICKR8K_ENV}'s folder; a machine without the photos or the "
        "sentence model trains from it",
    )
    ap.add_argument(
        "--export-runs",
        metavar="FILE",
        help="after the work, write every run of the current code in the cache into FILE, a compressed archive "
        "(FILE.part1, … above 16 MiB) for another machine's --import-runs (reproduce/driver/run_archive.py)",
    )
    ap.add_argument(
        "--export-embeddings",
        choices=EXPORT_EMBEDDINGS,
        default="views",
        help="what --export-runs keeps of each run's test embeddings: views = per-query hits, and for the runs a "
        "view reads what it reads (reproduce/spec/views.py); all = the embeddings; none = per-query hits only",
    )
    ap.add_argument(
        "--import-runs",
        metavar="FILE",
        help="merge the run archive FILE (from --export-runs) into the run cache, verifying every entry, and exit; "
        "trains nothing",
    )
    ap.add_argument(
        "--runs-from",
        metavar="MACHINE",
        help="read the runs imported from MACHINE (the name --import-runs prints) instead of this machine's; a "
        f"run missing from them is an error, never trained here (sets ${RUNS_FROM_ENV} for workers and notebooks); "
        f"{COMMITTED} = the machine of the committed CPU run archives of the data sets run "
        "(results/runs/<data>-<profile>-cpu.tar.xz, imported by `make runs`): what `make reproduce` reads, on any "
        "machine",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (runs to train, their estimated cost on this machine, where the runs come from) and "
        "exit; trains and executes nothing",
    )
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    ap = build_parser()
    args = ap.parse_args(argv)
    args.papers = getattr(args, "papers", None)
    if args.runs_per_worker > 1 and args.executor != "local":
        ap.error(f"argument --runs-per-worker: {args.runs_per_worker} needs --executor local (a Ray task is one run)")
    if args.engine == "pack" and (args.executor != "local" or args.runs_per_worker > 1):
        ap.error("argument --engine: pack trains packs in local workers (--executor local, --runs-per-worker 1)")
    if args.data == "auto":
        args.data_sets = None
    else:
        try:
            args.data_sets = _comma_list(DATA_SETS, "data set")(args.data)
        except argparse.ArgumentTypeError as exc:
            ap.error(f"argument --data: {exc}")
    return args


def engine_setting(engine: str, pack_width: int, machine: str | None) -> str:
    """The value of ``$COHERENT_ITR_ENGINE`` for ``--engine`` ``engine``: ``solo``, ``pack:<width>``, or
    ``auto:<width>`` (the library resolves it: packed on CUDA, solo on a CPU); ``auto`` reads another machine's runs
    (``machine``, ``--runs-from``) with the solo engine, the engine of the committed CPU archives."""
    if engine == "solo" or (engine == "auto" and machine):
        return "solo"
    return f"{engine}:{pack_width}"

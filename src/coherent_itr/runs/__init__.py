"""The run cache: every training run stored once, evaluated apart, verified whenever it is read.

Two kinds of entries live under ``<root>/runs/``:

* ``train/<training key>/`` — what :func:`coherent_itr.train.train` returns: ``record.json``
  (config, history, best epoch, timing, …) and ``arrays.npz`` (the selected checkpoint's test
  embeddings, float32). The **training key** hashes ``Config.key()``, the number of intra-op
  threads the run uses (results depend on it: :func:`pinned_threads`), the torch version, the device (on the
  CPU its vendor and instruction set, :func:`cpu_identity`), and
  the source of only the code the run executes (:func:`training_files`): the train loop,
  models, determinism/io/config, the data source it loads, the relevance provider it trains
  with, the loss modules :func:`coherent_itr.losses.build` instantiates for it, and the
  validation metric that selects the checkpoint. Adding a loss therefore trains only that
  loss's runs, and editing a notebook or a test metric trains nothing. The files' hash of a set the
  study's runs execute is its frozen one (:mod:`coherent_itr.code_identity`) while its files are as frozen
  or their edits are declared to keep every number; a run of another machine keeps that machine's key
  (:func:`local_numerics`, ``$COHERENT_ITR_RUNS_FROM``).
* ``eval/<evaluation key>/`` — ``metrics.json``: every test metric of that training entry. The
  **evaluation key** hashes the training key and the evaluation code (:func:`evaluation_files`:
  ``evaluation.py``, ``metrics/``, the yardstick providers), so adding or fixing a metric
  re-evaluates from the stored embeddings without training.

Integrity: an entry is written into a temporary folder, ``checksum.json`` (sha256 and size of
every other file) is written **last**, and the folder is renamed into place. Every read
verifies the checksums; a missing, truncated or altered entry is reported with
:class:`CacheIntegrityWarning` naming its key and path, treated as absent (``has()`` is False,
so a driver counts it as to-train) and redone. :func:`verify_cache` checks a whole cache without
training; :func:`check_writable` fails early on an unwritable or full cache folder. A per-key
file lock (``filelock``) makes two processes or drivers sharing one cache train each run once:
the second waits for the first and then loads its result. A CUDA run whose graph capture failed partway (steps of
two engines under a key that names one) is never stored (:class:`CaptureFellBack`).

The modules, one job each: :mod:`~coherent_itr.runs.identity` (the keys: code hashes, file sets, machine numerics,
engine record), :mod:`~coherent_itr.runs.store` (entries on disk: writing, verifying, the errors),
:mod:`~coherent_itr.runs.cache` (:class:`RunCache`, imported machines, locks, whole-cache checks) and
:mod:`~coherent_itr.runs.archive` (a portable archive of one machine's runs: its format, import and merge). This
package re-exports the first three modules' names; a test that replaces one patches the module that reads it.
"""

from __future__ import annotations

from ..determinism import REFERENCE_CPU, cpu_identity  # a CPU run's key names its CPU
from .cache import (
    DEFAULT_BYTES_PER_RUN,
    MACHINES_DIR,
    RunCache,
    check_writable,
    load_machine,
    machines_dir,
    save_machine,
    verify_cache,
)
from .identity import (
    DATA_FORM_FIELDS,
    DATA_SOURCE_FILES,
    ENGINE_ENV,
    EVALUATION_CODE,
    HOST_FIELD,
    PACKAGE_DIR,
    RELEVANCE_FILES,
    RUNS_FROM_ENV,
    THREADS_ENV,
    TRAINING_CORE,
    bundle_content_hash,
    capture_failure,
    data_form,
    default_threads,
    device_numerics,
    device_type,
    engine_from_env,
    eval_key,
    evaluation_code_hash,
    evaluation_files,
    form_field,
    hash_files,
    local_numerics,
    machine_id,
    pinned_threads,
    record_engine,
    run_key,
    source_hash,
    training_code_hash,
    training_files,
)
from .store import (
    CHECKSUM_FILE,
    CacheEntryError,
    CacheIntegrityWarning,
    CaptureFellBack,
    EVAL_FILES,
    ImportedRunMissing,
    SLIM_KEY,
    SlimArrays,
    TRAIN_FILES,
    embeddings_sha256,
    is_slim,
    verify_entry,
    write_entry,
)

__all__ = [
    "CHECKSUM_FILE",
    "CacheEntryError",
    "CacheIntegrityWarning",
    "CaptureFellBack",
    "DATA_FORM_FIELDS",
    "DATA_SOURCE_FILES",
    "DEFAULT_BYTES_PER_RUN",
    "ENGINE_ENV",
    "EVALUATION_CODE",
    "EVAL_FILES",
    "HOST_FIELD",
    "ImportedRunMissing",
    "MACHINES_DIR",
    "PACKAGE_DIR",
    "REFERENCE_CPU",
    "RELEVANCE_FILES",
    "RUNS_FROM_ENV",
    "RunCache",
    "SLIM_KEY",
    "SlimArrays",
    "THREADS_ENV",
    "TRAINING_CORE",
    "TRAIN_FILES",
    "bundle_content_hash",
    "capture_failure",
    "check_writable",
    "cpu_identity",
    "data_form",
    "default_threads",
    "device_numerics",
    "device_type",
    "embeddings_sha256",
    "engine_from_env",
    "eval_key",
    "evaluation_code_hash",
    "evaluation_files",
    "form_field",
    "hash_files",
    "is_slim",
    "load_machine",
    "local_numerics",
    "machine_id",
    "machines_dir",
    "pinned_threads",
    "record_engine",
    "run_key",
    "save_machine",
    "source_hash",
    "training_code_hash",
    "training_files",
    "verify_cache",
    "verify_entry",
    "write_entry",
]

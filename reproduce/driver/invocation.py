"""One invocation of ``python -m reproduce``, resolved once: what :func:`reproduce.driver.cli.main` builds from its
command line (:func:`reproduce.driver.cli.build_invocation`) and hands down, the way Hydra hands a run its resolved
config. Frozen: nothing downstream changes it, and the command line's namespace goes no further than ``main`` and
that one function.

It holds the profile resolved per data set (``--profile`` and ``--pilot-only``: :func:`reproduce.spec.profiles.
get_profile`, entered once), the data sets and why, the machine whose runs are read (``--runs-from``, ``committed``
resolved), the engine's setting, the workers (``auto`` resolved) and the options that steer the work. Worker
processes and notebook kernels receive what they read of it through their environment, written once by ``main``
from :meth:`Invocation.environment` (``--data-bundle``'s ``$FLICKR8K_DIR`` is set while the data sets are checked:
:func:`reproduce.driver.preflight.resolve_data_sets`). Light: no torch, no pandas (``--help`` and usage errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reproduce.driver.arguments import ENGINE_ENV, RUNS_FROM_ENV
from reproduce.spec.paths import ROOT
from reproduce.spec.power_seeds import PILOT_ONLY_ENV
from reproduce.spec.profiles import Profile


@dataclass(frozen=True)
class ArchiveOptions:
    """What the run-archive commands read of the invocation (:func:`reproduce.driver.run_archive.export_command`,
    ``import_command``), under the names they read."""

    profile: str
    import_runs: str | None = None
    export_runs: str | None = None
    export_embeddings: str = "views"
    no_progress: bool = False


@dataclass(frozen=True)
class Invocation:
    profile: str  # the profile's name (--profile)
    pilot_only: bool  # --pilot-only (or its variable, set by a driver above this one)
    profiles: Mapping[str, Profile]  # every data set the driver knows -> its profile, resolved once
    data_sets: tuple[str, ...]  # the data sets run, in order
    data_reasons: tuple[str, ...]  # one line per data set: why it runs or not
    papers: tuple[str, ...] | None  # --papers (None: all)
    executor: str
    workers: int | str  # "auto" only under --verify-cache, which trains nothing
    runs_per_worker: int
    engine: str  # the value of $COHERENT_ITR_ENGINE (reproduce.driver.arguments.engine_setting)
    runs_from: str | None  # the machine whose imported runs are read (--runs-from, committed resolved)
    progress: bool = True
    skip_notebooks: bool = False
    rerun_notebooks: bool = False
    verify_cache: bool = False
    dry_run: bool = False
    export_runs: str | None = None
    export_embeddings: str = "views"
    workers_why: str | None = None  # --workers auto: why that many

    def run_profiles(self) -> dict[str, Profile]:
        """``{data set: profile}`` of the data sets run, in order."""
        return {d: self.profiles[d] for d in self.data_sets}

    def results_dir(self, data: str) -> Path:
        return ROOT / self.profiles[data].results_dir

    def environment(self) -> dict[str, str]:
        """What workers and notebook kernels read of the invocation, as their environment variables: the engine
        (every ``RunCache``), the machine of ``--runs-from`` and the pilot flag (a kernel's
        :class:`reproduce.protocol.study.Study`)."""
        env = {ENGINE_ENV: self.engine}
        if self.runs_from:
            env[RUNS_FROM_ENV] = self.runs_from
        if self.pilot_only:
            env[PILOT_ONLY_ENV] = "1"
        return env

    @property
    def archive(self) -> ArchiveOptions:
        return ArchiveOptions(self.profile, None, self.export_runs, self.export_embeddings, not self.progress)

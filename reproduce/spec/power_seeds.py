"""The seeds beyond the pilot's: how many seeds an arm trains because a power analysis asked for them.

Every arm of a profile trains the profile's seeds (:meth:`reproduce.spec.profiles.Profile.seeds_for`: the pilot,
five for the default profile's primary arms). ``reproduce/data/power_seeds.toml`` may give an arm more: under a
``[<profile>.<data set>]`` table, ``"<paper>/<arm name>" = n`` makes that arm train seeds 0 … n − 1 on that data set
(never fewer than its pilot seeds). The numbers are written by :mod:`reproduce.protocol.power_plan` from a ledger of
the pilot runs, by the rule stated there and in ``docs/protocol.md``, before any of the runs they add is trained; the
file says which ledger. The tuner's health check reads the pilot seeds only, so the added seeds never change which
setting an arm trains at (:meth:`reproduce.spec.experiments.Arm.pilot_seeds`).

An absent file, or a profile and data set without a table, adds nothing; nor does the file for a pilot-only profile
(``Profile.pilot_only``, ``python -m reproduce --pilot-only``: the pilot's ledger, from which a plan is derived, drawn
again from the pilot's runs). The flag reaches workers and notebooks as :data:`PILOT_ONLY_ENV` ``=1``, which only
the outermost layers read (:func:`pilot_only`: the driver's invocation, a notebook's
:class:`reproduce.protocol.study.Study`).
"""

from __future__ import annotations

import functools
import os
import tomllib
from pathlib import Path

POWER_SEEDS_TOML = Path(__file__).resolve().parents[1] / "data" / "power_seeds.toml"
SEED_CAP = 30  # the most seeds the plan gives one arm (the power analysis looks no further)
PILOT_ONLY_ENV = "COHERENT_ITR_PILOT_ONLY"  # "1": every arm trains and is drawn with its pilot seeds only


def pilot_only() -> bool:
    """Whether :data:`PILOT_ONLY_ENV` is ``"1"``: the transport of ``--pilot-only`` to the driver's workers and kernels,
    read where a profile is first resolved there (the functions below take the flag as an argument)."""
    return os.environ.get(PILOT_ONLY_ENV) == "1"


def _plan(path: str | Path | None, pilot: bool) -> dict[tuple[str, str], dict[str, int]]:
    """The seeds arms train: the file's, or none for a ``pilot`` study (a file named by ``path`` is read)."""
    return {} if path is None and pilot else load(path)


def load(path: str | Path | None = None) -> dict[tuple[str, str], dict[str, int]]:
    """``{(profile, data set): {"paper/arm": seeds}}`` from ``path`` (default :data:`POWER_SEEDS_TOML`); ``ValueError``
    naming the file, the table and the entry for anything else than a whole number of seeds in 1 … :data:`SEED_CAP`
    under ``[profile.data set]``. Read once per file and modification time."""
    p = Path(path or POWER_SEEDS_TOML)
    return _load(str(p), p.stat().st_mtime_ns if p.is_file() else None)


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int | None) -> dict[tuple[str, str], dict[str, int]]:
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: not valid TOML ({exc})") from None
    out: dict[tuple[str, str], dict[str, int]] = {}
    for profile, sets in doc.items():
        if not isinstance(sets, dict):
            raise ValueError(f"{p}: {profile!r} must be a table [{profile}.<data set>], got {sets!r}")
        for data, arms in sets.items():
            where = f"{p}: [{profile}.{data}]"
            if data not in ("synthetic", "flickr8k") or not isinstance(arms, dict):
                raise ValueError(f"{where}: expected a table per data set (synthetic, flickr8k) of arm seed counts")
            for arm, n in arms.items():
                if "/" not in arm:
                    raise ValueError(f'{where}: {arm!r} must name "<paper>/<arm name>"')
                if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= SEED_CAP:
                    raise ValueError(f"{where}: {arm!r} = {n!r}: expected a whole number of seeds in 1 … {SEED_CAP}")
            out[(profile, data)] = dict(arms)
    return out


def seeds_of(
    profile: str, data: str, paper: str, arm: str, path: str | Path | None = None, pilot: bool = False
) -> int | None:
    """The number of seeds ``power_seeds.toml`` gives the arm ``paper/arm`` under ``profile`` on ``data``, or None
    (always None for a ``pilot`` study, unless ``path`` names a file)."""
    return _plan(path, pilot).get((profile, data), {}).get(f"{paper}/{arm}")


def most_of_paper(profile: str, data: str, paper: str, path: str | Path | None = None, pilot: bool = False) -> int:
    """The most seeds ``power_seeds.toml`` gives an arm of ``paper`` under ``profile`` on ``data`` (0: none; 0 for a
    ``pilot`` study, unless ``path`` names a file)."""
    arms = _plan(path, pilot).get((profile, data), {})
    return max((n for key, n in arms.items() if key.split("/", 1)[0] == paper), default=0)

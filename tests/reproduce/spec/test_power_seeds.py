"""reproduce/spec/power_seeds.py: the seeds a power analysis asks of an arm, read from a planted file; an arm trains
them beside its pilot seeds, the tuner's health check reads the pilot's only; bad entries are named."""

from __future__ import annotations

import os

import pytest

from reproduce.protocol import trials
from reproduce.spec import experiments, power_seeds
from reproduce.spec.profiles import profile_for


def _plant(tmp_path, monkeypatch, text):
    path = tmp_path / "power_seeds.toml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(power_seeds, "POWER_SEEDS_TOML", path)
    return path


def _arm(paper, name, profile):
    return next(a for a in experiments.arms(paper, profile) if a.name == name)


def test_an_arm_trains_the_seeds_the_file_gives_it_and_the_health_check_reads_the_pilots(tmp_path, monkeypatch):
    _plant(tmp_path, monkeypatch, '[default.flickr8k]\n"bcls/Triplet-SN" = 8\n"bcls/BCLS" = 3\n')
    flickr, synthetic = profile_for("default", "flickr8k"), profile_for("default", "synthetic")
    sn = _arm("bcls", "Triplet-SN", flickr)
    assert sn.pilot_seeds(flickr) == (0, 1, 2, 3, 4) and sn.seeds(flickr) == tuple(range(8))
    assert [c.seed for c in sn.configs(flickr, lr=2e-3)] == list(range(8))
    assert _arm("bcls", "BCLS", flickr).seeds(flickr) == (0, 1, 2, 3, 4)  # never fewer than the pilot's
    assert _arm("bcls", "Triplet-SN", synthetic).seeds(synthetic) == (0, 1, 2, 3, 4)  # another data set's table
    assert _arm("overview", "Triplet-SN", flickr).seeds(flickr) == (0, 1, 2, 3, 4)  # another paper's arm

    asked = []

    class Cache:  # every other seed trained and healthy
        def has_training(self, cfg):
            asked.append(cfg.seed)
            return True

    monkeypatch.setattr(trials, "load_record", lambda cache, cfg: {})
    bad, checked, complete = trials.other_seeds_health(
        sn, flickr, {"lr": 2e-3, "warmup_epochs": 0}, Cache(), (), False, lambda view: (False, "")
    )
    assert sorted(asked) == [1, 2, 3, 4] and (bad, checked, complete) == (0, 4, True)


def test_no_file_or_no_table_adds_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(power_seeds, "POWER_SEEDS_TOML", tmp_path / "absent.toml")
    assert power_seeds.load() == {} and power_seeds.seeds_of("default", "flickr8k", "bcls", "Triplet-SN") is None
    _plant(tmp_path, monkeypatch, "# nothing yet\n")
    prof = profile_for("default", "flickr8k")
    assert all(a.seeds(prof) == a.pilot_seeds(prof) for p in experiments.PAPERS for a in experiments.arms(p, prof))


def test_the_file_is_read_again_when_it_changes(tmp_path, monkeypatch):
    path = _plant(tmp_path, monkeypatch, '[default.synthetic]\n"bcls/BCLS" = 6\n')
    assert power_seeds.seeds_of("default", "synthetic", "bcls", "BCLS") == 6
    path.write_text('[default.synthetic]\n"bcls/BCLS" = 7\n', encoding="utf-8")
    os.utime(path, ns=(1, 10**18))
    assert power_seeds.seeds_of("default", "synthetic", "bcls", "BCLS") == 7


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[default.flickr8k]\n"bcls/BCLS" = 31\n', "whole number of seeds in 1 … 30"),
        ('[default.flickr8k]\n"bcls/BCLS" = "8"\n', "whole number of seeds"),
        ('[default.flickr8k]\n"bcls/BCLS" = true\n', "whole number of seeds"),
        ('[default.flickr8k]\n"BCLS" = 8\n', '"<paper>/<arm name>"'),
        ('[default.coco]\n"bcls/BCLS" = 8\n', "a table per data set"),
        ("default = 3\n", "must be a table"),
        ("[default.flickr8k\n", "not valid TOML"),
    ],
)
def test_a_bad_entry_is_named_with_its_file_and_table(tmp_path, monkeypatch, text, says):
    path = _plant(tmp_path, monkeypatch, text)
    with pytest.raises(ValueError, match="power_seeds.toml") as err:
        power_seeds.load()
    assert says in str(err.value) and str(path) in str(err.value)


def test_pilot_only_trains_the_pilot_seeds_into_a_folder_of_its_own(tmp_path, monkeypatch):
    """``--pilot-only`` (the profile's flag): every arm trains its pilot seeds, whatever the file gives it, and the
    results go under ``<results>/pilot/study/``; the file itself still reads whole (``power_plan --keep`` reads it).
    The profile is a function of its arguments: the variable that carries the flag to workers and kernels is read
    by :func:`power_seeds.pilot_only` alone, never by ``get_profile``."""
    from reproduce.spec.profiles import get_profile, profile_for

    path = _plant(tmp_path, monkeypatch, '[default.flickr8k]\n"bcls/Triplet-SN" = 8\n')
    for env in (None, "0", "", "1"):
        if env is None:
            monkeypatch.delenv(power_seeds.PILOT_ONLY_ENV, raising=False)
        else:
            monkeypatch.setenv(power_seeds.PILOT_ONLY_ENV, env)
        assert power_seeds.pilot_only() == (env == "1")  # the transport
        flickr = profile_for("default", "flickr8k")
        assert not flickr.pilot_only and flickr.results_dir == "results/flickr8k"
        assert _arm("bcls", "Triplet-SN", flickr).seeds(flickr) == tuple(range(8))
        pilot = profile_for("default", "flickr8k", pilot_only=True)
        assert pilot.pilot_only and pilot.results_dir == "results/pilot/study/flickr8k"
        assert _arm("bcls", "Triplet-SN", pilot).seeds(pilot) == (0, 1, 2, 3, 4)
    assert power_seeds.seeds_of("default", "flickr8k", "bcls", "Triplet-SN", pilot=True) is None
    assert power_seeds.seeds_of("default", "flickr8k", "bcls", "Triplet-SN") == 8
    assert power_seeds.most_of_paper("default", "flickr8k", "bcls", pilot=True) == 0
    assert power_seeds.most_of_paper("default", "flickr8k", "bcls") == 8
    assert power_seeds.seeds_of("default", "flickr8k", "bcls", "Triplet-SN", path=path, pilot=True) == 8  # named file
    assert power_seeds.load() == {("default", "flickr8k"): {"bcls/Triplet-SN": 8}}
    assert get_profile("default", pilot_only=True).results_dir == "results/pilot/study"
    assert profile_for(get_profile("default", pilot_only=True), "flickr8k").pilot_only  # a profile keeps its flag
    assert profile_for("smoke", "synthetic", pilot_only=True).results_dir == "results/smoke/pilot/study"


def test_a_notebook_study_takes_the_pilot_flag_from_its_kernels_environment(monkeypatch):
    """The driver's ``--pilot-only`` reaches a notebook through its kernel's environment: a :class:`Study` given a
    profile's name reads it there, unless told; a study given a profile keeps the profile's flag."""
    from reproduce.protocol.study import Study
    from reproduce.spec.profiles import get_profile

    monkeypatch.setenv(power_seeds.PILOT_ONLY_ENV, "1")
    assert Study("smoke", "synthetic", cache=object()).profile.pilot_only
    assert not Study("smoke", "synthetic", cache=object(), pilot_only=False).profile.pilot_only
    monkeypatch.delenv(power_seeds.PILOT_ONLY_ENV)
    assert not Study("smoke", "synthetic", cache=object()).profile.pilot_only
    assert Study(get_profile("smoke", pilot_only=True), "synthetic", cache=object()).profile.pilot_only

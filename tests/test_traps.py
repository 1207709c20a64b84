"""Traps a new user walks into, each closed: an empty paper selection trains nothing, one default cache for
``make``, ``python -m reproduce`` and Lab, notebooks edited in Lab leave git clean, ``make lab ARGS=...``,
Ctrl-C / SIGTERM end with one line, a bad cache variable is named."""

from __future__ import annotations

from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------------------
# --papers data: the data card trains nothing
# ------------------------------------------------------------------------------------------------
class _RefusingExecutor:
    """An executor that records every call; the tests below expect none."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def run(self, configs, cache, bar=None, evaluate=True):
        self.calls.append(len(configs))
        return []


def test_an_empty_paper_list_tunes_nothing():
    """``run_protocol(papers=[])`` selects no paper: no tuning run, no final config (``None`` still means all)."""
    from coherent_itr.runs import RunCache

    from reproduce import tuning
    from reproduce.study import profile_for

    profile = profile_for("default", "synthetic")
    assert tuning.tuning_configs(profile, None), "the default profile tunes: the check below would be vacuous"
    executor = _RefusingExecutor()
    assert tuning.run_protocol(profile, [], RunCache(), executor) == []
    assert executor.calls == []


def test_papers_data_trains_nothing_under_the_tuned_profile(monkeypatch, capsys):
    """``--papers data`` (the data card, no runs) under the tuned default profile: the plan is empty, the
    announcement says so, and training prepares nothing, runs no executor and writes no tuning summary."""
    from coherent_itr.runs import RunCache

    from reproduce import __main__ as cli
    from reproduce import executors, prepare, tuning

    args = cli.parse_args(["--papers", "data", "--data", "synthetic", "--no-progress"])
    args.data_reasons = ["synthetic: planted"]
    executor = _RefusingExecutor()
    called = []
    monkeypatch.setattr(executors, "make_executor", lambda *a, **k: executor)
    monkeypatch.setattr(prepare, "prepare", lambda todo, progress: called.append(("prepare", len(todo))) or 0.0)
    monkeypatch.setattr(tuning, "write_tuning_summary", lambda *a, **k: called.append(("summary", a[3:])))
    cache = RunCache()
    plan = cli.plan_data_set(args, "synthetic", cache)
    assert plan.tuned and plan.configs == [] and plan.todo == []
    cli.announce(args, [plan])
    out = cli.Outcome()
    cli.train_data_set(args, plan, cache, out)
    assert executor.calls == [] and called == [] and out.runs_to_do == 0 and out.failed_runs == []
    said = capsys.readouterr().out
    assert "0 run(s) to train in all (the selected papers train nothing)" in said
    assert "tuning done" not in said

"""Profiles: how big each part of the study is (sizes, epochs, seeds) — one dataclass each.

* ``smoke``   — seconds to minutes; what CI and nbval run.
* ``default`` — what ``make reproduce`` runs on a 2-core CPU.
* ``paper``   — the papers' sizes and epochs (VSE++ GRU-1024, 30 epochs, batch 128); for GPUs.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Profile:
    name: str
    data: str
    data_scale: str
    seeds: tuple[int, ...]
    model: dict = field(default_factory=dict)      # Config overrides: sizes, epochs, lr schedule
    results_dir: str = "results"


PROFILES = {
    "smoke": Profile("smoke", data="toy", data_scale="smoke", seeds=(0,), results_dir="results/smoke",
                     model=dict(embed_dim=32, word_dim=16, text_hidden=32, epochs=2, batch_size=32, lr=2e-3,
                                lr_decay_epoch=1, vocab_min_count=1)),
    "default": Profile("default", data="toy", data_scale="default", seeds=(0, 1, 2),
                       model=dict(embed_dim=64, word_dim=32, text_hidden=64, epochs=10, batch_size=32, lr=2e-3,
                                  lr_decay_epoch=7, vocab_min_count=1)),
    "paper": Profile("paper", data="flickr8k", data_scale="paper", seeds=(0, 1, 2),
                     model=dict(embed_dim=1024, word_dim=300, text_hidden=1024, epochs=30, batch_size=128,
                                lr=2e-4, lr_decay_epoch=15)),
}


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
    return PROFILES[name]

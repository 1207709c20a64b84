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
    thin_sweeps: bool = False                      # keep only a sweep's two ends and the paper default

    def thin(self, values, keep=()) -> list:
        """A sweep's values under this profile: all of them, or (thinned) its ends plus ``keep``."""
        values = list(values)
        if not self.thin_sweeps or len(values) <= 3:
            return values
        return [v for i, v in enumerate(values) if i in (0, len(values) - 1) or v in keep]


# Sizes chosen from step costs measured on a 2-core CPU (README "Profiles"): GRU-256 ≈ 45 ms a
# step at batch 128 on one thread; the default plan is ~190 runs in ≈ 30 min with 2 workers.
PROFILES = {
    "smoke": Profile("smoke", data="synthetic", data_scale="smoke", seeds=(0,), results_dir="results/smoke",
                     thin_sweeps=True,
                     model=dict(embed_dim=64, word_dim=64, text_hidden=64, epochs=2, batch_size=64, lr=2e-3,
                                lr_decay_epoch=1, sampling="images")),
    "default": Profile("default", data="synthetic", data_scale="default", seeds=(0, 1, 2), thin_sweeps=True,
                       model=dict(embed_dim=256, word_dim=128, text_hidden=256, epochs=12, batch_size=128,
                                  lr=2e-3, lr_decay_epoch=8, sampling="images")),
    "paper": Profile("paper", data="flickr8k", data_scale="default", seeds=(0, 1, 2),
                     model=dict(embed_dim=1024, word_dim=300, text_hidden=1024, epochs=30, batch_size=128,
                                lr=2e-4, lr_decay_epoch=15, sampling="captions")),
}


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
    return PROFILES[name]

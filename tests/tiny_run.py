"""The smallest training run the tests share: the toy data set, tiny encoders, one epoch (seconds) — the engine
pins' (:mod:`reproduce.driver.pins`)."""

from reproduce.driver.pins import TINY, tiny

__all__ = ["TINY", "tiny"]

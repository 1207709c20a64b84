"""Shared fixtures: every test gets its own cache folder; Flickr8k tests skip when it is absent."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # Tests never touch the user's cache, except a shared per-session cache for expensive
    # artefacts (SBERT embeddings, features) which tests may request explicitly.
    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def flickr8k_dir():
    d = os.environ.get("FLICKR8K_DIR")
    if not d or not os.path.isdir(d):
        pytest.skip("Flickr8k not configured: set FLICKR8K_DIR to the release folder to run this test")
    return d

"""Per-paper analyses behind the notebooks: derived columns, effects, figures."""

"""Driver: what runs it all — the command line (``python -m reproduce``), the executors (local processes, Ray),
notebook execution, the data bundle."""

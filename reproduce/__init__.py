"""The study's driver: plan the runs a profile needs, run the missing ones, write results/.

The modules sit in four import layers, bottom to top (the map: :mod:`reproduce.layers`; enforced with no import
circle by ``tests/test_import_layers.py``): **specification** (profiles, arms, claims, paper numbers, labels,
paths), **protocol** (tuning, Study, plan and cost, preparation, verdict rule, ledger, claim rows), **presentation**
(page, tables and figures, qualitative views, site, ``analyses/``) and **driver** (``python -m reproduce``,
executors, notebook execution, data bundle). A module imports only its own layer or the layers below.
"""

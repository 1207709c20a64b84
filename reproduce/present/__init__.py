"""Presentation: what the notebooks and the site show — the page every notebook starts with, tables and figures,
the qualitative views, the static site and the per-paper analyses (``analyses/``)."""

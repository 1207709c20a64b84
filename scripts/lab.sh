#!/usr/bin/env bash
# JupyterLab for this study: rooted at the repository (so notebooks/ and results/ are both browsable),
# the project's kernel available; as root (containers, cloud machines) with --allow-root.
# Notebooks under notebooks/ are saved without outputs (scripts/jupyter_server_config.py), so running one
# leaves git clean; the run cache is the checkout's .cache/ (unless COHERENT_ITR_CACHE is set), as for make
# and python -m reproduce. `make lab` runs this; tests/reproduce/driver/test_cli.py starts the very same command line. Extra
# arguments go to jupyter: `make lab ARGS="--port=8899 --no-browser"` or `bash scripts/lab.sh --port=8899`.
# JUPYTER: the jupyter executable (default .venv/bin/jupyter).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JUPYTER=${JUPYTER:-.venv/bin/jupyter}
args=(lab --ServerApp.root_dir=. --config=scripts/jupyter_server_config.py)  # notebooks/ saved without outputs
if [ "$(id -u)" = 0 ]; then
    args+=(--allow-root)
fi
exec "$JUPYTER" "${args[@]}" "$@"

#!/usr/bin/env bash
# JupyterLab for this study: rooted at the repository (so notebooks/ and results/ are both browsable),
# the project's kernel available; as root (containers, cloud machines) with --allow-root.
# `make lab` runs this; tests/test_cli.py starts the very same command line. Extra arguments go to
# jupyter (e.g. --port=8899 --no-browser). JUPYTER: the jupyter executable (default .venv/bin/jupyter).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JUPYTER=${JUPYTER:-.venv/bin/jupyter}
args=(lab --ServerApp.root_dir=.)
if [ "$(id -u)" = 0 ]; then
    args+=(--allow-root)
fi
exec "$JUPYTER" "${args[@]}" "$@"

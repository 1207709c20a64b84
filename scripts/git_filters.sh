#!/usr/bin/env bash
# The output filter of notebooks/*.ipynb (named in .gitattributes): git sees those notebooks through
# nbstripout, without outputs, execution counts, widget state or the kernel's version details, so running
# one in Lab (which autosaves them) leaves `git status` clean; what you change in a cell's source still shows.
# The executed notebooks under results/ are not filtered. `make venv` runs this once; it writes the filter
# into this repository's git config. PYTHON: an interpreter with nbstripout (default .venv/bin/python).
# Outside a git checkout it does nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1 || exit 0
PYTHON=${PYTHON:-.venv/bin/python}
PYTHON=$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")  # absolute, a venv's link kept
# language_info: Lab fills in the running Python's version and lexer; the committed notebooks keep only its name
lang_keys="codemirror_mode file_extension mimetype nbconvert_exporter pygments_lexer version"
extra_keys=$(printf 'metadata.language_info.%s ' $lang_keys)
git config filter.nbstripout.clean "'$PYTHON' -m nbstripout --keep-id --extra-keys '${extra_keys% }'"
git config filter.nbstripout.smudge cat

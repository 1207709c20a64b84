# coherent_itr — `make help` lists the targets.
SHELL := /bin/bash
PY_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= default
export PYTHONHASHSEED := 0
# run cache: the checkout's .cache/ unless COHERENT_ITR_CACHE is set (src/coherent_itr/paths.py), as for
# python -m reproduce and notebooks in Lab

.PHONY: help reproduce retrain runs test lint smoke lab clean venv site test-site

help:  ## show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

venv: $(STAMP)  ## create .venv and install the pinned environment (once)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PY_SYS) -m venv $(VENV)
	@echo "make venv: installing requirements.txt into $(VENV) (torch CPU build, Jupyter, papermill, the scientific stack; a few minutes, once)"
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip install --disable-pip-version-check -q --no-deps -e . 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -c "import torch, coherent_itr, sentence_transformers; print('environment ok: torch', torch.__version__)"
	$(PY) -m ipykernel install --sys-prefix --name coherent-itr --display-name "coherent_itr (.venv)" >/dev/null
	PYTHON=$(PY) bash scripts/git_filters.sh  # git stores notebooks/*.ipynb without outputs (nbstripout)
	@touch $(STAMP)

reproduce: $(STAMP) runs  ## the main job: every notebook, table, figure and verdict from the committed runs, on any machine (trains nothing)
	$(PY) -m reproduce --profile $(PROFILE) --runs-from committed

retrain: $(STAMP)  ## train every run of the study under this machine's numerics (CPU hours: the plan and its cost come first)
	$(PY) -m reproduce --profile $(PROFILE) --dry-run
	$(PY) -m reproduce --profile $(PROFILE)

runs: $(STAMP)  ## merge the committed run archives (results/runs/*.tar.xz, each entry verified) into the run cache
	@for f in results/runs/*.tar.xz; do [ -e "$$f" ] || continue; $(PY) -m reproduce --import-runs "$$f" || exit $$?; done

smoke: $(STAMP)  ## the reproduce pipeline at its smallest size (profile=smoke), into results/smoke/
	$(PY) -m reproduce --profile smoke

lint: $(STAMP)  ## ruff check + ruff format --check (configured in pyproject.toml; also a pre-commit hook)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint  ## lint, then every test (unit, pipeline, notebooks under the smoke profile via nbval)
	COHERENT_ITR_PROFILE=smoke $(PY) -m pytest -q --nbval-lax --nbval-kernel-name coherent-itr tests notebooks

site: $(STAMP)  ## static HTML site of the committed results (notebooks, ledger, figures) in results/site/
	$(PY) -m reproduce.present.site

test-site: site  ## build the site, then check it in headless Chromium (skips without one: apt-get install chromium)
	COHERENT_ITR_SITE=$(CURDIR)/results/site $(PY) -m pytest -q -p no:cacheprovider tests/reproduce/present/test_site.py

lab: $(STAMP)  ## JupyterLab at the repository root, the project's kernel; options: ARGS="--port=8899 --no-browser"
	JUPYTER=$(VENV)/bin/jupyter bash scripts/lab.sh $(ARGS)

clean:  ## remove caches and generated results (keeps .venv)
	rm -rf .cache .pytest_cache results/smoke
	find . -name __pycache__ -not -path './.venv/*' -prune -exec rm -rf {} +

# Two entry points for a fresh machine: `make run` (set up + run the default experiment)
# and `make test` (set up + run the tests). Everything installs into .venv/ in the repo.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.mastif-installed
CORES ?= 2

.PHONY: setup run test lint dry-run clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: setup
	$(BIN)/snakemake --cores $(CORES)

dry-run: setup
	$(BIN)/snakemake -n

test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile workflow/
	$(BIN)/ruff check src tests workflow/scripts

clean:
	rm -rf results logs .snakemake

# Two entry points for a fresh machine: `make run` (set up + run the default experiment)
# and `make test` (set up + run the tests). Everything installs into .venv/ in the repo.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.mastif-installed
CORES ?= 2
TORCH_VERSION ?= 2.13.0
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup run test lint dry-run clean

setup: $(STAMP) $(CHROMIUM)

# the browser tools drive Debian's Chromium through Playwright (Playwright's own browser
# download cannot work offline); needs root, as on these machines
$(CHROMIUM):
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# CPU PyTorch first: on these machines this pin is a local CPU wheel; an unpinned
	# torch would pull several GB of CUDA wheels
	$(BIN)/pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: setup
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --report results/report.html

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

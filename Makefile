# Two entry points for a fresh machine: `make run` (set up + run the default experiment)
# and `make test` (set up + run the tests). Everything installs into .venv/ in the repo.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.mastif-installed
CORES ?= 2
TORCH_VERSION ?= 2.13.0
CHROMIUM ?= /usr/bin/chromium
# llama.cpp for a portable x86-64 CPU (AVX2/FMA/F16C), not -march=native: where the CPU
# reports AMX but the sandbox kernel does not grant it, a native build dies with SIGILL
# (tilezero) on its first completion (seen on these machines)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLAMA_CPP_VERSION := $(shell sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' pyproject.toml)

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
	# built here with the flags above; --no-cache-dir: never a wheel cached from a native build
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet --no-cache-dir \
		'llama-cpp-python[server]==$(LLAMA_CPP_VERSION)'
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

# Two entry points for a fresh machine: `make run` (set up + run the default experiment)
# and `make test` (set up + run the tests). Everything installs into .venv/ in the repo.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.mastif-installed
CORES ?= 2
TORCH_VERSION ?= 2.13.0
CHROMIUM ?= /usr/bin/chromium
# llama.cpp for the instruction sets /proc/cpuinfo lists, but never AMX: where the CPU
# reports AMX and the sandbox kernel does not grant it, a -march=native build dies with
# SIGILL (tilezero) on its first completion (seen on these machines). Elsewhere: native.
ifeq ($(shell uname -m),x86_64)
CPU_FLAGS := $(shell grep -m1 '^flags' /proc/cpuinfo)
has = $(if $(filter $(1),$(CPU_FLAGS)),ON,OFF)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=$(call has,avx) -DGGML_AVX2=$(call has,avx2) \
	-DGGML_FMA=$(call has,fma) -DGGML_F16C=$(call has,f16c) -DGGML_BMI2=$(call has,bmi2) \
	-DGGML_AVX_VNNI=$(call has,avx_vnni) -DGGML_AVX512=$(call has,avx512f) \
	-DGGML_AVX512_VBMI=$(call has,avx512vbmi) -DGGML_AVX512_VNNI=$(call has,avx512_vnni) \
	-DGGML_AVX512_BF16=$(call has,avx512_bf16)
endif
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

# Two entry points for a fresh machine: `make run` (set up + run the default experiment)
# and `make test` (set up + run the tests); `make test-fast` runs the quick tier.
# Everything installs into .venv/ in the repo, pinned by requirements.lock.
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
# The compiled llama-cpp-python wheel is kept per machine, outside the repo, so a second
# fresh clone installs it in seconds instead of compiling for ~8 min. The key covers every
# input that changes the binary: version, exact CMake flags, Python, architecture and
# compiler. A wheel built with other flags is never reused (the AMX lesson above).
MASTIF_CACHE ?= $(HOME)/.cache/mastif
WHEEL_KEY := $(shell printf '%s|%s|%s|%s|%s' '$(LLAMA_CPP_VERSION)' '$(LLAMA_CMAKE_ARGS)' \
	"$$($(PYTHON) -c 'import sys; print(sys.implementation.cache_tag)')" "$$(uname -m)" \
	"$$($${CXX:-c++} --version 2>/dev/null | head -1)" | sha256sum | cut -c1-16)
WHEEL_DIR := $(MASTIF_CACHE)/wheels/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(WHEEL_KEY)
# llama.cpp's own server (parallel slots, per-slot prompt-prefix reuse, continuous batching),
# built from the llama.cpp tree vendored in the same llama-cpp-python sdist (MIT), with the
# same flags, cached per machine like the wheel; copied into the venv as $(BIN)/llama-server
LLAMA_SERVER_DIR := $(MASTIF_CACHE)/bin/llama-server-$(LLAMA_CPP_VERSION)-$(WHEEL_KEY)
LLAMA_SERVER_CMAKE_ARGS := -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
# every transitive dependency pinned (`make lock` refreshes it); pyproject keeps ranges
LOCK := requirements.lock
UV_VERSION ?= 0.13.9
# uv does not read pip's configuration: hand it pip's find-links (a local wheel folder)
ifneq ($(PIP_FIND_LINKS),)
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif

.PHONY: setup run test test-fast test-real-all lint lock dry-run clean llama-wheel llama-server interop

setup: $(STAMP) $(BIN)/llama-server $(CHROMIUM) interop

# the official TypeScript MCP and A2A clients of the conformance tests (tests/protocols/test_interop.py),
# from the committed lockfile; without Node those tests skip and say so
INTEROP := tests/interop
interop:
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "interop: node/npm not found, tests/protocols/test_interop.py will skip"; \
	elif [ ! -f $(INTEROP)/node_modules/.package-lock.json ] || \
		[ $(INTEROP)/package-lock.json -nt $(INTEROP)/node_modules/.package-lock.json ]; then \
		cd $(INTEROP) && npm ci --no-audit --no-fund --loglevel=error; \
	fi

# the browser tools drive Debian's Chromium through Playwright (Playwright's own browser
# download cannot work offline); needs root, as on these machines
$(CHROMIUM):
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	# uv installs the ~300 locked packages in ~10 s from its per-machine cache
	# (~/.cache/uv); pip took ~2 min for the same set, also on a second clone
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(MAKE) --no-print-directory llama-wheel
	# CPU PyTorch: on these machines the pin is a local CPU wheel in pip's find-links
	# (uv reads no pip.conf, hence UV_FIND_LINKS above); an unpinned torch would pull
	# several GB of CUDA wheels
	# --compile-bytecode: compiled once here, not by every first test worker and job
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c $(LOCK) \
		torch==$(TORCH_VERSION) \
		"$$(ls $(WHEEL_DIR)/llama_cpp_python-*.whl)[server]" -e '.[dev]'
	touch $(STAMP)

# built with the flags above into a temporary folder, moved into place only when complete
# (an interrupted build leaves no wheel to reuse); --no-cache-dir: never pip's own cache
llama-wheel:
	@if ls $(WHEEL_DIR)/llama_cpp_python-*.whl >/dev/null 2>&1; then \
		echo "llama-cpp-python $(LLAMA_CPP_VERSION): cached wheel $(WHEEL_DIR)"; \
	else \
		echo "llama-cpp-python $(LLAMA_CPP_VERSION): compiling (once per machine and flags)"; \
		mkdir -p $(MASTIF_CACHE)/wheels && tmp=$$(mktemp -d $(MASTIF_CACHE)/wheels/.build-XXXXXX) && \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel --quiet --no-deps --no-cache-dir \
			-w $$tmp 'llama-cpp-python==$(LLAMA_CPP_VERSION)' && \
		printf '%s\n' '$(LLAMA_CMAKE_ARGS)' > $$tmp/CMAKE_ARGS && \
		rm -rf $(WHEEL_DIR) && mv $$tmp $(WHEEL_DIR); \
	fi

# no web UI (its assets would be downloaded), no TLS: the server listens on loopback only
llama-server:
	@if [ -x $(LLAMA_SERVER_DIR)/llama-server ]; then \
		echo "llama-server $(LLAMA_CPP_VERSION): cached $(LLAMA_SERVER_DIR)"; \
	else \
		echo "llama-server $(LLAMA_CPP_VERSION): compiling (once per machine and flags)"; \
		mkdir -p $(MASTIF_CACHE)/bin && tmp=$$(mktemp -d $(MASTIF_CACHE)/bin/.build-XXXXXX) && \
		$(BIN)/pip download --quiet --no-deps --no-binary :all: --no-cache-dir -d $$tmp \
			'llama-cpp-python==$(LLAMA_CPP_VERSION)' && \
		tar -xzf $$tmp/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz -C $$tmp && \
		cmake -S $$tmp/llama_cpp_python-$(LLAMA_CPP_VERSION)/vendor/llama.cpp -B $$tmp/build \
			-G Ninja $(LLAMA_SERVER_CMAKE_ARGS) $(LLAMA_CMAKE_ARGS) >$$tmp/cmake.log && \
		cmake --build $$tmp/build --target llama-server -j $(CORES) >$$tmp/build.log && \
		mkdir -p $$tmp/out && cp $$tmp/build/bin/llama-server $$tmp/out/ && \
		rm -rf $(LLAMA_SERVER_DIR) && mv $$tmp/out $(LLAMA_SERVER_DIR) && rm -rf $$tmp; \
	fi

$(BIN)/llama-server: | $(STAMP)
	$(MAKE) --no-print-directory llama-server
	cp $(LLAMA_SERVER_DIR)/llama-server $@

# refresh the lock: resolve pyproject's ranges in a scratch venv and pin everything it got
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet torch==$(TORCH_VERSION)
	$(MAKE) --no-print-directory llama-wheel BIN=.lock-venv/bin
	.lock-venv/bin/pip install --quiet "$$(ls $(WHEEL_DIR)/llama_cpp_python-*.whl)[server]"
	.lock-venv/bin/pip install --quiet '.[dev,slurm]'
	( echo "# every package of the mastif environment, pinned: make lock regenerates this file"; \
	  echo "# (python $$(.lock-venv/bin/python -c 'import platform; print(platform.python_version())'), $$(date -u +%Y-%m-%d))"; \
	  .lock-venv/bin/pip freeze --all --exclude-editable | grep -v -i -E '^(mastif|pip|setuptools|wheel)( @ |==)' \
	  | sed -e 's|^llama_cpp_python @ .*|llama-cpp-python==$(LLAMA_CPP_VERSION)|' -e 's|^torch==.*|torch==$(TORCH_VERSION)|' \
	  | LC_ALL=C sort -f ) > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK) && rm -rf .lock-venv build

run: setup
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --report results/report.html

dry-run: setup
	$(BIN)/snakemake -n

# the whole suite: what .ci/run calls and the README's test command. Two pytest-xdist
# workers; the tests on the real model share one worker and one server (tests/conftest.py)
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25

# the fast tier: no model server, no Chromium, no Snakemake run on a model, no waiting on a
# time-out (those are marked `slow`); meant to finish within 5 minutes
test-fast: setup
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS)

# every framework under every protocol on the real model (make test runs the six beyond the
# paper's four under standard only): ~8 more minutes
test-real-all: setup
	MASTIF_REAL_ALL=1 $(BIN)/python -m pytest tests/frameworks/test_frameworks_real.py

lint: setup
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile workflow/
	$(BIN)/ruff check src tests workflow/scripts

clean:
	rm -rf results logs .snakemake

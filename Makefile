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
# llama.cpp's server comes prebuilt in the xllamacpp wheel (requirements.lock): set-up compiles
# nothing. `make llama-native` compiles the same llama.cpp release (the tree vendored in the
# xllamacpp sdist, MIT) for this CPU into $(BIN)/llama-server, for options.server:
# llama-server; here the prebuilt took 1.25x as long on the same requests, 1.24-1.30x on
# warm default runs, 0.86x on a fresh machine's first (set-up included): docs/providers.md.
# Its flags: the instruction sets /proc/cpuinfo lists, but never AMX: where the CPU reports
# AMX and the sandbox kernel does not grant it, a -march=native build dies with SIGILL
# (tilezero) on its first completion (seen on these machines).
ifeq ($(shell uname -m),x86_64)
CPU_FLAGS := $(shell grep -m1 '^flags' /proc/cpuinfo)
has = $(if $(filter $(1),$(CPU_FLAGS)),ON,OFF)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=$(call has,avx) -DGGML_AVX2=$(call has,avx2) \
	-DGGML_FMA=$(call has,fma) -DGGML_F16C=$(call has,f16c) -DGGML_BMI2=$(call has,bmi2) \
	-DGGML_AVX_VNNI=$(call has,avx_vnni) -DGGML_AVX512=$(call has,avx512f) \
	-DGGML_AVX512_VBMI=$(call has,avx512vbmi) -DGGML_AVX512_VNNI=$(call has,avx512_vnni) \
	-DGGML_AVX512_BF16=$(call has,avx512_bf16)
endif
XLLAMACPP_VERSION := $(shell sed -n 's/.*"xllamacpp==\([0-9.]*\)".*/\1/p' pyproject.toml)
# the sdist of that release, by its registry URL and hash (pip download would first build the
# sdist's metadata, ~3 min); a new pin needs both from https://pypi.org/simple/xllamacpp/
XLLAMACPP_SDIST_URL := https://files.pythonhosted.org/packages/87/62/b6dfaaf346d3d4fd0e2a2df755f2693b77673f2735da7ba0592af9d2f09e/xllamacpp-$(XLLAMACPP_VERSION).tar.gz
XLLAMACPP_SDIST_SHA256 := c17ee1163006f70726abb9f72137830818f3d8cb60bfc34cb232d08428eaa22b
# the compiled server is kept per machine, outside the repo, so a second clone copies it in a
# second. The key covers every input that changes the binary: version, exact CMake flags,
# architecture and compiler; a build with other flags is never reused (the AMX lesson above)
MASTIF_CACHE ?= $(HOME)/.cache/mastif
NATIVE_KEY := $(shell printf '%s|%s|%s|%s' '$(XLLAMACPP_VERSION)' '$(LLAMA_CMAKE_ARGS)' \
	"$$(uname -m)" "$$($${CXX:-c++} --version 2>/dev/null | head -1)" | sha256sum | cut -c1-16)
NATIVE_DIR := $(MASTIF_CACHE)/bin/llama-server-$(XLLAMACPP_VERSION)-$(NATIVE_KEY)
# no web UI (its assets would be downloaded), no TLS: the server listens on loopback only
NATIVE_CMAKE_ARGS := -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
# every transitive dependency pinned (`make lock` refreshes it); pyproject keeps ranges
LOCK := requirements.lock
# what the resolution drops (llama-cpp-python, which the bundled model's package requires)
OVERRIDES := requirements.overrides
UV_VERSION ?= 0.13.9
# uv does not read pip's configuration: hand it pip's find-links (a local wheel folder)
ifneq ($(PIP_FIND_LINKS),)
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif

.PHONY: envs envs-all setup run test test-fast test-real-all lint lock dry-run clean llama-native interop

setup: $(STAMP) $(CHROMIUM) interop envs

# each framework's own environment (envs/<framework>/requirements.lock -> .envs/<framework>/,
# mastif.execution.frameworkenv): the default experiment's four here; an experiment naming
# others gets theirs built by its workflow (rule framework_env) before its stack jobs, or
# beforehand by `mastif envs build --configfile FILE` (clusters whose nodes have no network)
ENVS ?= $(shell sed -n 's/^frameworks: *\[\(.*\)\]/\1/p' config/config.yaml | tr -d ' ' | tr ',' ' ')
ALL_ENVS := $(patsubst envs/%/requirements.in,%,$(wildcard envs/*/requirements.in))
envs: $(STAMP)
	$(BIN)/mastif envs build $(ENVS)

envs-all: $(STAMP)
	$(BIN)/mastif envs build $(ALL_ENVS)

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

$(STAMP): pyproject.toml $(LOCK) $(OVERRIDES)
	# made anew: the environment holds what the lock lists and nothing else (no framework)
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	# uv installs the ~300 locked packages in ~10 s from its per-machine cache
	# (~/.cache/uv); pip took ~2 min for the same set, also on a second clone
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	# CPU PyTorch: on these machines the pin is a local CPU wheel in pip's find-links
	# (uv reads no pip.conf, hence UV_FIND_LINKS above); an unpinned torch would pull
	# several GB of CUDA wheels
	# --compile-bytecode: compiled once here, not by every first test worker and job
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c $(LOCK) \
		--override $(OVERRIDES) torch==$(TORCH_VERSION) -e '.[dev]'
	touch $(STAMP)

# opt-in: llama.cpp's server compiled for this CPU (options.server: llama-server), from the
# pinned xllamacpp release's sdist: the same llama.cpp as the prebuilt default. Built into a
# temporary folder, moved into place only when complete (an interrupted build leaves nothing
# to reuse). Needs cmake, ninja and a C++ compiler; ~6 min on 2 cores.
llama-native: $(STAMP)
	@if [ -x $(NATIVE_DIR)/llama-server ]; then \
		echo "llama-server (xllamacpp $(XLLAMACPP_VERSION)): cached $(NATIVE_DIR)"; \
	else \
		echo "llama-server (xllamacpp $(XLLAMACPP_VERSION)): compiling (once per machine and flags)"; \
		mkdir -p $(MASTIF_CACHE)/bin && tmp=$$(mktemp -d $(MASTIF_CACHE)/bin/.build-XXXXXX) && \
		curl -fsSL -o $$tmp/sdist.tar.gz '$(XLLAMACPP_SDIST_URL)' && \
		echo '$(XLLAMACPP_SDIST_SHA256)  '$$tmp/sdist.tar.gz | sha256sum -c --quiet && \
		tar -xzf $$tmp/sdist.tar.gz -C $$tmp && \
		cmake -S $$tmp/xllamacpp-$(XLLAMACPP_VERSION)/thirdparty/llama.cpp -B $$tmp/build \
			-G Ninja $(NATIVE_CMAKE_ARGS) $(LLAMA_CMAKE_ARGS) >$$tmp/cmake.log && \
		cmake --build $$tmp/build --target llama-server -j $(CORES) >$$tmp/build.log && \
		mkdir -p $$tmp/out && cp $$tmp/build/bin/llama-server $$tmp/out/ && \
		printf 'llama.cpp of xllamacpp %s sdist, native build %s\n' '$(XLLAMACPP_VERSION)' \
			'$(NATIVE_KEY)' >$$tmp/out/llama-server.source && \
		rm -rf $(NATIVE_DIR) && mv $$tmp/out $(NATIVE_DIR) && rm -rf $$tmp; \
	fi
	cp $(NATIVE_DIR)/llama-server $(NATIVE_DIR)/llama-server.source $(BIN)/
	@echo "installed $(BIN)/llama-server; use it with models.<id>.options.server: llama-server"

# refresh the lock: resolve pyproject's ranges in a scratch venv and pin everything it got
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet uv==$(UV_VERSION)
	.lock-venv/bin/uv pip install --quiet --python .lock-venv/bin/python \
		--override $(OVERRIDES) torch==$(TORCH_VERSION) '.[dev,slurm]'
	( echo "# every package of the mastif environment, pinned: make lock regenerates this file"; \
	  echo "# (python $$(.lock-venv/bin/python -c 'import platform; print(platform.python_version())'), $$(date -u +%Y-%m-%d))"; \
	  .lock-venv/bin/uv pip freeze --python .lock-venv/bin/python --exclude-editable \
	  | grep -v -i -E '^(mastif|pip|setuptools|wheel)( @ |==)' \
	  | sed -e 's|^torch==.*|torch==$(TORCH_VERSION)|' \
	  | LC_ALL=C sort -f ) > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK) && rm -rf .lock-venv build
	# each framework's own lock, with hashes, for every platform (uv's universal resolution)
	for d in $(ALL_ENVS); do \
		(cd envs/$$d && ../../$(BIN)/uv pip compile -q --universal --generate-hashes --upgrade \
			--python-version 3.11 --custom-compile-command "make lock" \
			requirements.in -o requirements.lock) || exit 1; \
	done

run: setup
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --report results/report.html

dry-run: setup
	$(BIN)/snakemake -n

# the whole suite: what .ci/run calls and the README's test command. Two pytest-xdist
# workers; the tests on the real model share one worker and one server (tests/conftest.py)
TEST_WORKERS ?= 2
# then each framework's contract and adapter tests in its own environment (tests/conftest.py
# picks them; tests.support.env_tests runs them, eight environments at a time). They need
# ~7.7 CPU-minutes for the nineteen: after the harness's suite 4 min 10 s eight at a time
# (~4 min 40 s four at a time: 17 min 23 s in all, harness 12 min 31 s); beside it at nice 5, 17 min 54 s in all (both slowed more than the
# idle cores gave); at nice 19 a starved process missed an HTTP time-out (an A2A call of the
# outbound probe, 1 CI run in 3). So they run after it.
test: setup envs-all
	@status=0; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 || status=1; \
	$(BIN)/python -m tests.support.env_tests --durations=5 || status=1; \
	exit $$status

# the fast tier: no model server, no Chromium, no Snakemake run on a model, no waiting on a
# time-out (those are marked `slow`); meant to finish within 5 minutes
test-fast: setup envs-all
	@status=0; \
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) || status=1; \
	$(BIN)/python -m tests.support.env_tests -m "not slow" || status=1; \
	exit $$status

# every framework under every protocol on the real model (make test runs each under standard
# and LangGraph under mcp and a2a too): 36 more cells
test-real-all: setup envs-all
	MASTIF_REAL_ALL=1 $(BIN)/python -m pytest tests/frameworks/test_frameworks_real.py

lint: setup
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile workflow/
	$(BIN)/ruff check src tests workflow/scripts

clean:
	rm -rf results logs .snakemake

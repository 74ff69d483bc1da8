# oasr: the two commands that matter are `make serve` and `make test`.
BUILD_DIR   ?= build
ASAN_DIR    ?= build-asan
FUZZ_DIR    ?= build-fuzz
FUZZ_SECONDS ?= 60
BUILD_TYPE  ?= Release
JOBS        ?= $(shell nproc)
ADDRESS     ?= 0.0.0.0
PORT        ?= 50051
METRICS_PORT ?= 8080
# The bundled model (issue #8) when it is there; MODEL_DIR= serves none.
BUNDLED_MODEL := models/en-conformer-ctc
MODEL_DIR   ?= $(if $(wildcard $(BUNDLED_MODEL)/config.json),$(BUNDLED_MODEL),)
CMAKE_FLAGS ?=

SERVE_MODEL := $(if $(MODEL_DIR),--model-dir $(MODEL_DIR),)
FORMAT_FILES = $(shell git ls-files '*.cc' '*.h' '*.cu')

.PHONY: all deps configure build serve test test-asan fuzz container-test container-test-cuda bench format format-check clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	@$(MAKE) --no-print-directory deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Serve on $(ADDRESS):$(PORT) with the bundled model, on the GPU when one is usable, else the CPU.
serve: build
	$(BUILD_DIR)/server/oasr-server --address $(ADDRESS) --port $(PORT) \
	  --metrics-port $(METRICS_PORT) $(SERVE_MODEL)

# Every test, every label; GPU-labelled tests report "skipped" without a GPU.
test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer
# (engine only, without gRPC and CUDA, to keep it quick).
test-asan: deps
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DOASR_SANITIZE=ON \
	  -DOASR_WITH_GRPC=OFF -DOASR_WITH_CUDA=OFF -DOASR_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit

# The libFuzzer targets (tests/fuzz: audio formats, a StreamingRecognize
# call's messages, the model directory's files), built with clang under ASan
# + UBSan, each run FUZZ_SECONDS from its seeds (FUZZ_TARGETS="arpa units"
# picks some). A crash, leak or timeout fails; scripts/fuzz.sh says more.
fuzz: deps
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
	  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DOASR_FUZZ=ON \
	  -DOASR_WITH_CUDA=OFF -DOASR_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target oasr_fuzzers
	FUZZ_DIR=$(FUZZ_DIR) FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh $(FUZZ_TARGETS)

# Builds the Dockerfile's image (podman or docker, whichever can run) and
# checks it on loopback: the bundled model served, health, samples/
# transcribed, non-root, flags and OASR_* variables, a clean `stop`. Skips,
# saying why, where neither engine can run. Not part of `make test`: a cold
# image build takes minutes.
container-test:
	bash scripts/container-test.sh

# The same for the GPU image (the Dockerfile's cuda target): its CUDA
# libraries, served on the GPU where there is one, else on the CPU; a
# stand-in for NVIDIA's CUDA image, made from a local toolkit, where that
# cannot be pulled.
container-test-cuda:
	bash scripts/container-test.sh --cuda

# Builds and runs every benchmark (executables named oasr-bench-*); they print their figures.
bench: build
	@set -e; found=0; for b in $$(find $(BUILD_DIR)/bench -maxdepth 1 -type f -name 'oasr-bench-*' -perm -u+x | sort); do \
	  found=1; echo "== $$b"; $$b; done; \
	  [ $$found -eq 1 ] || { echo "no benchmarks built" >&2; exit 1; }

format:
	clang-format -i $(FORMAT_FILES)

format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)

# meshrl front door. On a fresh Debian 12 machine, as root:
#   make demo    install deps, build the meshrl binary only, run the main job on built-in defaults
#   make test    install deps, build, run every test (unit, oracle, fuzz smoke)
BUILD ?= build
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc)
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: deps build build-meshrl test test-sanitize test-sanitize-quick demo fuzz bench clean

deps:
	@scripts/install-deps

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

# Every target: the libraries, the binary and all the tests (what `make test` runs).
build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The `meshrl` binary and the libraries it links, no tests: all that demo and bench run.
build-meshrl: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target meshrl

test: build fuzz
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The tests under sanitizers (scripts/test-sanitize): every unit and integration test with ASan +
# UBSan in build-asan, then the coordinator's concurrency tests with TSan in build-tsan.
# test-sanitize-quick is the ASan + UBSan unit tests alone (.ci/run with MESHRL_CI_SANITIZE=quick).
test-sanitize: deps
	JOBS=$(JOBS) scripts/test-sanitize asan
	JOBS=$(JOBS) scripts/test-sanitize tsan

test-sanitize-quick: deps
	JOBS=$(JOBS) scripts/test-sanitize quick

$(FUZZ_BUILD)/build.ninja:
	CXX=clang++ CC=clang cmake -S . -B $(FUZZ_BUILD) -G Ninja -DMESHRL_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo

# Builds the libFuzzer targets; `make test` runs each briefly through scripts/fuzz-smoke.
fuzz: deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	scripts/fuzz-smoke $(FUZZ_BUILD) 20

# The main job: a coordinator and four city nodes (paris, zurich, dublin, toronto) on loopback
# behind the four-cities WAN emulator, on the tiny model and arithmetic (SFT warm start cached after
# the first run); ends with pass@1 before/after, bytes on the wire and runs/demo-*/summary.json.
# The single-node run is `meshrl train --config configs/tiny-arithmetic.toml`.
demo: build-meshrl
	./$(BUILD)/meshrl demo

# Benchmarks of ../shared/BENCH.md against the PyTorch-eager peer, measured in one run.
bench: build-meshrl
	/usr/bin/python3 bench/compare.py --meshrl $(BUILD)/meshrl --workloads rollout,train --models tiny --threads 1

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) build-asan build-tsan

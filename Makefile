# Herd: `make demo` runs the demo job on a local cluster; `make test` runs the test suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HERD := $(BIN)/herd
CONFIG ?= configs/demo.yaml
JOB ?=
ACTORS ?= 2

.PHONY: setup lock cluster-up cluster-down train status scale stop demo test test-fast soak proto lint clean \
	offline-wheels docs docs-serve docs-gen bench-humanoid bench-rllib bench-learner bench-actors bench-fanin \
	bench-scale bench-startup bench-pixels

$(BIN)/.installed: pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[all,dev]'
	$(BIN)/python -m herd.editable  # a script beside the clone's folder `herd` imports Herd, not the folder
	touch $@

lock: ## re-resolve pyproject.toml's dependencies in a throwaway venv and pin them in requirements.lock
	rm -rf .lockvenv && $(PY) -m venv .lockvenv
	.lockvenv/bin/python -m pip install -q -e '.[all,dev]'
	{ sed -n '1,2p' requirements.lock; .lockvenv/bin/python -m pip freeze --exclude-editable \
	  | sed -E 's/^(torch==[^+]*)\+.*/\1/'; } > requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf .lockvenv

setup: $(BIN)/.installed ## venv + pinned installs (idempotent)

cluster-up: setup ## local Ray head, dashboard on 127.0.0.1:8265
	$(HERD) up

cluster-down: setup ## wind running jobs down (summary, final checkpoint, books; GRACE=seconds), then stop the local Ray head; FORCE=1 skips the wind-down
	$(HERD) down $(if $(GRACE),--grace $(GRACE)) $(if $(FORCE),--force)

train: cluster-up ## submit CONFIG as a Ray job and follow it
	$(HERD) submit $(CONFIG) --follow

status: setup ## make status JOB=<job id>
	$(HERD) status $(JOB)

scale: setup ## make scale JOB=<job id> ACTORS=N
	$(HERD) scale $(JOB) --actors $(ACTORS)

stop: setup
	$(HERD) stop $(JOB)

demo: cluster-up ## the demo job: InvertedPendulum-v5 to a return of 900 on 2 CPU cores
	$(HERD) submit configs/demo.yaml --follow; status=$$?; \
	echo "herd lives in $(BIN)/: run 'source $(BIN)/activate' in this shell to put it on your PATH (or call $(HERD))"; \
	exit $$status

test: setup ## the whole suite (real Ray, real gRPC, real MuJoCo; CPU), the docs site's strict build included
	$(BIN)/python -m pytest -q -ra --durations=12

test-fast: setup ## the inner loop: the suite less the tests that start a Ray cluster, Docker or a fresh venv
	$(BIN)/python -m pytest -q -x -m 'not cluster and not soak'

soak: setup ## bounded fault-injection soak run
	$(BIN)/python -m pytest -q -m soak

proto: setup ## regenerate the gRPC stubs from proto/herd.proto (generated as herd/proto/: the import name)
	rm -rf .protogen && mkdir -p .protogen/herd/proto && cp proto/herd.proto .protogen/herd/proto/
	cd .protogen && ../$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. --pyi_out=. herd/proto/herd.proto
	cp .protogen/herd/proto/herd_pb2.py .protogen/herd/proto/herd_pb2_grpc.py .protogen/herd/proto/herd_pb2.pyi proto/
	rm -rf .protogen

lint: setup
	$(BIN)/ruff check cluster learner actors proto tests bench docs examples

clean:
	rm -rf runs .pytest_cache site wheelhouse

offline-wheels: ## wheelhouse/: Herd's wheel (committed HEAD) and its locked dependencies, for a node without network (PYVER=3.12 PLATFORM=x86_64 for another target, NO_TORCH=1 where the image has torch)
	bash deploy/offline-wheels.sh $(or $(WHEELHOUSE),wheelhouse)

docs: setup ## the docs site into site/ (strict: a broken link or a missing page fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: setup ## the docs site on http://127.0.0.1:8000, rebuilt on every change
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

docs-gen: setup ## regenerate docs/configuration.md, docs/cli.md, docs/performance.md and README's figures from the code and bench/results
	$(BIN)/python docs/_gen/generate.py

# Benchmarks behind docs/performance.md (bench/README.md: what each measures, how long it takes,
# and how to run them on a GPU node without network). PYTHON=python3 where there is no venv.
PYTHON ?= $(BIN)/python
bench-humanoid: ## Humanoid-v5: eval return against wall-clock from `herd submit`, one cold seed (SEED=1), 480 s
	$(PYTHON) -m herd up
	$(PYTHON) bench/humanoid.py --config configs/humanoid.yaml --seeds $(or $(SEED),1) --seconds $(or $(SECONDS_BUDGET),480)
	$(PYTHON) bench/plot_results.py

bench-pixels: ## DeepMind Control walker-walk from 84x84 camera frames: eval return against wall-clock, one cold seed (SEED=1), 600 s
	$(PYTHON) -m herd up
	$(PYTHON) bench/pixels.py --config configs/walker-walk-pixels.yaml --seeds $(or $(SEED),1) --seconds $(or $(SECONDS_BUDGET),600)

bench-rllib: ## RLlib's SAC on Humanoid-v5 for 120 s, the yardstick beside bench-humanoid, then the joint plot
	$(PYTHON) -m herd down
	$(PYTHON) bench/rllib_baseline.py --env Humanoid-v5 --seconds $(or $(RLLIB_SECONDS),120)
	$(PYTHON) bench/plot_results.py

bench-learner: ## the update alone: updates/s of plain SAC's and configs/humanoid.yaml's networks at batch 512 and 2048
	$(PYTHON) bench/learner.py --nets plain,configs/humanoid.yaml --rows 'amp graph+compile' --batches 512,2048 --compile-mode default

bench-actors: ## wire encoding, CPU per actor step, actors 1-16 against the same-policy ceiling (~8 min)
	timeout 120 $(PYTHON) bench/wire.py
	timeout 150 $(PYTHON) bench/actor_cost.py --seconds 5 --warmup 2
	timeout 420 $(PYTHON) bench/actors.py --counts 1,2,4,8,16 --variants base,envs=16 --seconds 5 --warmup 2 --threaded ''

bench-fanin: ## one learner, 1,000 synthetic actors: ingest and update rate, paced and flat out
	$(PYTHON) bench/fanin.py --clients 1000 --relay --ingest-processes 4 --procs 8 --config configs/humanoid-plain.yaml

bench-scale: ## a running job scaled 40 -> 100 -> 150 env actors, 60 s at each count
	$(PYTHON) bench/scale.py --counts 40,100,150 --hold 60 --gap 10

bench-startup: ## cold start-up of configs/humanoid.yaml on a preloaded cluster, 3 runs of 90 s
	$(PYTHON) bench/startup.py --config configs/humanoid.yaml --modes cold --preload on --repeat 3 --seconds 90

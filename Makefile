# Herd: `make demo` runs the demo job on a local cluster; `make test` runs the test suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HERD := $(BIN)/herd
CONFIG ?= configs/demo.yaml
JOB ?=
ACTORS ?= 2

.PHONY: setup lock cluster-up cluster-down train status scale stop demo test test-fast soak proto lint clean bench-humanoid bench-rllib bench-actors bench-family bench-sweep bench-ablation

$(BIN)/.installed: pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[all,dev]'
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

cluster-down: setup
	$(HERD) down

train: cluster-up ## submit CONFIG as a Ray job and follow it
	$(HERD) submit $(CONFIG) --follow

status: setup ## make status JOB=<job id>
	$(HERD) status $(JOB)

scale: setup ## make scale JOB=<job id> ACTORS=N
	$(HERD) scale $(JOB) --actors $(ACTORS)

stop: setup
	$(HERD) stop $(JOB)

demo: cluster-up ## the demo job: InvertedPendulum-v5 to a return of 900 on 2 CPU cores
	$(HERD) submit configs/demo.yaml --follow

test: setup ## the whole suite (real Ray, real gRPC, real MuJoCo; CPU)
	$(BIN)/python -m pytest -q -ra --durations=12

soak: setup ## bounded fault-injection soak run
	$(BIN)/python -m pytest -q -m soak

proto: setup ## regenerate the gRPC stubs from proto/herd.proto (generated as herd/proto/: the import name)
	rm -rf .protogen && mkdir -p .protogen/herd/proto && cp proto/herd.proto .protogen/herd/proto/
	cd .protogen && ../$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. --pyi_out=. herd/proto/herd.proto
	cp .protogen/herd/proto/herd_pb2.py .protogen/herd/proto/herd_pb2_grpc.py .protogen/herd/proto/herd_pb2.pyi proto/
	rm -rf .protogen

lint: setup
	$(BIN)/ruff check cluster learner actors proto tests bench

clean:
	rm -rf runs .pytest_cache

gpu-wheels: ## .devwheels/ for the GPU box: the shared bundle plus Herd's own wheel (of the committed HEAD)
	bash ../shared/device/bundle-wheels.sh
	rm -rf .gpusnap && mkdir -p .gpusnap && git archive HEAD | tar -x -C .gpusnap
	$(BIN)/python -m pip wheel -q --no-deps --no-build-isolation ./.gpusnap -w .devwheels && rm -rf .gpusnap

# GPU box benchmarks (see README "Results"); PYTHON=python3 where there is no venv.
PYTHON ?= $(BIN)/python
bench-humanoid: ## Humanoid-v5: eval return vs wall-clock from `herd submit` (warm compile cache); fits one 10-minute GPU call
	$(PYTHON) -m herd up
	$(PYTHON) -m herd precompile configs/humanoid.yaml
	$(PYTHON) bench/humanoid.py --config configs/humanoid.yaml --seconds $(or $(SECONDS_BUDGET),480)
	$(PYTHON) bench/plot_results.py

bench-rllib: ## RLlib's SAC on Humanoid-v5 for the same 120 s (run in the same GPU session as bench-humanoid), then the joint plot
	$(PYTHON) -m herd down
	$(PYTHON) bench/rllib_baseline.py --env Humanoid-v5 --seconds $(or $(RLLIB_SECONDS),120)
	$(PYTHON) bench/plot_results.py

bench-actors: ## issue 4's figures: wire encoding, CPU per actor step (by thread, page faults), actors 1-16 vs the same-policy ceiling, 16 envs per actor at 16 (~8 min)
	timeout 120 $(PYTHON) bench/wire.py
	timeout 150 $(PYTHON) bench/actor_cost.py --seconds 5 --warmup 2
	timeout 420 $(PYTHON) bench/actors.py --counts 1,2,4,8,16 --variants base,envs=16 --seconds 5 --warmup 2 --threaded ''

bench-family: ## the family beside plain SAC on one task, 2 minutes each: make bench-family TASK=Walker2d-v5
	$(PYTHON) -m herd up
	$(PYTHON) bench/humanoid.py --config configs/humanoid.yaml --config configs/humanoid-plain.yaml \
	  --set env.id=$(or $(TASK),Walker2d-v5) --set run.stop_at_target=false --set run.target_return=null \
	  --seconds 120 --out bench/results/family-$(or $(TASK),Walker2d-v5)-nvidia-h200.json

bench-sweep: ## batch size x replay ratio on Humanoid-v5 via Ray Tune, one seed's 3 x 3 grid per GPU call: make bench-sweep SEED=1 (then 2, 3); the compile cache is warmed for each batch size first (in parallel)
	$(PYTHON) -m herd up
	pids=; for b in $(subst $(comma), ,$(BATCHES)); do \
	  $(PYTHON) -m herd precompile configs/humanoid.yaml --set learner.batch_size=$$b & pids="$$pids $$!"; done; \
	for p in $$pids; do wait $$p || exit 1; done
	$(PYTHON) -m herd tune configs/humanoid.yaml --grid learner.batch_size=$(BATCHES) \
	  --grid learner.replay_ratio=0.025,0.05,0.1 --set actors.num_actors=4 --seconds 120 --concurrent 3 \
	  --seeds $(or $(SEEDS),1) --first-seed $(or $(SEED),1) --name humanoid --append --out bench/results/sweep-humanoid-nvidia-h200.json

comma := ,
BATCHES ?= 512$(comma)1024$(comma)2048
ABLATION_OUT ?= bench/results/ablation-par4-nvidia-h200.json

bench-ablation: ## each piece of the family off in turn on Humanoid-v5, seeds 1,2, 120 s per run, four jobs side by side (a quarter of the GPU and 3 actors each): one GPU call, ~450 s
	$(PYTHON) -m herd up
	$(PYTHON) bench/humanoid.py --ablate $(or $(PIECES),all) --seeds $(or $(SEEDS),1$(comma)2) \
	  --seconds $(or $(SECONDS_BUDGET),120) --parallel $(or $(PARALLEL),4) --set actors.num_actors=$(or $(ABLATION_ACTORS),3) \
	  $(if $(NOFULL),--no-full) --out $(ABLATION_OUT)
	$(PYTHON) bench/ablation.py $(ABLATION_OUT)

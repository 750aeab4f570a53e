# The README's two commands: `make demo` and `make test`. Both set everything up first.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test lint typecheck unit stress diagrams clean

# Python caches compiled modules (and pytest its rewritten test modules) even where the
# environment says not to (PYTHONDONTWRITEBYTECODE=1 in some images): the tests start
# hundreds of interlock processes, and each would compile every module it imports anew
# (0.53 s a CLI call instead of 0.40 s; 7 s more per pytest worker to collect).
export PYTHONDONTWRITEBYTECODE :=

# uv installs the project: the machine's pip puts uv into a venv made without pip of its
# own (ensurepip alone takes 3 s), and uv installs the rest in 3-7 s where pip took 15 s
# of CPU. A Python whose pip cannot do that (none, or older than 22.3) gets a venv with
# pip, which installs uv. Neither compiles the installed packages up front: Python
# compiles a module when it is first imported (and keeps it: see PYTHONDONTWRITEBYTECODE).
$(STAMP): pyproject.toml
	$(PY) -m venv --without-pip $(VENV)
	$(PY) -m pip --python $(BIN)/python install --quiet --disable-pip-version-check uv \
	  || { $(PY) -m venv $(VENV) && $(BIN)/pip install --quiet --disable-pip-version-check uv; }
	$(BIN)/uv pip install --python $(BIN)/python --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	bash scripts/bootstrap.sh --quiet
	$(BIN)/interlock demo

# mypy runs beside pytest, its output printed after pytest's: the run is CPU-bound, but
# mypy's few seconds fill the gaps (PostgreSQL starting, collection, the last tests).
test: $(STAMP)
	bash scripts/bootstrap.sh
	$(MAKE) --no-print-directory lint
	@mkdir -p .cache
	@echo "mypy runs beside pytest; its report follows pytest's"
	@( $(MAKE) --no-print-directory typecheck > .cache/typecheck.log 2>&1; \
	   echo $$? > .cache/typecheck.rc ) & \
	bash scripts/with_pg.sh $(MAKE) --no-print-directory unit; unit=$$?; wait; \
	cat .cache/typecheck.log; typed=$$(cat .cache/typecheck.rc); \
	[ "$$unit" = 0 ] && [ "$$typed" = 0 ]

# A throwaway PostgreSQL for running tests by hand: `make pg`, then
# INTERLOCK_TEST_PG_URL=$$(bash scripts/pg_cluster.sh url .cache/pg) .venv/bin/pytest ...
.PHONY: pg pg-stop
pg:
	bash scripts/pg_cluster.sh start .cache/pg
	@bash scripts/pg_cluster.sh url .cache/pg | sed 's/:[^:@]*@/:***@/'

pg-stop:
	bash scripts/pg_cluster.sh stop .cache/pg

lint: $(STAMP)
	$(BIN)/ruff check machines runtime tests bench scripts
	$(BIN)/lint-imports

typecheck: $(STAMP)
	bash scripts/typecheck.sh

# Two workers per core of the 2-core CI machine: much of the suite waits on real agent
# processes, polling intervals (1 s at least) and timers, and a third and fourth worker
# run while the others wait (on 2 cores: -n 2 273 s, -n 3 225 s, -n 4 180 s, same load).
# worksteal hands the queue of a busy worker to an idle one, so one long test at the end
# does not hold the run.
TEST_WORKERS ?= 4

# slow_cli: the full contract of the real CLIs that take seconds to start (gemini,
# opencode; one case of each runs here): after `make test`, in .ci/run.
# stress: the same checks as other tests at a size that takes minutes (thousands of
# signals, kill points, generated machines, floods): `make stress`, after `make test` in
# .ci/run.
unit: $(STAMP)
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not slow_cli and not stress"

# The stress tests at full size (tests/support/stress.py), PostgreSQL included: about 5
# minutes. `pytest -m stress` alone runs them at a reduced size.
stress: $(STAMP)
	bash scripts/bootstrap.sh
	INTERLOCK_STRESS=full bash scripts/with_pg.sh $(BIN)/pytest -q -m stress

diagrams: $(STAMP)
	$(BIN)/interlock diagram --all specs/ -o diagrams/
	$(BIN)/interlock schema -o specs/interlock-spec.schema.json

clean:
	rm -rf $(VENV) build dist .cache .mypy_cache .ruff_cache .pytest_cache .hypothesis interlock-demo

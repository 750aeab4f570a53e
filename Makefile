# The README's two commands: `make demo` and `make test`. Both set everything up first.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test lint typecheck unit diagrams clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	bash scripts/bootstrap.sh --quiet
	$(BIN)/interlock demo

test: $(STAMP)
	bash scripts/bootstrap.sh
	$(MAKE) --no-print-directory lint typecheck
	bash scripts/with_pg.sh $(MAKE) --no-print-directory unit

# A throwaway PostgreSQL for running tests by hand: `make pg`, then
# INTERLOCK_TEST_PG_URL=$$(bash scripts/pg_cluster.sh url .cache/pg) .venv/bin/pytest ...
.PHONY: pg pg-stop
pg:
	bash scripts/pg_cluster.sh start .cache/pg
	@bash scripts/pg_cluster.sh url .cache/pg | sed 's/:[^:@]*@/:***@/'

pg-stop:
	bash scripts/pg_cluster.sh stop .cache/pg

lint: $(STAMP)
	$(BIN)/ruff check machines runtime tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	bash scripts/typecheck.sh

unit: $(STAMP)
	$(BIN)/pytest -q -n 2

diagrams: $(STAMP)
	$(BIN)/interlock diagram --all specs/ -o diagrams/
	$(BIN)/interlock schema -o specs/interlock-spec.schema.json

clean:
	rm -rf $(VENV) build dist .cache .mypy_cache .ruff_cache .pytest_cache .hypothesis interlock-demo

# The README's two commands: `make verify` (the main job) and `make test` (the test suite).
# Both create .venv when it is missing and install the project with its `test` extra.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: verify test pytest lint typecheck format bench clean

# setup.py, checker/_wgl.c and checker/_histread.c: the compiled modules, rebuilt by the install when they change.
$(STAMP): pyproject.toml setup.py checker/_wgl.c checker/_histread.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[test]'
	# python-etcd3 for the third-party client tests: its pinned grpcio 1.27 and protobuf
	# 3.6 would replace ours, and it runs on current ones (in a process of its own).
	$(BIN)/python -m pip install --quiet --no-deps 'etcd3==0.12.0'
	touch $(STAMP)

verify: $(STAMP)
	$(BIN)/etcdspec verify

# The whole suite: lint, types, then pytest. CI runs exactly this.
test: lint typecheck pytest

# pytest exits 5 when it collected no test: that is a missing suite, so a failure.
pytest: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# mypy needs the source laid out under its import names (etcdspec.model, ...): a tree
# of symbolic links in a scratch folder gives it that without moving any folder.
typecheck: $(STAMP)
	@tree=$$(mktemp -d) && mkdir -p $$tree/etcdspec && \
	for f in etcdspec/*; do ln -s $(CURDIR)/$$f $$tree/etcdspec/; done && \
	for d in cli spec model impl checker conform; do ln -s $(CURDIR)/$$d $$tree/etcdspec/$$d; done && \
	cd $$tree && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml \
	  --cache-dir $(CURDIR)/.mypy_cache -p etcdspec; rc=$$?; rm -rf $$tree; exit $$rc

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) .build build *.egg-info .pytest_cache .mypy_cache .ruff_cache

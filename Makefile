# Set-up and common jobs. Every target installs what it needs into $(VENV) first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED := 1
# English WordNet 3.0 for --knowledge-base wordnet (Debian's wordnet-base puts it here)
WORDNET_DIR ?= $(or $(TCNLM_WORDNET_DIR),/usr/share/wordnet)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y -q wordnet-base

.PHONY: install wordnet demo test test-fast lint bench results docs docs-check clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

install: wordnet $(VENV)/.installed

## wordnet: install Debian's wordnet-base if WordNet is missing and apt-get is usable
## (apt-get update only if the first try fails); never fails, so `make demo` works without
## it, but then --knowledge-base wordnet is unavailable and its test fails, naming the fix.
wordnet:
	@test -f $(WORDNET_DIR)/data.noun || { command -v apt-get >/dev/null && { $(APT_INSTALL) || { apt-get update -q && $(APT_INSTALL); }; }; } || echo "note: WordNet not installed (apt-get install wordnet-base); --knowledge-base wordnet and its test will fail"

## demo: train the LSTM baseline on the embedded synthetic corpus and print
## unigram / LSTM / oracle test perplexity side by side.
demo: install
	$(PY) -m train.run

## test: the whole test suite (small configurations, synthetic corpus; about 12 minutes on
## 2 idle cores of an AVX-512 Xeon, 18 on an AVX2 EPYC),
## in 3 processes (pytest-xdist; each test file stays in one, the longest files first, see
## SLOWEST_FIRST in tests/conftest.py): a third keeps the 2 cores busy while a test waits on
## the subprocesses it starts.
test: install
	$(PY) -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder tests

## test-fast: the unit tests only (every test not marked slow: no tiny training runs or
## exports; under a minute on the idle machine), for the edit-test loop. CI runs `make test`.
test-fast: install
	$(PY) -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder -m "not slow" tests

## lint: ruff with the configuration in pyproject.toml (pyflakes and pycodestyle, 100
## columns); CI runs it before the tests.
lint: install
	$(PY) -m ruff check .

## bench: every section of the benchmark harness (recurrent layers, whole models, decoders,
## scaling, PyTorch peers) on this machine; `python -m benchmarks.run --help` picks sections and sizes.
bench: install
	$(PY) -m benchmarks.run

## results: write RESULTS.md and README.md's results table from the records under results/
## (python -m evaluate.report; tests/test_report.py fails while either is stale).
results: $(VENV)/.installed
	$(PY) -m evaluate.report

clean:
	rm -rf runs .cache .pytest_cache

## docs: write the command-line reference, docs/reference/<command>.md, from every
## command's own argument parser (python -m tools.reference; tests/test_docs_reference.py
## fails while a page is stale).
docs: $(VENV)/.installed
	$(PY) -m tools.reference

## docs-check: the reference is up to date, and the shell commands of README.md and
## docs/**/*.md: ```bash blocks run in a sandbox copy of the checkout, one per file, the
## python -m commands of ```bash long blocks are parsed by their own parsers
## (python -m tools.docs_check --list shows which is which; --file PATH checks one file).
docs-check: install
	@status=0; $(PY) -m tools.reference --check || status=1; \
	  $(PY) -m tools.docs_check || status=1; exit $$status

# Set-up and common jobs. Every target installs what it needs into $(VENV) first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED := 1

.PHONY: install demo test bench clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

install: $(VENV)/.installed

## demo: train the LSTM baseline on the embedded synthetic corpus and print
## unigram / LSTM / oracle test perplexity side by side.
demo: install
	$(PY) -m train.run

## test: the whole test suite (small configurations, synthetic corpus; < 15 min on 2 cores).
test: install
	$(PY) -m pytest -q tests

clean:
	rm -rf runs .cache .pytest_cache

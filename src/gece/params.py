"""params.yaml -> typed, validated settings.

Every section is a pydantic model that forbids unknown keys, so a misspelled key
(``metrics.nbins``) is an error that names the key and suggests the right one instead of
being silently ignored.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gece.errors import GeceError

DEFAULT_PARAMS = Path("params.yaml")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Section):
    """How to load one model. ``source`` is a Hugging Face hub id, a local model directory,
    a local ``.gguf`` file, or ``package:<distribution>`` for a GGUF shipped in an installed
    Python package."""

    source: str = Field(min_length=1)
    gguf_file: str | None = None
    revision: str | None = None
    special_tokens: bool = True
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = Field("auto", pattern=r"^(auto|cpu|multi|mps|cuda(:\d+)?)$",
                        description="auto (a GPU if visible, else cpu), cpu, cuda[:N], mps, or multi "
                        "(device_map='auto': spread a model too large for one device)")
    attention: Literal["exact", "sdpa", "eager"] = Field(
        "exact", description="exact: gece's float64-core attention, bit-identical whatever the batch "
        "(gece.scoring.attention); sdpa/eager: transformers' stock float32 kernels")


class PaperParams(_Section):
    """The authors' released per-pair scores (data/reference/<benchmark>/<model>.csv)."""

    benchmarks: list[str]
    models: list[str]


class PrepareParams(_Section):
    duplicates: Literal["keep", "drop", "error"] = "keep"


class ExtractParams(_Section):
    batch_size: int = Field(32, ge=1)
    word_prob: Literal["chain", "max"] = "chain"
    limit: int | None = Field(None, ge=1, description="score only the first N pairs (smoke runs)")


class MetricsParams(_Section):
    n_bins: int = Field(10, ge=1, le=1000)
    binning: Literal["equal_width", "equal_mass"] = "equal_width"
    bootstrap: int = Field(1000, ge=1000, description="bootstrap resamples for confidence intervals")
    ci: float = Field(0.95, gt=0.0, lt=1.0)
    seed: int = 0


class CompareParams(_Section):
    draws: int = Field(2000, ge=2000, description="paired bootstrap resamples")
    seed: int = 0
    ci: float = Field(0.95, gt=0.0, lt=1.0)
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance level of the markdown table")


class AblateParams(_Section):
    sizes: list[int] = Field([50, 100, 150, 250, 500], min_length=1)
    draws: int = Field(100, ge=1, description="random subsets per sample size")
    seed: int = 0
    bins: list[int] = Field([5, 10, 15, 20], min_length=1)
    neutral: list[str] = Field(["genderlex", "genderlex_person", "genderlex_someone"], min_length=2)
    special_tokens: dict[str, str] = Field(
        {"gemma-3-270m": "gemma-3-270m-nobos"}, description="model with special tokens -> the same without"
    )
    compare: CompareParams = CompareParams()

    @model_validator(mode="after")
    def _positive(self) -> AblateParams:
        if min(self.sizes) < 1 or min(self.bins) < 1:
            raise ValueError("sizes and bins must be positive")
        return self


class CalibrateParams(_Section):
    """Post-hoc calibration (SPEC §5): which methods, the split and the cross-fitting."""

    methods: list[Literal["beta", "isotonic", "temperature", "platt", "histogram"]] = Field(
        default_factory=lambda: ["beta", "isotonic", "temperature", "platt", "histogram"], min_length=1
    )
    fraction: float = Field(0.5, gt=0.0, lt=1.0, description="share of pairs for fitting (split protocol)")
    folds: int = Field(5, ge=2, description="k of the k-fold cross-fitting")
    seed: int = Field(0, description="seed of the stratified split and of the fold assignment")
    histogram_bins: int = Field(10, ge=1, description="equal-mass bins of histogram binning")

    @model_validator(mode="after")
    def _unique_methods(self) -> CalibrateParams:
        if len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods {self.methods} lists a method twice")
        return self


class Params(_Section):
    benchmarks: list[str] = Field(min_length=1)
    models: list[str]
    registry: dict[str, ModelSpec]
    paper: PaperParams
    prepare: PrepareParams = PrepareParams()
    extract: ExtractParams = ExtractParams()
    metrics: MetricsParams = MetricsParams()
    ablate: AblateParams = AblateParams()
    calibrate: CalibrateParams = CalibrateParams()

    @model_validator(mode="after")
    def _models_registered(self) -> Params:
        unknown = [m for m in self.models if m not in self.registry]
        if unknown:
            raise ValueError(f"models {unknown} have no entry under registry")
        pairs = [m for kv in self.ablate.special_tokens.items() for m in kv if m not in self.models]
        if pairs:
            raise ValueError(f"ablate.special_tokens names {pairs}, which are not in models")
        return self

    def runs(self, benchmark: str) -> list[str]:
        """Model ids with scores on ``benchmark``: the scored models, then the paper runs."""
        paper = [f"paper-{m}" for m in self.paper.models] if benchmark in self.paper.benchmarks else []
        return list(self.models) + paper


def _suggest(loc: tuple, raw: dict) -> str:
    """'did you mean' for an unknown key, from the keys the model allows at that place."""
    model: Any = Params
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) and hasattr(model, "model_fields") else None
        if field is None:
            return ""
        ann = field.annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if model is None:
            return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f" (did you mean '{close[0]}'?)" if close else f" (allowed: {', '.join(model.model_fields)})"


def load_params(path: str | Path = DEFAULT_PARAMS) -> Params:
    """Load and validate params.yaml; raise a GeceError listing every bad key."""
    path = Path(path)
    if not path.exists():
        raise GeceError(f"{path}: parameters file not found", hint="run from the repository root")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise GeceError(f"{path}: not valid YAML ({e})") from e
    if not isinstance(raw, dict):
        raise GeceError(f"{path}: expected a mapping of sections at the top level")
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = tuple(err["loc"])
            key = ".".join(map(str, loc)) or "(top level)"
            if err["type"] == "extra_forbidden":
                problems.append(f"{key}: unknown key{_suggest(loc, raw)}")
            elif err["type"] == "missing":
                problems.append(f"{key}: required key is missing")
            else:
                problems.append(f"{key}: {err['msg']} (got {err.get('input')!r})")
        raise GeceError(
            f"{path}: invalid parameters", problems=problems, hint="see the Parameters section of README.md"
        ) from e

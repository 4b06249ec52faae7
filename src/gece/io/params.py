"""params.yaml -> typed, validated settings.

Every section is a pydantic model that forbids unknown keys, so a misspelled key
(``metrics.nbins``) is an error that names the key and suggests the right one instead of
being silently ignored.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    PlainValidator,
    Tag,
    ValidationError,
    model_validator,
)

from gece.calibration_methods import METHOD_NAMES, MethodName
from gece.errors import GeceError
from gece.groupings import GROUP_PROTOCOLS, GROUPINGS, GroupingName, GroupProtocol
from gece.io.harness_entry import HarnessSpec, entry_kind, is_harness
from gece.io.model_entry import LMEVAL_PREFIX, Id, ModelSpec, Section
from gece.rule_registry import DEFAULT_RULE, RULE_NAMES, SUMMARY, RuleName

DEFAULT_PARAMS = Path("params.yaml")


MAX_SEED = 2**32 - 1  # numpy and scikit-learn seeds are unsigned 32-bit
Seed = Annotated[int, Field(ge=0, le=MAX_SEED, description="a random seed, 0 to 2**32 - 1")]


def _batch_size(value: object) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value  # type: ignore[return-value]
    raise ValueError("must be a positive number of pairs or auto")


class PrepareParams(Section):
    duplicates: Literal["keep", "drop", "error"] = "keep"


Cluster = Literal["pair", "template"]


class ExtractParams(Section):
    batch_size: Annotated[int | str, PlainValidator(_batch_size)] = Field(
        32,
        description="pairs per forward pass, or auto: on a GPU, as many as fit in free memory (measured on a "
        "probe batch); on the CPU, 32. On a GPU out-of-memory the batch is halved and retried",
    )
    word_prob: Literal["chain", "max"] = Field(
        "chain",
        description="word probability over sub-tokens: chain (their product) or max (the authors' rule). "
        "Applied by the score stage to the token scores extract stored: changing it runs no model. Benchmarks scored "
        "by the sentence rule sum every token of the sentence (chain) whatever it says",
    )
    rule: RuleName = Field(  # type: ignore[valid-type]
        DEFAULT_RULE,
        description=f"what a side's score is, for every benchmark whose entry sets no rule (gece.rule_registry): "
        f"{SUMMARY}",
    )
    limit: int | None = Field(None, ge=1, description="score only the first N pairs (smoke runs)")


class MetricsParams(Section):
    n_bins: int = Field(10, ge=1, le=1000)
    binning: Literal["equal_width", "equal_mass"] = "equal_width"
    bootstrap: int = Field(1000, ge=1000, le=1_000_000, description="bootstrap resamples for confidence intervals")
    ci: float = Field(0.95, gt=0.0, lt=1.0)
    seed: Seed = 0


class CompareParams(Section):
    draws: int = Field(2000, ge=2000, le=1_000_000, description="paired bootstrap resamples")
    seed: Seed = 0
    ci: float = Field(0.95, gt=0.0, lt=1.0)
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance level of the markdown table")
    power: float = Field(0.8, gt=0.0, lt=1.0, description="power of the minimum detectable difference")


class AblateParams(Section):
    sizes: list[int] = Field([50, 100, 150, 250, 500], min_length=1)
    draws: int = Field(100, ge=1, le=100_000, description="random subsets per sample size")
    seed: Seed = 0
    bins: list[Annotated[int, Field(le=1000)]] = Field([5, 10, 15, 20], min_length=1)
    special_tokens: dict[Id, Id] = Field(
        {"gemma-3-270m": "gemma-3-270m-nobos"}, description="model with special tokens -> the same without"
    )
    compare: CompareParams = CompareParams()

    @model_validator(mode="after")
    def _positive(self) -> AblateParams:
        if min(self.sizes) < 1 or min(self.bins) < 1:
            raise ValueError("sizes and bins must be positive")
        return self


class GroupsParams(Section):
    """Calibration by group (docs/metrics.md, gece.stats.by_group): what to group by, the protocols, the smallest
    group."""

    by: list[GroupingName] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["bias_type", "pred_gender", "true_gender"],
        min_length=1,
        description=f"attributes to group the pairs by, each one of {', '.join(GROUPINGS)}; the stage's markdown "
        "table shows the first that splits the benchmark into two or more groups",
    )
    protocols: list[GroupProtocol] = Field(
        default_factory=lambda: list(GROUP_PROTOCOLS),
        min_length=1,
        description="identity (the paper's: y), soft (annotators' soft labels)",
    )
    min_size: int = Field(20, ge=1, description="groups with fewer pairs get no ECE and are left out of the gap")

    @model_validator(mode="after")
    def _unique(self) -> GroupsParams:
        for key, values in (("by", self.by), ("protocols", self.protocols)):
            if len(set(values)) != len(values):
                raise ValueError(f"{key} {values} lists a value twice")
        return self


class CalibrateParams(Section):
    """Post-hoc calibration (docs/metrics.md): which methods, the split and the cross-fitting."""

    methods: list[MethodName] = Field(default_factory=lambda: list(METHOD_NAMES), min_length=1)
    fraction: float = Field(0.5, gt=0.0, lt=1.0, description="share of pairs for fitting (split protocol)")
    folds: int = Field(5, ge=2, le=1000, description="k of the k-fold cross-fitting")
    seed: Seed = Field(0, description="seed of the stratified split and of the fold assignment")
    histogram_bins: int = Field(10, ge=1, le=1000, description="equal-mass bins of histogram binning")
    headline: MethodName = Field(  # type: ignore[valid-type]
        "platt",
        description="the method the page's post-hoc headline reports, fixed in advance: choosing the best of the "
        "methods on the pairs it is then evaluated on would flatter it",
    )

    @model_validator(mode="after")
    def _unique_methods(self) -> CalibrateParams:
        if len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods {self.methods} lists a method twice")
        if self.headline not in self.methods:
            raise ValueError(f"headline {self.headline} is not one of the methods {self.methods}")
        return self


class AnnotateParams(Section):
    """How the annotators' labels become a hard label (gece.stats.annotations): a strict majority of the
    annotators decides; a tie goes to the writer's label (writer) or leaves the pair unlabelled (drop)."""

    rule: Literal["majority"] = "majority"
    tie: Literal["writer", "drop"] = "writer"


def _source(value: object) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value  # type: ignore[return-value]
    raise ValueError(
        "must be the path of a CrowS-Pairs-format CSV, e.g. data/crows_pairs/crows_pairs_anonymized.csv, or of "
        "SynthBias with synthbias: type1|type2 (or no source: data/benchmarks/<name>.csv)"
    )


class BenchmarkSpec(Section):
    """One benchmark (``benchmarks.<name>``): where its pairs come from, the rule that scores them and its part
    in the gender-neutral wording comparison. Every field has a default, so ``<name>: {}`` is a gece CSV,
    ``data/benchmarks/<name>.csv``, scored under ``extract.rule``."""

    source: Annotated[str | None, PlainValidator(_source)] = Field(
        None,
        description="a CrowS-Pairs-format CSV the benchmark is read from (gece.io.crows: identity protocol, "
        "annotations included), or SynthBias's CSV with synthbias; none: data/benchmarks/<name>.csv, gece's own "
        "format",
    )
    rule: RuleName | None = Field(  # type: ignore[valid-type]
        None,
        description=f"{' | '.join(RULE_NAMES)}: the rule that scores this benchmark, in place of "
        "extract.rule. Two entries with the same source and different rules are one benchmark under two rules "
        "(the page and reports/summary.json show them side by side)",
    )
    cluster: Cluster = Field(
        "pair",
        description='the unit the intervals and permutation tests resample (docs/metrics.md "Repeated pairs"): '
        "pair, the rows with the same two sentences; template, the rows whose sentence_more is the same once "
        "its differing words are masked (several identity terms in one sentence frame)",
    )
    neutral_of: Id | None = Field(
        None,
        description="this benchmark is a gender-neutral rewrite of that one (the same pairs with the occupation "
        "word replaced): the neutral stage compares that benchmark with its rewrites, per model",
    )
    synthbias: Literal["type1", "type2"] | None = Field(
        None,
        description="source is a SynthBias file (gece.io.synthbias): this type's he/she pronoun pairs, p the "
        "preference for the male pronoun; type2: y = 1 when the referent's occupation is male-majority; type1: y = 1",
    )
    subset: int | None = Field(
        None,
        ge=4,
        description="with synthbias: score this many pairs, a fixed stratified subset (gece.io.synthbias); "
        "none: every pair",
    )

    @property
    def imported(self) -> bool:
        """Whether the benchmark is read from a CrowS-Pairs-format file (``source`` without ``synthbias``)."""
        return self.source is not None and self.synthbias is None

    @property
    def sentences_shown(self) -> bool:
        """Whether the report may print the benchmark's sentences: not SynthBias's, whose licence (CC BY-NC-ND 4.0)
        allows no derived files outside the data (its examples list pair ids and target words only)."""
        return self.synthbias is None

    @model_validator(mode="after")
    def _synthbias_needs_source(self) -> BenchmarkSpec:
        if self.synthbias is not None and self.source is None:
            raise ValueError("synthbias needs source: the SynthBias file, data/synthbias/synthbias_data.csv")
        if self.subset is not None and self.synthbias is None:
            raise ValueError("subset is a SynthBias setting: give synthbias (type1 or type2), or no subset")
        return self


BENCHMARKS_HINT = (
    "benchmarks is a mapping, one entry per benchmark: its name, then its settings ({} for the defaults), "
    "e.g. benchmarks: {winobias: {}, crows_pairs: {source: data/crows_pairs/crows_pairs_anonymized.csv, "
    "rule: sentence}} (README.md, Parameters)"
)


def _entries(value: object) -> object:
    """``benchmarks`` as written: a mapping whose empty entries (``winobias:``) are entries with the defaults.
    A list of names is the layout before the entries: refused with the new layout."""
    if isinstance(value, list):
        raise ValueError(f"a list of names is no longer accepted: {BENCHMARKS_HINT}")
    if isinstance(value, dict):
        return {k: {} if v is None else v for k, v in value.items()}
    return value


# a registry entry: scored by gece's engine (ModelSpec) or by lm-evaluation-harness (engine: lm-eval, HarnessSpec)
Entry = Annotated[
    Annotated[ModelSpec, Tag("ModelSpec")] | Annotated[HarnessSpec, Tag("HarnessSpec")], Discriminator(entry_kind)
]
ENTRY_TAGS = ("ModelSpec", "HarnessSpec")  # not a key of params.yaml: left out of the keys errors name


class Params(Section):
    benchmarks: Annotated[dict[Id, BenchmarkSpec], BeforeValidator(_entries)] = Field(
        min_length=1, description="one entry per benchmark: name -> source, rule, neutral_of"
    )
    models: list[Id]
    references: list[Id] = []  # noqa: RUF012 (pydantic copies the default; ruff cannot see the base is pydantic)
    lmeval_runs: list[Id] = []  # noqa: RUF012 (the registry entries with engine: lm-eval that the lmeval stage runs)
    registry: dict[Id, Entry]
    prepare: PrepareParams = PrepareParams()
    extract: ExtractParams = ExtractParams()
    metrics: MetricsParams = MetricsParams()
    groups: GroupsParams = GroupsParams()
    ablate: AblateParams = AblateParams()
    calibrate: CalibrateParams = CalibrateParams()
    annotate: AnnotateParams = AnnotateParams()

    def rule_for(self, benchmark: str) -> RuleName:  # type: ignore[valid-type]
        """The rule that scores ``benchmark``: its entry's ``rule``, else ``extract.rule``."""
        entry = self.benchmarks.get(benchmark)
        return entry.rule if entry is not None and entry.rule is not None else self.extract.rule

    @property
    def rules(self) -> dict[str, RuleName]:  # type: ignore[valid-type]
        """Every benchmark's rule (:meth:`rule_for`), in ``benchmarks`` order."""
        return {b: self.rule_for(b) for b in self.benchmarks}

    @property
    def neutral_benchmarks(self) -> list[str]:
        """The benchmarks the neutral stage compares: the one the rewrites name (``neutral_of``), then the
        rewrites in ``benchmarks`` order; empty when no entry has ``neutral_of``."""
        rewrites = [b for b, e in self.benchmarks.items() if e.neutral_of is not None]
        return [self.benchmarks[rewrites[0]].neutral_of, *rewrites] if rewrites else []  # type: ignore[list-item]

    @model_validator(mode="after")
    def _models_registered(self) -> Params:
        for key, names in (("models", self.models), ("references", self.references)):
            unknown = [m for m in names if m not in self.registry]
            if unknown:
                raise ValueError(f"{key} {unknown} have no entry under registry; add one (source: ...) or remove them")
        both = [m for m in self.models if m in self.references]
        if both:
            raise ValueError(
                f"{both} are in models and in references; a run is scored (models) or read (references), not both"
            )
        wrong = [m for m in self.models if self.registry[m].reference is not None]
        if wrong:
            raise ValueError(
                f"models {wrong} have a reference: source, which is read, not scored: list them under references"
            )
        wrong = [m for m in [*self.models, *self.references] if self.registry[m].source.startswith(LMEVAL_PREFIX)]
        if wrong:
            raise ValueError(
                f"{wrong} have an {LMEVAL_PREFIX} source, imported by gece lmeval-import, neither scored nor read: "
                "remove them from models and references (a registry entry alone is a run, docs/lmeval.md)"
            )
        wrong = [m for m in self.references if self.registry[m].reference is None]
        if wrong:
            raise ValueError(f"references {wrong} have no reference:<name> source: a model to score goes under models")
        self._lmeval_runs()
        run_ids = {*self.models, *self.references, *self.lmeval_runs} | {
            m for m, spec in self.registry.items() if spec.source.startswith(LMEVAL_PREFIX)
        }
        for m, spec in self.registry.items():
            if spec.checked_against == m:
                raise ValueError(f"registry.{m}.checked_against names {m} itself; name the run to compare it with")
            if spec.checked_against is not None and spec.checked_against not in run_ids:
                raise ValueError(
                    f"registry.{m}.checked_against names {spec.checked_against!r}, which is not a run (models, "
                    "references, lmeval_runs or an lmeval: source); name one, or remove checked_against"
                )
        pairs = [m for kv in self.ablate.special_tokens.items() for m in kv if m not in self.models]
        if pairs:
            raise ValueError(
                f"ablate.special_tokens names {pairs}, which are not in models; add them to models "
                "(and registry) or fix the names"
            )
        return self

    def _lmeval_runs(self) -> None:
        wrong = [m for m in [*self.models, *self.references] if is_harness(self.registry[m])]
        if wrong:
            raise ValueError(
                f"{wrong} have engine: lm-eval: lm-eval scores them, so they go under lmeval_runs, not under "
                "models or references (docs/lmeval.md)"
            )
        unknown = [m for m in self.lmeval_runs if m not in self.registry]
        if unknown:
            raise ValueError(f"lmeval_runs {unknown} have no entry under registry; add one or remove them")
        wrong = [m for m in self.lmeval_runs if not is_harness(self.registry[m])]
        if wrong:
            raise ValueError(
                f"lmeval_runs {wrong} have no engine: lm-eval; an entry of lmeval_runs sets engine: lm-eval and "
                "its harness: block (docs/lmeval.md); gece's own runs go under models"
            )
        if len(set(self.lmeval_runs)) != len(self.lmeval_runs):
            raise ValueError(f"lmeval_runs {self.lmeval_runs} names an entry twice")

    @model_validator(mode="after")
    def _benchmark_entries(self) -> Params:
        for b, entry in self.benchmarks.items():
            default = PurePosixPath("data", "benchmarks", f"{b}.csv")
            if entry.source is not None and PurePosixPath(entry.source.replace("\\", "/")) == default:
                raise ValueError(
                    f"benchmarks.{b}.source is {entry.source}, the gece CSV a benchmark without source is read "
                    f"from; source names a CrowS-Pairs-format file instead: remove benchmarks.{b}.source"
                )
            base = entry.neutral_of
            if base is None:
                continue
            key = f"benchmarks.{b}.neutral_of"
            if base == b:
                raise ValueError(
                    f"{key} names {b!r} itself; name the benchmark whose occupation wording {b} rewrites "
                    "(e.g. neutral_of: genderlex), or remove neutral_of"
                )
            if base not in self.benchmarks:
                close = difflib.get_close_matches(base, list(self.benchmarks), n=1)
                known = f"did you mean {close[0]!r}?" if close else f"benchmarks: {', '.join(self.benchmarks)}"
                raise ValueError(
                    f"{key} names {base!r}, which has no entry under benchmarks; add an entry for {base!r} "
                    f"or fix the name ({known})"
                )
            if self.benchmarks[base].neutral_of is not None:
                raise ValueError(
                    f"{key} names {base!r}, itself a rewrite (benchmarks.{base}.neutral_of: "
                    f"{self.benchmarks[base].neutral_of}); name the benchmark with the occupation wording"
                )
        bases = list(dict.fromkeys(e.neutral_of for e in self.benchmarks.values() if e.neutral_of is not None))
        if len(bases) > 1:
            named = ", ".join(
                f"benchmarks.{b}.neutral_of: {e.neutral_of}" for b, e in self.benchmarks.items() if e.neutral_of
            )
            raise ValueError(
                f"the rewrites name {len(bases)} benchmarks ({named}); the neutral stage compares one benchmark "
                "with its rewrites: give every rewrite the same neutral_of"
            )
        return self


# keys of the layout before one entry per benchmark (issue 39): where each one went
MOVED = {
    "imports": "moved into the benchmark entries: benchmarks.<b>.source: <CrowS-Pairs-format file>",
    "extract.rules": "moved into the benchmark entries: benchmarks.<b>.rule: target | sentence",
    "ablate.neutral": "moved into the benchmark entries: benchmarks.<rewrite>.neutral_of: <benchmark it rewrites>",
}


def _suggest(loc: tuple, raw: dict) -> str:
    """'did you mean' for an unknown key, from the keys the model allows at that place (inside a mapping of
    entries, ``benchmarks.<b>`` or ``registry.<m>``, those of an entry)."""
    model: Any = Params
    tag = next((p for p in loc if p in ENTRY_TAGS), "ModelSpec")  # a registry entry's schema
    parts = iter([p for p in loc[:-1] if p not in ENTRY_TAGS])
    for part in parts:
        field = model.model_fields.get(part) if isinstance(part, str) and hasattr(model, "model_fields") else None
        if field is None:
            return ""
        ann = field.annotation
        if get_origin(ann) is dict:  # {name: entry}: the next part is the entry's name
            ann = get_args(ann)[1]
            if next(parts, None) is None:
                return ""
        if ann is Entry:
            ann = HarnessSpec if tag == "HarnessSpec" else ModelSpec
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if model is None:
            return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f" (did you mean '{close[0]}'?)" if close else f" (allowed: {', '.join(model.model_fields)})"


def _key(loc: tuple) -> str:
    """A params key as written in params.yaml: ``metrics.n_bins``, ``models[3]``, ``registry key 'X'``."""
    if loc and loc[-1] == "[key]":
        return f"{_key(loc[:-2])} key {loc[-2]!r}" if len(loc) > 2 else f"key {loc[-2]!r}"
    out = ""
    for part in (p for p in loc if p not in ENTRY_TAGS):
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class _RepeatedKey(Exception):
    def __init__(self, key: object, line: int, first: int):
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key written twice in one mapping is an error (PyYAML keeps
    the last value silently), and that a number in exponent notation without a dot (``1e-4``, ``2E3``) is a
    number, as YAML 1.2 and DVC read it (PyYAML follows YAML 1.1, which reads it as the text ``'1e-4'``)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.setdefault(key, line)
            except TypeError:  # an unhashable key: the safe loader reports it
                continue
            if first != line and key != "<<":
                raise _RepeatedKey(key, line, first)
        return super().construct_mapping(node, deep)


# YAML 1.2's exponent forms that YAML 1.1 reads as text (1e-4, 1.5e3: no dot, or no exponent sign); those 1.1
# reads as numbers already (1.5e+3) never reach this resolver
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_yaml(path: str | Path, hint: str) -> Any:
    """A small YAML file (params.yaml, a .dvc file) read strictly: a regular file within the size limit,
    UTF-8, valid YAML, no key written twice. Every failure is a GeceError naming the file and line."""
    from gece.io.inputs import read_text

    text = read_text(path, hint, "params_bytes")
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _RepeatedKey as e:
        raise GeceError(
            f"{path}: line {e.line}: key {e.key!r} is written twice (first on line {e.first}); "
            "YAML would silently keep only the second",
            hint=f"merge the two {e.key!r} entries into one",
        ) from None
    except yaml.YAMLError as e:
        raise GeceError(
            f"{path}: not valid YAML ({e})",
            hint="fix the line shown (indentation, a ':' after each key, quotes around values with ': ' or '#')",
        ) from None
    except RecursionError:
        raise GeceError(f"{path}: not valid YAML (nested too deeply)", hint=hint) from None


def type_note(err: dict) -> str:
    """Why a value of the wrong type is refused, for a pydantic error of a strict section: ``true`` is no
    count, a quoted number is text."""
    got, kind = err.get("input"), err.get("type", "")
    if kind not in ("int_type", "float_type", "bool_type", "string_type"):
        return ""
    if isinstance(got, bool):
        return ": true and false are booleans, not numbers"
    if isinstance(got, float) and kind == "int_type":
        return ": a whole number is written without a decimal point"
    if isinstance(got, str):
        return ": a quoted value is text; write the value without quotes"
    if kind == "string_type":
        return ": quote it to make it text"
    return ""


PARAMS_HINT = (
    "params.yaml holds sections such as benchmarks:, models:, registry:, metrics: at the top level; "
    "see the Parameters section of README.md"
)


def load_params(path: str | Path = DEFAULT_PARAMS) -> Params:
    """Load and validate params.yaml; raise a GeceError listing every bad key."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise GeceError(
            f"{path}: parameters file not found", hint="run from the repository root, or pass --params PATH"
        )
    raw = load_yaml(path, hint="--params names the parameters file (params.yaml at the repository root)")
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        kind = "list" if isinstance(raw, list) else f"single value ({raw!r})"
        raise GeceError(f"{path}: the top level is a {kind}, not a mapping of sections", hint=PARAMS_HINT)
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = tuple(err["loc"])
            key = _key(loc)
            if err["type"] == "extra_forbidden" and key in MOVED:
                problems.append(f"{key}: {MOVED[key]} (README.md, Parameters)")
            elif err["type"] == "extra_forbidden":
                problems.append(f"{key}: unknown key{_suggest(loc, raw)}")
            elif err["type"] == "missing":
                problems.append(f"{key}: required key is missing")
            else:
                msg = err["msg"].removeprefix("Value error, ")
                got = err.get("input")
                shown = "" if isinstance(got, dict | list) or repr(got) in msg else f" (got {got!r})"
                problems.append(f"{msg}{shown}{type_note(err)}" if not loc else f"{key}: {msg}{shown}{type_note(err)}")
        raise GeceError(
            f"{path}: invalid parameters", problems=problems, hint="see the Parameters section of README.md"
        ) from e

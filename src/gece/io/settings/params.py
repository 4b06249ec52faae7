"""params.yaml -> typed, validated settings: the whole file (:class:`Params`), its loader for a stage
(:func:`require_params`), and the sections that need the tables of groupings and calibration methods (gece.catalog).

The other sections are in :mod:`gece.io.settings.sections` (and a model's entry in
:mod:`gece.io.settings.model_entry`); the
strict YAML loader and the error messages in :mod:`gece.io.settings.params_file`.
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import BeforeValidator, Discriminator, Field, Tag, model_validator

from gece.base.errors import GeceError
from gece.catalog.calibration_methods import METHOD_NAMES, MethodName
from gece.catalog.groupings import GROUP_PROTOCOLS, GROUPINGS, GroupingName, GroupProtocol
from gece.catalog.scoring_rules import RuleName
from gece.io.schemas.schema_base import Section, Seed
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.harness_entry import HarnessSpec, check_prompt, entry_kind, is_harness
from gece.io.settings.ids import Id
from gece.io.settings.model_entry import LMEVAL_PREFIX, ModelSpec
from gece.io.settings.params_file import DEFAULT_PARAMS, load_sections
from gece.io.settings.prompts import BASELINE, DEFAULT_PROMPTS, PromptName, PromptSpec, check_prompts
from gece.io.settings.sections import (
    BENCHMARKS_HINT,
    AblateParams,
    AnnotateParams,
    BenchmarkSpec,
    MetricsParams,
    PrepareParams,
)


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
    prompts: dict[PromptName, PromptSpec] = Field(
        default_factory=lambda: dict(DEFAULT_PROMPTS), description="prompt variants: name -> template, chat, system"
    )

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
        self._prompt_ablation()
        for m, spec in self.registry.items():
            if is_harness(spec):
                check_prompt(m, spec, self.prompts)
        pairs = [m for kv in self.ablate.special_tokens.items() for m in kv if m not in self.models]
        if pairs:
            raise ValueError(
                f"ablate.special_tokens names {pairs}, which are not in models; add them to models "
                "(and registry) or fix the names"
            )
        return self

    def _prompt_ablation(self) -> None:
        check_prompts(self.prompts)
        for m, names in self.ablate.prompts.items():
            if m not in self.models:
                raise ValueError(
                    f"ablate.prompts names {m!r}, which is not in models: the prompts are compared with its own run; "
                    "add it to models or remove it from ablate.prompts"
                )
            unknown = [n for n in names if n not in self.prompts]
            if unknown or BASELINE in names or len(set(names)) != len(names) or not names:
                raise ValueError(
                    f"ablate.prompts.{m} is {names}: name each prompt of prompts once ({', '.join(self.prompts)}), "
                    f"not {BASELINE} (its own run, the baseline)"
                    + (f"; {unknown} are not under prompts" if unknown else "")
                )

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


def load_params(path: str | Path = DEFAULT_PARAMS) -> Params:
    """Load and validate the whole of params.yaml; raise a GeceError listing every bad key."""
    return load_sections(path, Params)


def require_params(args: argparse.Namespace) -> Params:
    """params.yaml (or --params): a GeceError when it is missing or invalid."""
    return load_params(args.params)


def params_or_defaults(args: argparse.Namespace) -> Params | None:
    """params.yaml when it exists (or --params was given), else None: the built-in defaults apply."""
    path = Path(args.params)
    if path.exists() or args.params != "params.yaml":
        return load_params(path)
    return None


def params_if_valid(args: argparse.Namespace) -> Params | None:
    """params.yaml (or --params) when it loads, else None: for a command's ``reads(args)``, which derives the
    paths it reads before ``run`` (an invalid file is reported by ``run``, with its usual message)."""
    try:
        return require_params(args)
    except GeceError:
        return None

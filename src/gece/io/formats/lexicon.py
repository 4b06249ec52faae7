"""Gendered words and the groups they map to.

A side of a pair belongs to the group of its target word(s): ``male`` for he/him/his/himself,
``female`` for she/her/hers/herself (case-insensitive). Any other word keeps its own lowercased
form as the group, so identity-term benchmarks (e.g. "man"/"woman", "christian"/"muslim")
group by the word itself.
"""

from __future__ import annotations

from gece.catalog.metric_defs import FEMALE, MALE

PRONOUNS: dict[str, str] = {
    "he": MALE,
    "him": MALE,
    "his": MALE,
    "himself": MALE,
    "she": FEMALE,
    "her": FEMALE,
    "hers": FEMALE,
    "herself": FEMALE,
}


def word_group(word: str) -> str:
    """The group of one word: its pronoun gender, else the lowercased word."""
    w = word.lower()
    return PRONOUNS.get(w, w)


def side_group(words: list[str]) -> str:
    """The group of a side with target ``words``: their common group, else the groups joined by '+'."""
    groups = list(dict.fromkeys(word_group(w) for w in words))
    return groups[0] if len(groups) == 1 else "+".join(groups)

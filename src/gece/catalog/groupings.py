"""What the groups stage may group the pairs by, and its protocols (params.yaml's ``groups``).

Kept apart from the metric table (:mod:`gece.catalog.metric_defs`) so that the settings
(:mod:`gece.io.settings.params`),
which every stage imports, import no metric.
"""

from __future__ import annotations

from typing import Literal

# what the groups stage (params.yaml groups.by) may group the pairs by: the predicted or the human-preferred
# gender (gece.stats.metrics.predicted_groups / true_groups), or a column of the prepared pairs (pair_rows.PreparedPair)
# that holds one plain value per pair
DERIVED_GROUPINGS = ("pred_gender", "true_gender")
GROUPING_COLUMNS = ("bias_type", "position", "first_diff", "n_targets", "y", "gender_more", "gender_less")
# the columns only SynthBias's prepared files have (pair_rows.SynthPronounPair, SynthPair): where the referent is
# named (both protocols), the pronoun's gender and pro/anti (the referent protocol, one sentence a row); a grouping
# whose column a benchmark lacks is left out of its report
SYNTH_COLUMNS = ("referent", "pronoun_gender", "stereotype")
GROUPINGS = DERIVED_GROUPINGS + GROUPING_COLUMNS + SYNTH_COLUMNS
# the groupings that are a function of the label y (true_gender: the gender of the side y points to): a calibration
# test inside their groups conditions on the outcome it tests, so the groups stage gives them none (stereotype: pro
# when y = 1)
OUTCOME_GROUPINGS = ("true_gender", "y", "stereotype")
GroupingName = Literal[GROUPINGS]  # type: ignore[valid-type]
# the two protocols of the groups stage (gece.stats.by_group): the paper's identity protocol and the annotators'
# soft labels
GROUP_PROTOCOLS = ("identity", "soft")
GroupProtocol = Literal["identity", "soft"]

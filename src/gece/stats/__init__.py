"""The numeric core: metrics, intervals, resampling, estimators, gaps, groups, ablations, calibration and
annotator agreement, as pure numpy functions of arrays. Nothing here reads or writes a file, parses an
option or imports another gece package (only :mod:`gece.catalog.metric_defs` and :mod:`gece.base.errors`): the stages in
:mod:`gece.pipeline` read the inputs through :mod:`gece.io` and call these functions.
"""

"""The file boundary: where every file lives (:mod:`gece.io.layout`), the parameters
(:mod:`gece.io.params`), the schema of every file (one module per stage family on
:mod:`gece.io.schema_base`: :mod:`gece.io.pair_rows`, :mod:`gece.io.metric_reports`, ...), reading and
writing them (:mod:`gece.io.readers`), the checks every path and input size passes (:mod:`gece.io.inputs`),
and the readers of benchmark files (:mod:`gece.io.benchmarks`, :mod:`gece.io.crows`). The only code that
touches a file on disk.
"""

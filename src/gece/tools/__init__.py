"""The ``gece`` commands that are no DVC stage: a first try of a model, importing and validating
benchmarks, pulling the data, ``make repro``'s account, and reading experiments and revisions.
"""

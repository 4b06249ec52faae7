"""gece: calibration of language-model confidence against human judgements of gender bias."""

__version__ = "0.1.0"

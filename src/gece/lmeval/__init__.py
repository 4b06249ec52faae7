"""lm-evaluation-harness as a scoring backend: gece rules as lm-eval tasks, lm-eval samples as runs."""

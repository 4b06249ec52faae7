"""Benchmark formats: gece's benchmark CSVs, gendered words, CrowS-Pairs-format files, SynthBias."""

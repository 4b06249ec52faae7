"""Declarations, each name written once: metrics, scoring rules, calibration methods, what groups group by."""

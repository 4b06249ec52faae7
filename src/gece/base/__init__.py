"""The base layer: GeceError, the crash tests' kill points, progress bars, terminal text and its table printer."""

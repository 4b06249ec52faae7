"""The pipeline: one module per DVC stage (``gece <stage>``), each reading typed inputs, calling
the pure functions of ``gece`` and writing typed outputs; ``runs`` loads a run whatever its source."""

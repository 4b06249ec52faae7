"""Files read and written safely: Parquet and JSON readers and writers, input limits, atomic writes."""

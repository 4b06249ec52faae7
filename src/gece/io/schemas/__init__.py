"""The pydantic contract of every file gece reads or writes, one module per stage family."""

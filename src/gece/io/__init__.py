"""The file boundary, by role: paths, settings (params.yaml), schemas, files (readers, writers), formats."""

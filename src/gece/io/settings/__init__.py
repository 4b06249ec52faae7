"""params.yaml as typed, validated settings: the strict loader, the sections, registry entries, the id format."""

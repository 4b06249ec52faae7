"""Code fingerprints: import closures, canonical syntax trees (the same on every Python), command manifests."""

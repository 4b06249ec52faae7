"""The command layer: what every command shares, options checked as parsed, the tables of stages that read runs."""

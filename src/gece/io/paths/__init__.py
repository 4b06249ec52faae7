"""Where every file lives: the roots and artifacts (layout), the data snapshot, the reports."""

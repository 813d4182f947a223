"""The HTML export: one self-contained page of a captured run."""

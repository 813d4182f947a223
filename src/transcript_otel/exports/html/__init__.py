"""The HTML export: one self-contained page of a captured run.

What users call is named here; the modules below hold how.
"""

from transcript_otel.exports.html.page import write_html

__all__ = ["write_html"]

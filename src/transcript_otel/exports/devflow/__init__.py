"""Devflow (ADR-011) transcripts: a captured run written as turns, and read back.

What users call is named here; the modules below hold how.
"""

from transcript_otel.exports.devflow.reader import read_devflow
from transcript_otel.exports.devflow.writer import write_devflow

__all__ = ["read_devflow", "write_devflow"]

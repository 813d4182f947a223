"""Devflow (ADR-011) transcripts: a captured run written as turns, and read back."""

"""Replay: a captured run sent again over OTLP, with its original trace and span ids.

What users call is named here; the modules below hold how.
"""

from transcript_otel.exports.replay.run import ReplayError, ReplayResult, replay

__all__ = ["ReplayError", "ReplayResult", "replay"]

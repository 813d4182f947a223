"""Replay: a captured run sent again over OTLP, with its original trace and span ids."""

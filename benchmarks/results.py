"""The result rows every section produces, and how `run.py` prints them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from entries import SIZES
from harness import Stat, fmt_bytes, fmt_ns, fmt_rate, fmt_ratio

UNITS = ("ns", "rate", "bytes", "ratio", "count")


@dataclass
class Row:
    """One table row: a figure per entry size (median over runs, smallest run in brackets)."""

    section: str
    name: str
    unit: str
    cells: dict[str, Stat] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "name": self.name,
            "unit": self.unit,
            "cells": {key: stat.to_json() for key, stat in self.cells.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        cells = {
            key: Stat([float(v) for v in cell["values"]], dict(cell.get("notes", {})))
            for key, cell in data["cells"].items()
        }
        return cls(str(data["section"]), str(data["name"]), str(data["unit"]), cells)


def format_value(unit: str, value: float) -> str:
    if unit == "ns":
        return fmt_ns(value)
    if unit == "rate":
        return fmt_rate(value)
    if unit == "bytes":
        return fmt_bytes(value)
    if unit == "ratio":
        return fmt_ratio(value)
    return f"{value:,.0f}"


def format_cell(row: Row, key: str) -> str:
    stat = row.cells.get(key)
    if stat is None or not stat.values:
        return "—"
    median = format_value(row.unit, stat.median)
    if row.unit in ("ratio", "count") or len(stat.values) == 1:
        return median
    # The best run: the smallest time, the highest rate.
    best = stat.worst if row.unit == "rate" else stat.best
    return f"{median} [{format_value(row.unit, best)}]"


def format_notes(row: Row) -> str:
    parts: list[str] = []
    labels = dict(SIZES)
    for key, stat in row.cells.items():
        if not stat.notes:
            continue
        text = ", ".join(f"{name}={_note(value)}" for name, value in stat.notes.items())
        parts.append(f"{labels.get(key, key)}: {text}")
    return "; ".join(parts)


def _note(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_table(rows: list[Row], *, with_notes: bool = True) -> str:
    """A Markdown table: one column per entry size, then the notes."""
    header = ["benchmark", *[label for _, label in SIZES]]
    if with_notes:
        header.append("notes")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    section = None
    for row in rows:
        if row.section != section:
            section = row.section
            blank = [""] * (len(header) - 1)
            lines.append("| " + " | ".join([f"**{section}**", *blank]) + " |")
        cells = [row.name, *[format_cell(row, key) for key, _ in SIZES]]
        if with_notes:
            cells.append(format_notes(row))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

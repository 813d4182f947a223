"""How often the redactor's literal search stops on ordinary text, per order of its literals.

ahocorasick-rs's SIMD prefilter (Teddy, aho-corasick 1.x `packed/teddy`) puts each literal
in one of 8 buckets (16 past 32 literals, at half the speed): the i-th in bucket 7 - i % 8,
unless the low 4 bits of its first three bytes equal an earlier literal's, whose bucket it
joins. At each position it tests the three bytes there against every bucket at once; a byte
passes a bucket when its low and its high 4 bits each occur at that place in one of the
bucket's literals (any mix of them). Where a bucket passes, the search stops and compares
that bucket's literals: those stops, not the bytes, are what an order changes. This counts
them the same way over section 3c's entries, the recorded sessions of tests/fixtures and
this repository's text, and can look for an order with fewer (`--search ROUNDS`).

    .venv-bench/bin/python benchmarks/literal_buckets.py [--search 400]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import orjson

from entries import SIZES, make_entry
from transcript_otel.records.redaction import _LITERALS, _SEARCHED

ROOT = Path(__file__).resolve().parents[1]
Buckets = list[list[bytes]]


def buckets(literals: list[bytes]) -> Buckets:
    """The buckets Teddy fills with `literals`, in their order."""
    count = 16 if len(literals) > 32 else 8
    width = min(3, *(len(literal) for literal in literals))
    filled: Buckets = [[] for _ in range(count)]
    by_low_bits: dict[bytes, int] = {}
    for index, literal in enumerate(literals):
        low = bytes(byte & 0xF for byte in literal[:width])
        bucket = by_low_bits.setdefault(low, count - 1 - index % count)
        filled[bucket].append(literal)
    return filled


def stops(filled: Buckets, data: bytes) -> list[int]:
    """Per bucket, the positions of `data` where it passes."""
    counts = []
    for bucket in filled:
        if not bucket:
            counts.append(0)
            continue
        passing = None
        for place in range(3):
            low = {literal[place] & 0xF for literal in bucket}
            high = {literal[place] >> 4 for literal in bucket}
            table = bytes(1 if byte & 0xF in low and byte >> 4 in high else 0 for byte in range(256))
            shifted = int.from_bytes(data.translate(table)[place:], "little")
            passing = shifted if passing is None else passing & shifted
        counts.append(bin(passing or 0).count("1"))
    return counts


def corpus() -> bytes:
    texts = []
    for key, _ in SIZES:
        entry = make_entry(key)
        texts += [orjson.dumps(entry.detail), entry.raw.encode()]
    texts += [path.read_bytes() for path in sorted((ROOT / "tests" / "fixtures").rglob("*.jsonl"))]
    for folder, pattern in (("src", "*.py"), ("tests", "*.py"), ("docs", "*.md")):
        texts += [path.read_bytes() for path in sorted((ROOT / folder).rglob(pattern))]
    return b"\n".join(texts)


def per_mb(literals: list[bytes], data: bytes) -> float:
    return sum(stops(buckets(literals), data)) * 1e6 / len(data)


def search(literals: list[bytes], data: bytes, rounds: int) -> list[bytes]:
    """An order with fewer stops, by swapping two literals at a time (kept when not worse)."""
    best, best_cost = list(literals), per_mb(literals, data)
    for _ in range(rounds):
        order = list(best)
        first, second = random.sample(range(len(order)), 2)
        order[first], order[second] = order[second], order[first]
        cost = per_mb(order, data)
        if cost <= best_cost:
            best, best_cost = order, cost
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search", type=int, default=0, metavar="ROUNDS")
    args = parser.parse_args()
    data = corpus()
    print(f"{len(data) / 1e6:.1f} MB; stops per MB")
    searched = _LITERALS[:_SEARCHED]
    orders = {"the redactor's order": searched, "byte order": sorted(searched)}
    if args.search:
        orders["searched"] = search(searched, data, args.search)
    for name, order in orders.items():
        filled = buckets(order)
        print(f"\n{name}: {per_mb(order, data):,.0f}  ({len(order)} literals, {len(filled)} buckets)")
        for bucket, count in zip(filled, stops(filled, data), strict=True):
            print(f"  {count * 1e6 / len(data):8,.0f}  {', '.join(literal.decode() for literal in bucket)}")
        if name == "searched":
            print("  order:", ", ".join(repr(literal.decode()) for literal in order))


if __name__ == "__main__":
    main()

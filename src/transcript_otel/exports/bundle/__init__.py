"""Debug bundles: a captured run as the zip `wink debug` and `wink query` read.

What users call is named here; the modules below hold how.
"""

from transcript_otel.exports.bundle.writer import BundleInfo, write_bundle

__all__ = ["BundleInfo", "write_bundle"]

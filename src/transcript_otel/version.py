"""The package version, read by hatchling at build time."""

__version__ = "0.1.0"
# The semantic conventions our spans and metrics follow (v1.41.0, the last core release that
# holds GenAI; docs/design.md), as the schema URL of our tracers and meter.
SEMCONV_SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.0"

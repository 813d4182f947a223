"""Debug bundles: a captured run as the zip `wink debug` and `wink query` read."""

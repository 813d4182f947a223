"""`python -m transcript_otel`: the `transcript-otel` command without its console script."""

import sys

from transcript_otel.cli import main

sys.exit(main())

import sys

from transcript_otel.cli import main

sys.exit(main())

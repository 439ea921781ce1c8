"""``python -m engine.cli`` = ``lakemerge``."""
import sys

from engine.cli.app import main

sys.exit(main())

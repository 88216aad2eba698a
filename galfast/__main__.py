"""``python -m galfast`` runs the command line."""

import sys

from galfast.cli import main

sys.exit(main())

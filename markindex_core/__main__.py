import sys

from markindex_core.cli import main

sys.exit(main())

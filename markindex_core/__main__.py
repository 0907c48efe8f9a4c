import sys

from markindex_core.cli.main import main

sys.exit(main())

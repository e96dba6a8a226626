"""python -m stallbench.workloads.native: build the C op loops next to their source."""

import sys

from . import main

sys.exit(main())

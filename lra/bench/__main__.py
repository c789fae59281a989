import sys

from lra.bench.steps import main

sys.exit(main())

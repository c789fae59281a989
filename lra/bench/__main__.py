import sys

from lra import stop_signals

# Before lra.bench.steps imports JAX: from here a stop signal only sets a flag, which main looks at.
with stop_signals.handling():
    stop_signals.test_hook("import")
    from lra.bench.steps import main

    sys.exit(main())

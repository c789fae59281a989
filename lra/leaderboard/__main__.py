import sys

from lra.leaderboard.build import main

sys.exit(main())

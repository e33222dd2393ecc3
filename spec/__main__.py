import sys

from spec.cli import main

sys.exit(main())

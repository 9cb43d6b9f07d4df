import sys

from herd.cli import main

sys.exit(main())

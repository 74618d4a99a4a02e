"""`python -m calibrate.defaults [--write]`: print (and with --write, write) the fitted defaults."""

import sys

from calibrate.defaults.write import main

sys.exit(main(sys.argv[1:]))

"""``python -m clustergym.eval ...`` = ``python eval/compare.py ...`` (see eval/compare.py)."""
import sys

from clustergym.eval.compare import main

sys.exit(main())

"""``python -m eval ...`` = ``python eval/compare.py ...`` (see eval/compare.py)."""
import sys

from eval.compare import main

sys.exit(main())

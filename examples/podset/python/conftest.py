"""Makes the example's modules and the SDK package (``guests/python``) importable from the
tests."""

import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path[:0] = [str(here), str(here.parents[2] / "guests" / "python")]

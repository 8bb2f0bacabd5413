"""Makes the SDK package importable from the tests (``guests/python`` on ``sys.path``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

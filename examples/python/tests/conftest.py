"""The example's tests (scripts/test-python-example.sh runs them all):
importing app.py needs its settings, so unit tests get stand-ins here
unless the end-to-end run gave the real ones."""
import base64
import os
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent
REPOSITORY = EXAMPLE.parent.parent
sys.path.insert(0, str(EXAMPLE))

UNIT_SECRET = "whsec_" + base64.b64encode(b"unit-test-secret-of-32-bytes!!!!").decode()
os.environ.setdefault("EXAMPLE_API_URL", "http://127.0.0.1:9")
os.environ.setdefault("EXAMPLE_API_KEY", "siwa_unit_test")
os.environ.setdefault("EXAMPLE_WEBHOOK_SECRET", UNIT_SECRET)

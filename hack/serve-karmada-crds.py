#!/usr/bin/env python3
"""Serve Karmada's crds.tar.gz, built from the downloaded Karmada module, on loopback HTTP.

Prints `url=...` and `sha256=...`, then serves until interrupted. Point spec.crds.url (and
spec.crds.sha256) of a KarmadaDeployment at it on machines that cannot reach GitHub.
Options: see `--help` (tests/support/karmada_crds_server.py does the work).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.karmada_crds_server import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

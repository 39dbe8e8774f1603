"""The SDK's version follows the project's (the repository's VERSION file)."""

from pathlib import Path

import agentauth

VERSION_FILE = Path(__file__).resolve().parents[4] / "VERSION"


def test_version_is_the_projects() -> None:
    assert agentauth.__version__ == VERSION_FILE.read_text().strip()

"""The smoke tests' shared fixture."""

import pytest
from smoking import SPEC


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path

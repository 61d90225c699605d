"""The root files a package is expected to have: licence, citation metadata, changelog."""
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_license_is_the_apache_2_text_pyproject_names():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert re.search(r'^license\s*=\s*(\{\s*text\s*=\s*)?"Apache-2.0"', (ROOT / "pyproject.toml").read_text(), re.M)
    notice = (ROOT / "NOTICE").read_text()
    for licence in ("traces/LICENSE-philly-CC-BY-4.0", "traces/LICENSE-pollux-Apache-2.0",
                    "envs/data/LICENSE-gavel-MIT.txt", "envs/data/LICENSE-Apache-2.0.txt"):
        assert licence in notice and (ROOT / licence).exists(), licence


def test_citation_cff_is_valid():
    text = (ROOT / "CITATION.cff").read_text()
    cff = yaml.safe_load(text)
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # required by CFF 1.2.0
        assert cff.get(key), key
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    version = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert cff["version"] == version and cff["license"] == "Apache-2.0"
    assert "date-released" not in cff  # nothing released yet
    try:
        from cffconvert import Citation
    except ImportError:
        return
    Citation(text).validate()  # the full CFF 1.2.0 schema, where cffconvert is installed
    with pytest.raises(Exception, match="bogus"):
        Citation(text.replace("cff-version: 1.2.0\n", "cff-version: 1.2.0\nbogus: 1\n")).validate()


def test_changelog_keeps_a_changelog_with_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog") and "keepachangelog.com" in text
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings and headings[0] == "Unreleased"
    for section in re.findall(r"^### (.+)$", text, re.M):
        assert section in {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, section
    assert "`clustergym`" in text

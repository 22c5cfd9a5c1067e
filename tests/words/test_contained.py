"""The checks under every write into a work folder: a symlink on the way to a file, or anywhere
in a folder, is named; what is not there yet, and real files and folders, pass."""

import pytest

from translator.words.contained import refuse_links, refuse_links_below
from translator.words.errors import InputError


def test_missing_and_real_paths_pass(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "file").write_text("x")
    refuse_links(tmp_path, [tmp_path / "real" / "file", tmp_path / "new" / "deeper" / "file"])
    refuse_links_below(tmp_path)
    refuse_links_below(tmp_path / "not-there")


def test_the_first_link_on_the_way_is_named(tmp_path):
    (tmp_path / "sub").symlink_to(tmp_path.parent, target_is_directory=True)
    with pytest.raises(InputError, match=f"^{tmp_path}/sub: is a symlink"):
        refuse_links(tmp_path, [tmp_path / "sub" / "deeper" / "file"])


def test_the_folder_itself_as_a_link_is_named(tmp_path):
    (tmp_path / "work").symlink_to(tmp_path.parent, target_is_directory=True)
    with pytest.raises(InputError, match=f"^{tmp_path}/work: is a symlink"):
        refuse_links(tmp_path / "work")
    with pytest.raises(InputError, match=f"^{tmp_path}/work: is a symlink"):
        refuse_links_below(tmp_path / "work")


def test_a_link_deep_in_a_folder_is_found_not_followed(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(InputError, match="a/b/dangling: is a symlink"):
        refuse_links_below(tmp_path)

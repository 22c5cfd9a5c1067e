"""Axolotl YAMLs in the forms editors and generators write them: one that starts with a UTF-8
byte-order mark is read and updated in place with the mark kept (libyaml's positions leave the
mark out, which put the edit one character early: "not valid YAML"), and one written as a
single flow mapping is Axolotl's, not "cannot tell which framework"."""

from run_batchspec import run, run_json

BLOCK = "base_model: m\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n"
FLOW = (
    "# a generated config\n{base_model: m, micro_batch_size: 2, gradient_accumulation_steps: 4}\n"
)


def test_a_yaml_with_a_byte_order_mark_is_updated_with_the_mark_kept(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BLOCK.encode())
    result = run("update", path, "--from-world-size", 2, "--world-size", 4, "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == b"\xef\xbb\xbf" + BLOCK.replace("steps: 4", "steps: 2").encode()


def test_a_flow_mapping_is_read_as_axolotls(tmp_path):
    path = tmp_path / "flow.yaml"
    path.write_text(FLOW)
    result, out = run_json("inspect", path, "--world-size", 2)
    assert result.exit_code == 0, result.output
    assert (out["framework"], out["global_batch_size"]) == ("axolotl", 16)


def test_a_flow_mapping_is_updated_in_place(tmp_path):
    path = tmp_path / "flow.yaml"
    path.write_text(FLOW)
    result = run("update", path, "--from-world-size", 2, "--world-size", 4, "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_text() == FLOW.replace("steps: 4", "steps: 2")


def test_a_flow_mapping_of_another_tools_keys_is_not_axolotls(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text("{learning_rate: 0.1, epochs: 3}\n")
    result = run("inspect", path)
    assert result.exit_code == 2 and "cannot tell which framework" in result.stderr

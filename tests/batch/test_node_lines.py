"""``plan`` takes the node layout as every command does (``--world-size N --nproc-per-node G``
is N / G nodes) and prints it in each launcher's own terms, in the text report and in
``--json``; the parallel sizes stay as given."""

import json

import pytest
from run_batchspec import run


def plan_json(*args):
    result = run("plan", "--global-batch", 256, "--micro-batch", 2, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def lines_of(out: dict) -> dict[str, list[str]]:
    return {one["launcher"]: one["lines"] for one in out["launch"]}


@pytest.mark.parametrize(
    "layout",
    [["--world-size", 16, "--nproc-per-node", 8], ["--nnodes", 2, "--nproc-per-node", 8]],
)
def test_plan_takes_a_world_split_in_nodes_like_update(layout):
    out = plan_json(*layout)
    assert (out["world_size"], out["nodes"], out["gpus_per_node"]) == (16, 2, 8)
    assert out["gradient_accumulation_steps"] == 8


@pytest.mark.parametrize(("nodes", "per_node"), [(2, 8), (4, 4), (1, 8)])
def test_plan_writes_the_layout_in_each_launchers_terms(nodes, per_node):
    out = plan_json("--world-size", nodes * per_node, "--nproc-per-node", per_node)
    lines = lines_of(out)
    assert lines["torchrun"] == [f"torchrun --nnodes {nodes} --nproc-per-node {per_node}"]
    assert lines["deepspeed"] == [f"deepspeed --num_nodes {nodes} --num_gpus {per_node}"]
    assert lines["accelerate"] == [f"num_machines: {nodes}", f"num_processes: {nodes * per_node}"]
    assert lines["litgpt"] == [f"devices: {per_node}", f"num_nodes: {nodes}"]
    under, alone = lines["slurm, torchrun under srun"], lines["slurm, srun alone"]
    assert f"#SBATCH --nodes={nodes}" in under and f"#SBATCH --nodes={nodes}" in alone
    # torchrun under srun is one task a node; srun alone starts one task a GPU.
    assert "#SBATCH --ntasks-per-node=1" in under
    assert f"#SBATCH --ntasks-per-node={per_node}" in alone
    deepspeed = next(one for one in out["launch"] if one["launcher"] == "deepspeed")
    assert ("hostfile" in (deepspeed["note"] or "")) == (nodes > 1)


def test_the_text_report_prints_the_same_lines():
    args = ["--global-batch", 256, "--micro-batch", 2, "--world-size", 32, "--nproc-per-node", 8]
    text = run("plan", *args).stdout
    for launcher, lines in lines_of(plan_json(*args[4:])).items():
        assert f"  {launcher}:" in text
        for line in lines:
            assert f"    {line}\n" in text
    assert "launch 4 node(s) × 8 processes each:" in text


def test_the_parallel_sizes_stay_beside_the_layout():
    out = plan_json("--world-size", 32, "--nproc-per-node", 8, "--tp", 2, "--pp", 2, "--cp", 2)
    sizes = ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
    assert [out[k] for k in sizes] == [2, 2, 2]
    assert (out["data_parallel_size"], out["nodes"]) == (4, 4)
    assert lines_of(out)["torchrun"] == ["torchrun --nnodes 4 --nproc-per-node 8"]


def test_a_world_alone_has_no_node_lines():
    assert plan_json("--world-size", 16)["launch"] is None


def test_a_world_that_is_not_whole_nodes_is_refused_naming_the_nearest():
    result = run("plan", "--global-batch", 256, "--world-size", 12, "--nproc-per-node", 8)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "batchspec: error: --world-size 12 is not whole nodes of --nproc-per-node 8: give 8 or 16"
    )


def test_processes_per_node_alone_asks_for_the_world():
    result = run("plan", "--global-batch", 256, "--nproc-per-node", 8)
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == "batchspec: error: give --nnodes or --world-size with --nproc-per-node"
    )


def test_a_spec_file_splits_its_world_in_nodes_too(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "global_batch_size: 256\nmicro_batch_size: 2\nworld_size: 32\ngpus_per_node: 8\n"
    )
    out = json.loads(run("plan", spec, "--json").stdout)
    assert (out["nodes"], out["gpus_per_node"]) == (4, 8)


def test_estimate_takes_the_same_layout():
    args = ["estimate", "--micro-batch", 1, "--global-batch", 16, "--model", "125m", "--json"]
    split = run(*args, "--world-size", 16, "--nproc-per-node", 8)
    nodes = run(*args, "--nnodes", 2, "--nproc-per-node", 8)
    assert split.exit_code == nodes.exit_code == 0, split.output
    layouts = [json.loads(r.stdout)["layout"] for r in (split, nodes)]
    assert [(one["world_size"], one["nodes"]) for one in layouts] == [(16, 2), (16, 2)]

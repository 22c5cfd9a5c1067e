"""Files are precious: what reading refuses, and how writing keeps what the user has."""

import errno
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from paths import ROOT
from test_cli import run
from test_cli_configs import AXOLOTL, MEGATRON

from translator.words import files
from translator.words.errors import InputError
from translator.words.files import MAX_BYTES, read_text, write_files

FIXTURES = ROOT / "fixtures"
SPEC = "global_batch_size: 128\nmicro_batch_size: 4\nworld_size: 16\n"


def batchspec(*args, stdin=None, timeout=60):
    """The installed command in its own process (a hang fails the test instead of the run)."""
    return subprocess.run(
        [sys.executable, "-m", "translator", *map(str, args)],
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


# reading ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["inspect"],
        ["update", "--world-size", 8],
        ["render", "--to", "deepspeed", "--out", "o"],
        ["plan"],
        ["validate"],
        ["convert", "--to", "megatron", "--out", "o"],
    ],
)
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, command):
    fifo = tmp_path / "config.yml"
    os.mkfifo(fifo)
    result = batchspec(command[0], fifo, *command[1:], timeout=30)
    assert result.returncode == 2
    assert (
        result.stderr == f"batchspec: error: {fifo}: is a FIFO, not a regular file; "
        "refusing to read it\n"
    )


@pytest.mark.parametrize(
    "path, kind", [("/dev/null", "a character device"), ("/dev/zero", "a character device")]
)
def test_a_device_is_refused(path, kind):
    result = run("inspect", path)
    assert result.exit_code == 2 and f"{path}: is {kind}, not a regular file" in result.stderr


def test_dev_stdin_as_a_path_is_refused(tmp_path):
    result = batchspec("inspect", "/dev/stdin", stdin=subprocess.PIPE, timeout=30)
    assert result.returncode == 2 and "/dev/stdin: is a" in result.stderr


def test_a_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(InputError, match="s.json: is a socket, not a regular file"):
            read_text(path)


def test_a_fifo_swapped_in_after_the_check_is_refused_on_the_open_file(tmp_path, monkeypatch):
    fifo = tmp_path / "late.json"
    os.mkfifo(fifo)
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: real_stat(__file__))  # the check passes
    with pytest.raises(InputError, match="late.json: is a FIFO"):
        read_text(fifo)


def test_endless_stdin_is_capped(tmp_path):
    with open("/dev/zero", "rb") as zero:
        result = batchspec(
            "render", "-", "--to", "deepspeed", "--out", tmp_path / "o", stdin=zero, timeout=60
        )
    assert result.returncode == 2
    assert result.stderr == "batchspec: error: <stdin>: larger than 4 MiB; not a batch config\n"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "<stdin>: empty file"),
        (b"  \n\n", "<stdin>: empty file"),
        (b"global_batch_size: 8\0\n", "<stdin>: binary file, not a text config"),
        (b"a: 1\nb: \xff\n", "<stdin>:2: not UTF-8 text (byte 8)"),
        (b"#" * (MAX_BYTES + 1), "<stdin>: larger than 4 MiB"),
    ],
)
def test_stdin_gets_the_same_checks_as_a_file(tmp_path, data, message):
    result = run("render", "-", "--to", "deepspeed", "--out", tmp_path, stdin=data)
    assert result.exit_code == 2 and message in result.stderr


def test_stdin_within_the_cap_is_read(tmp_path):
    result = run("render", "-", "--to", "deepspeed", "--out", tmp_path, stdin=SPEC.encode())
    assert result.exit_code == 0, result.output
    assert (tmp_path / "deepspeed.json").exists()


def test_reading_keeps_crlf(tmp_path):
    path = tmp_path / "a.yml"
    path.write_bytes(b"a: 1\r\nb: 2\n")
    assert read_text(path) == "a: 1\r\nb: 2\n"


# modes, owners, links --------------------------------------------------------------------------


def test_new_files_get_the_usual_mode(spec, tmp_path):
    old = os.umask(0o027)
    try:
        result = run("render", spec, "--to", "deepspeed,megatron", "--out", tmp_path / "o")
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    # The umask's bits: read-write for a config, and executable too for a script (#!).
    for name, mode in (("deepspeed.json", 0o666), ("megatron.sh", 0o777)):
        assert stat.S_IMODE((tmp_path / "o" / name).stat().st_mode) == mode & ~0o027


def test_update_in_place_keeps_the_mode(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON)
    script.chmod(0o755)
    inode = script.stat().st_ino
    result = run("update", script, "--world-size", 16, "--in-place")
    assert result.exit_code == 0, result.output
    assert "NNODES=${NNODES:-2}" in script.read_text()
    st = script.stat()
    assert stat.S_IMODE(st.st_mode) == 0o755 and st.st_ino != inode  # replaced, atomically


def test_update_in_place_keeps_the_owner_and_group(tmp_path):
    path = tmp_path / "ax.yml"
    path.write_text(AXOLOTL)
    if os.geteuid() == 0:
        os.chown(path, 1234, 4321)
    before = path.stat()
    result = run("update", path, "--world-size", 16, "--global-batch", 64, "--in-place")
    assert result.exit_code == 0, result.output
    after = path.stat()
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert "gradient_accumulation_steps: 2 #" in path.read_text()


def test_an_owner_that_cannot_be_kept_is_refused(tmp_path, monkeypatch):
    """Not root and not our file: replacing it would make it ours, so it is left alone."""

    def no(*args):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", no)
    path = tmp_path / "theirs.yml"
    path.write_text("a: 1\n")
    theirs = SimpleNamespace(st_uid=os.geteuid() + 1, st_gid=os.getegid(), st_mode=0o100644)
    plan = files._Plan(path, path, b"a: 2\n", theirs)
    with pytest.raises(InputError, match=rf"theirs.yml: owned by user {os.geteuid() + 1}"):
        files._write_temporary(plan)
    assert path.read_text() == "a: 1\n" and leftovers(tmp_path) == []


def test_a_symlink_is_written_through_to_its_target(tmp_path):
    real = tmp_path / "configs" / "ax.yml"
    real.parent.mkdir()
    real.write_text(AXOLOTL)
    real.chmod(0o640)
    link = tmp_path / "current.yml"
    link.symlink_to(Path("configs") / "ax.yml")
    result = run("update", link, "--world-size", 16, "--global-batch", 64, "--in-place")
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(Path("configs") / "ax.yml")
    assert "gradient_accumulation_steps: 2 #" in real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert f"wrote {link} (a symlink; wrote its target {real})" in result.stdout


def test_update_out_writes_through_a_symlink_the_user_named(tmp_path):
    """``-o PATH`` names the file itself, so its link is followed wherever it leads."""
    source = tmp_path / "ax.yml"
    source.write_text(AXOLOTL)
    elsewhere = tmp_path / "elsewhere" / "new.yml"
    elsewhere.parent.mkdir()
    elsewhere.write_text("old\n")
    link = tmp_path / "out" / "new.yml"
    link.parent.mkdir()
    link.symlink_to(elsewhere)
    args = ["update", source, "--world-size", 16, "--global-batch", 64, "-o", link, "--force"]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and "gradient_accumulation_steps: 2 #" in elsewhere.read_text()


@pytest.mark.parametrize("dir_is_a_link", [False, True])
def test_render_force_writes_through_a_symlink_inside_the_out_folder(spec, tmp_path, dir_is_a_link):
    """A link in --out DIR to a file in DIR is written through (also when DIR, as named, is a
    link: inside is where DIR really is)."""
    out = tmp_path / "o"
    out.mkdir()
    kept = out / "deepspeed-v2.json"
    kept.write_text("{}\n")
    (out / "deepspeed.json").symlink_to("deepspeed-v2.json")
    named = out
    if dir_is_a_link:
        named = tmp_path / "current"
        named.symlink_to(out)
    assert run("render", spec, "--to", "deepspeed", "--out", named).exit_code == 2
    result = run("render", spec, "--to", "deepspeed", "--out", named, "--force")
    assert result.exit_code == 0, result.output
    assert (out / "deepspeed.json").is_symlink() and "train_batch_size" in kept.read_text()
    assert f"wrote {named / 'deepspeed.json'} (a symlink; wrote its target {kept})" in result.stdout


#: Links at out/deepspeed.json that lead out of out/ (made relative to out/).
LINKS_OUT = {
    "to a file outside": {"deepspeed.json": "../kept.json"},
    "by an absolute path": {"deepspeed.json": "{tmp}/kept.json"},
    "through a link inside": {"deepspeed.json": "hop.json", "hop.json": "../kept.json"},
    "through a linked folder": {"deepspeed.json": "sub/kept.json", "sub": ".."},
}


@pytest.mark.parametrize("links", list(LINKS_OUT.values()), ids=list(LINKS_OUT))
@pytest.mark.parametrize("command", ["render", "convert"])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_symlink_out_of_the_out_folder_is_refused(spec, tmp_path, links, command, force):
    out = tmp_path / "o"
    out.mkdir()
    kept = tmp_path / "kept.json"
    kept.write_text("{}\n")
    for name, target in links.items():
        (out / name).symlink_to(target.format(tmp=tmp_path))
    before = sorted(os.listdir(out))
    source, launch = spec, []
    if command == "convert":
        source, launch = tmp_path / "ax.yml", ["--world-size", 8]
        source.write_text(AXOLOTL)
    targets = ["--to", "axolotl,deepspeed,megatron", "--out", out]
    result = run(command, source, *targets, *launch, *force)
    assert result.exit_code == 2, result.output
    link = out / "deepspeed.json"
    assert result.stderr == (
        f"batchspec: error: {link}: is a symlink to {kept}, outside {out}; refusing to write "
        "through it (remove the link, or write elsewhere)\n"
    )
    assert kept.read_text() == "{}\n" and sorted(os.listdir(out)) == before and leftovers(out) == []


def test_a_file_with_hard_links_is_refused(tmp_path):
    path = tmp_path / "ax.yml"
    path.write_text(AXOLOTL)
    os.link(path, tmp_path / "other-name.yml")
    result = run("update", path, "--world-size", 16, "--global-batch", 64, "--in-place")
    assert result.exit_code == 2
    assert result.stderr == (
        f"batchspec: error: {path}: has 2 hard links; replacing it would "
        "split them, so it is left alone: write to a new file (-o/--out) "
        "instead\n"
    )
    assert path.read_text() == AXOLOTL and path.stat().st_nlink == 2
    assert (
        run(
            "update", path, "--world-size", 16, "--global-batch", 64, "-o", tmp_path / "new.yml"
        ).exit_code
        == 0
    )


# consent ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["../nowhere", "missing.sh"], ids=["outside", "inside"])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_dangling_symlink_is_never_replaced(spec, tmp_path, force, target):
    out = tmp_path / "o"
    out.mkdir()
    (out / "megatron.sh").symlink_to(target)
    result = run("render", spec, "--to", "deepspeed,megatron", "--out", out, *force)
    assert result.exit_code == 2
    assert f"{out / 'megatron.sh'}: is a symlink to a missing file" in result.stderr
    assert (out / "megatron.sh").is_symlink() and sorted(os.listdir(out)) == ["megatron.sh"]


def test_a_device_is_never_replaced_even_with_force(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 4}\n'
    )
    result = run(
        "update", path, "--world-size", 4, "--from-world-size", 8, "-o", "/dev/null", "--force"
    )
    assert result.exit_code == 2
    assert (
        "/dev/null: is a character device, not a regular file; refusing to replace it"
        in result.stderr
    )
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_folder_is_never_replaced(spec, tmp_path):
    (tmp_path / "deepspeed.json").mkdir()
    result = run("render", spec, "--to", "deepspeed", "--out", tmp_path, "--force")
    assert result.exit_code == 2 and "deepspeed.json: is a directory" in result.stderr


def test_a_file_that_appears_while_writing_is_left_alone(tmp_path, monkeypatch):
    path = tmp_path / "new.json"
    real_link = os.link

    def racing_link(src, dst):
        Path(dst).write_text("theirs\n")
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(InputError, match="new.json: appeared while batchspec was writing it"):
        write_files([(path, "mine\n")], force=False)
    assert path.read_text() == "theirs\n" and leftovers(tmp_path) == []


def test_without_hard_links_the_name_is_still_claimed_exclusively(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    (written,) = write_files([(tmp_path / "a.json", "{}\r\n")], force=False)
    assert written.target.read_bytes() == b"{}\r\n" and leftovers(tmp_path) == []
    with pytest.raises(InputError, match="a.json: exists; use --force"):
        write_files([(tmp_path / "a.json", "{}\n")], force=False)


def test_the_same_file_twice_is_refused(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.json").symlink_to("a.json")
    with pytest.raises(InputError, match="b.json: the same file would be written twice"):
        write_files([(tmp_path / "a.json", "1"), (tmp_path / "b.json", "2")], force=True)


# all or nothing --------------------------------------------------------------------------------


def failing_on_call(n, real):
    calls = []

    def fake(*args, **kwargs):
        calls.append(args)
        if len(calls) == n:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    return fake


@pytest.mark.parametrize("name", ["link", "fsync"])
def test_render_writes_all_files_or_none(spec, tmp_path, monkeypatch, name):
    out = tmp_path / "o"
    monkeypatch.setattr(os, name, failing_on_call(2, getattr(os, name)))
    result = run("render", spec, "--to", "deepspeed,axolotl,megatron", "--out", out)
    assert result.exit_code == 2
    assert result.stderr.startswith("batchspec: error: ")
    assert "cannot write: No space left on device" in result.stderr
    assert not out.exists()  # no file, no temporary file, not even the folder it made


def test_a_failed_replace_removes_what_this_run_created_and_nothing_else(
    spec, tmp_path, monkeypatch
):
    (tmp_path / "megatron.sh").write_text("mine\n")
    monkeypatch.setattr(os, "replace", failing_on_call(1, os.replace))
    result = run("render", spec, "--to", "deepspeed,megatron", "--out", tmp_path, "--force")
    assert result.exit_code == 2 and "megatron.sh: cannot write" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["megatron.sh", "spec.yaml"]
    assert (tmp_path / "megatron.sh").read_text() == "mine\n"


def test_an_interrupt_leaves_no_temporary_file(tmp_path, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "link", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_files([(tmp_path / "a.json", "{}"), (tmp_path / "b.json", "{}")], force=False)
    assert os.listdir(tmp_path) == []


def test_stale_temporary_files_of_ours_are_removed(spec, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    old = time.time() - files.STALE_SECONDS - 60
    names = {
        ".deepspeed.json.k2j_9x0a.tmp": old,  # ours, old: removed
        ".deepspeed.json.abcd1234.tmp": time.time(),  # ours, a run in progress: kept
        ".deepspeed.json.notours.tmp": old,  # not mkstemp's shape: kept
        ".megatron.sh.abcd1234.tmp": old,  # another target's: not this run's
        "deepspeed.json.abcd1234.tmp": old,
    }  # no leading dot: kept
    for name, mtime in names.items():
        (out / name).write_text("x")
        os.utime(out / name, (mtime, mtime))
    result = run("render", spec, "--to", "deepspeed", "--out", out)
    assert result.exit_code == 0, result.output
    assert leftovers(out) == sorted(set(names) - {".deepspeed.json.k2j_9x0a.tmp"})


# line endings ----------------------------------------------------------------------------------


def crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode()


def test_update_keeps_crlf_in_an_axolotl_yaml(tmp_path):
    source = (FIXTURES / "axolotl" / "valid" / "llama3_lora_1b.yml").read_text()
    path = tmp_path / "ax.yml"
    path.write_bytes(crlf(source))
    result = run("update", path, "--world-size", 16, "--from-world-size", 8, "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == crlf(
        source.replace("gradient_accumulation_steps: 4", "gradient_accumulation_steps: 2")
    )


def test_update_keeps_crlf_in_a_megatron_script(tmp_path):
    source = MEGATRON.replace("NNODES=${NNODES:-1}", "NNODES=1")
    path = tmp_path / "train.sh"
    path.write_bytes(crlf(source))
    result = run("update", path, "--world-size", 16, "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == crlf(source.replace("NNODES=1", "NNODES=2"))


def test_an_inserted_line_takes_its_neighbours_ending(tmp_path):
    path = tmp_path / "ax.yml"
    path.write_bytes(b"base_model: x\nmicro_batch_size: 2\r\nbatch_size: 16  # per GPU\r\nlr: 1\n")
    result = run("update", path, "--world-size", 8, "--global-batch", 128, "--in-place")
    assert result.exit_code == 0, result.output
    assert (
        path.read_bytes()
        == b"base_model: x\nmicro_batch_size: 2\r\ngradient_accumulation_steps: 8\r\nlr: 1\n"
    )


def test_update_keeps_mixed_line_endings_and_prints_them_unchanged(tmp_path):
    path = tmp_path / "ax.yml"
    data = b"base_model: x\r\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\r\nlr: 1\n"
    path.write_bytes(data)
    result = run("update", path, "--world-size", 4, "--from-world-size", 8, "-o", tmp_path / "n")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "n").read_bytes() == data.replace(b"steps: 4", b"steps: 8")
    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "translator",
            "update",
            str(path),
            "--world-size",
            "4",
            "--from-world-size",
            "8",
        ],
        capture_output=True,
        timeout=60,
    )
    assert printed.returncode == 0
    assert printed.stdout == data.replace(b"steps: 4", b"steps: 8")

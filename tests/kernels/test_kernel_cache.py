"""Run-time kernel compilation without a GPU: NVRTC, and the disk cache of cubins.

runtime/kernels/nvrtc.pyx, Note [Kernel caches], states the policy these tests hold it to. NVRTC
needs no device, so all of this runs on a CPU-only machine.
"""
import hashlib
import multiprocessing
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tensorplay._runtime.kernels import nvrtc as kernels

ARCH = "sm_90"  # the H200's
ELF_MAGIC = b"\x7fELF"
# The entry layout is a file format, so the tests spell it out rather than import it: the
# magic, the key the entry was written under (the sha256 its name spells), the sha256 of the
# cubin, then the cubin.
ENTRY_MAGIC = b"TPCUBIN3"
KEY_END = len(ENTRY_MAGIC) + 32
HEADER_BYTES = KEY_END + 32
PRELUDE = "typedef float scalar_t;\n"
WORKERS_THREADS = 8
WORKERS_PROCESSES = 4


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "kernels"
    monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(directory))
    return directory


def counted(call):
    """call() and how much each cache_statistics() counter moved meanwhile."""
    before = kernels.cache_statistics()
    result = call()
    after = kernels.cache_statistics()
    return result, {name: after[name] - before[name] for name in after}


def assert_one_valid_entry(directory, cubin):
    files = sorted(directory.iterdir())
    assert len(files) == 1, f"expected one cache entry and no temporary files, found {files}"
    entry = files[0]
    assert entry.suffix == ".cubin" and len(entry.stem) == 64  # hex sha256
    data = entry.read_bytes()
    assert data[:len(ENTRY_MAGIC)] == ENTRY_MAGIC
    assert data[len(ENTRY_MAGIC):KEY_END] == bytes.fromhex(entry.stem)
    assert data[KEY_END:HEADER_BYTES] == hashlib.sha256(data[HEADER_BYTES:]).digest()
    assert data[HEADER_BYTES:] == cubin
    return entry


def selftest_cubin():
    return kernels.cached_cubin("selftest", PRELUDE, ARCH)


# --------------------------------------------------------------------------------------------
# Sources and NVRTC


def test_nvrtc_reports_its_version():
    major, minor = kernels.nvrtc_version()
    assert isinstance(major, int) and isinstance(minor, int)
    assert (major, minor) >= (12, 0)


def test_selftest_source_ships_with_the_package():
    assert "selftest" in kernels.kernel_source_names()
    assert "tp_selftest_iota" in kernels.read_kernel_source("selftest")


@pytest.mark.parametrize("name", ["no_such_source", "../selftest", "kernels/selftest"])
def test_unknown_source_name_is_rejected_naming_the_shipped_ones(name):
    with pytest.raises(ValueError, match="selftest"):
        kernels.read_kernel_source(name)


def test_nvrtc_compiles_selftest_to_an_sm90_cubin():
    cubin = kernels.compile_cubin(kernels.read_kernel_source("selftest"), ARCH)
    assert cubin.startswith(ELF_MAGIC)
    assert b"tp_selftest_iota" in cubin  # extern "C": the symbol is the name get_kernel asks for


def test_compile_error_raises_with_the_nvrtc_log():
    source = 'extern "C" __global__ void broken(int* out) { *out = undeclared_value; }\n'
    with pytest.raises(RuntimeError) as raised:
        kernels.compile_cubin(source, ARCH, "broken.cu")
    message = str(raised.value)
    assert "broken.cu" in message
    assert 'identifier "undeclared_value" is undefined' in message  # the log itself


def test_compile_error_in_a_prelude_names_the_source_and_caches_nothing(cache_dir):
    with pytest.raises(RuntimeError) as raised:
        kernels.cached_cubin("selftest", "this is not C++", ARCH)
    assert "selftest.cu prelude(1): error" in str(raised.value)
    assert not cache_dir.exists() or not any(cache_dir.iterdir())


def test_unsupported_architecture_is_reported_with_the_log():
    with pytest.raises(RuntimeError, match="sm_20(.|\n)*--gpu-architecture"):
        kernels.compile_cubin(kernels.read_kernel_source("selftest"), "sm_20")


# --------------------------------------------------------------------------------------------
# The disk cache


def test_cache_directory_defaults_to_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("TENSORPLAY_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kernels.cache_directory() == tmp_path / ".cache" / "tensorplay" / "kernels"
    monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert kernels.cache_directory() == tmp_path / "elsewhere"


def test_first_use_compiles_and_the_next_reads_the_disk(cache_dir):
    first, moved = counted(selftest_cubin)
    assert first.startswith(ELF_MAGIC)
    assert moved == {"disk_hits": 0, "disk_misses": 1, "compiles": 1, "corrupt": 0}
    assert_one_valid_entry(cache_dir, first)

    second, moved = counted(selftest_cubin)
    assert second == first
    assert moved == {"disk_hits": 1, "disk_misses": 0, "compiles": 0, "corrupt": 0}


def test_prelude_and_architecture_each_get_their_own_entry(cache_dir):
    variants = [(PRELUDE, "sm_90"), ("typedef double scalar_t;\n", "sm_90"), (PRELUDE, "sm_80")]
    cubins, moved = counted(lambda: [kernels.cached_cubin("selftest", prelude, arch)
                                     for prelude, arch in variants])
    assert moved["compiles"] == len(variants) and moved["disk_hits"] == 0
    assert len(list(cache_dir.glob("*.cubin"))) == len(variants)
    assert cubins[0] != cubins[2]  # sm_80 code is not sm_90 code


def test_a_different_nvrtc_version_does_not_reuse_entries(cache_dir, monkeypatch):
    selftest_cubin()
    major, minor = kernels.nvrtc_version()
    monkeypatch.setattr(kernels, "nvrtc_version", lambda: (major, minor + 1))
    _, moved = counted(selftest_cubin)
    assert moved["disk_misses"] == 1 and moved["compiles"] == 1
    assert len(list(cache_dir.glob("*.cubin"))) == 2


def flip_payload_byte(data):
    position = HEADER_BYTES + (len(data) - HEADER_BYTES) // 2
    return data[:position] + bytes([data[position] ^ 0xFF]) + data[position + 1:]


def flip_digest_byte(data):
    position = KEY_END
    return data[:position] + bytes([data[position] ^ 0x01]) + data[position + 1:]


def flip_key_byte(data):
    position = len(ENTRY_MAGIC)
    return data[:position] + bytes([data[position] ^ 0x01]) + data[position + 1:]


CORRUPTIONS = {
    "flipped payload byte": flip_payload_byte,
    "flipped digest byte": flip_digest_byte,
    "flipped key byte": flip_key_byte,
    "an entry of the previous format": lambda data: b"TPCUBIN1" + data[KEY_END:],
    "truncated payload": lambda data: data[:len(data) // 2],
    "header only": lambda data: data[:HEADER_BYTES],
    "truncated header": lambda data: data[:HEADER_BYTES - 1],
    "empty file": lambda data: b"",
    "wrong magic": lambda data: b"NOTCUBIN" + data[len(ENTRY_MAGIC):],
    "a bare cubin": lambda data: data[HEADER_BYTES:],
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupt_entry_is_recompiled_and_rewritten(cache_dir, corrupt):
    good = selftest_cubin()
    entry = assert_one_valid_entry(cache_dir, good)
    entry.write_bytes(corrupt(entry.read_bytes()))

    recovered, moved = counted(selftest_cubin)
    assert recovered == good
    assert moved == {"disk_hits": 0, "disk_misses": 1, "compiles": 1, "corrupt": 1}
    assert assert_one_valid_entry(cache_dir, good) == entry

    _, moved = counted(selftest_cubin)
    assert moved["disk_hits"] == 1 and moved["corrupt"] == 0


def test_another_kernels_valid_entry_under_this_kernels_name_is_not_loaded(cache_dir):
    # Each entry is whole and its checksum right, but written under another key: copied (or
    # linked) under this kernel's name, it is a miss, never the other kernel's code.
    other = kernels.cached_cubin("selftest", PRELUDE, "sm_80")  # another kernel's code
    mine = selftest_cubin()
    assert other != mine
    entries = {path.read_bytes()[HEADER_BYTES:]: path for path in cache_dir.glob("*.cubin")}
    mine_path, other_path = entries[mine], entries[other]
    mine_path.write_bytes(other_path.read_bytes())

    loaded, moved = counted(selftest_cubin)
    assert loaded == mine
    assert moved == {"disk_hits": 0, "disk_misses": 1, "compiles": 1, "corrupt": 1}
    assert mine_path.read_bytes()[HEADER_BYTES:] == mine  # rewritten under its own key
    assert mine_path.read_bytes()[len(ENTRY_MAGIC):KEY_END] == bytes.fromhex(mine_path.stem)


def test_the_format_version_is_part_of_every_key(cache_dir, monkeypatch):
    selftest_cubin()
    monkeypatch.setattr(kernels, "FORMAT_VERSION", kernels.FORMAT_VERSION - 1)
    _, moved = counted(selftest_cubin)
    assert moved["disk_misses"] == 1 and moved["compiles"] == 1
    assert len(list(cache_dir.glob("*.cubin"))) == 2


def test_concurrent_threads_get_one_cubin_and_leave_one_entry(cache_dir):
    start = threading.Barrier(WORKERS_THREADS)

    def compile_after_barrier():
        start.wait()
        return selftest_cubin()

    with ThreadPoolExecutor(WORKERS_THREADS) as pool:
        futures = [pool.submit(compile_after_barrier) for _ in range(WORKERS_THREADS)]
        cubins = [future.result(timeout=120) for future in futures]
    assert all(cubin == cubins[0] for cubin in cubins)
    assert cubins[0].startswith(ELF_MAGIC)
    assert_one_valid_entry(cache_dir, cubins[0])


def compile_in_child(cache_directory, start, results):
    """A spawned process: compile selftest once every sibling is ready, report the cubin."""
    os.environ["TENSORPLAY_CACHE_DIR"] = cache_directory
    from tensorplay._runtime.kernels import nvrtc as child_kernels
    start.wait()
    results.put(child_kernels.cached_cubin("selftest", PRELUDE, ARCH))


def test_concurrent_processes_get_one_cubin_and_leave_one_entry(cache_dir):
    # spawn, not fork: a forked child of a CUDA process cannot use CUDA (device.pyx).
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(WORKERS_PROCESSES)
    results = context.Queue()
    children = [context.Process(target=compile_in_child, args=(str(cache_dir), start, results))
                for _ in range(WORKERS_PROCESSES)]
    for child in children:
        child.start()
    try:
        cubins = [results.get(timeout=120) for _ in children]
    finally:
        for child in children:
            child.join(timeout=60)
    assert [child.exitcode for child in children] == [0] * WORKERS_PROCESSES
    assert all(cubin == cubins[0] for cubin in cubins)
    assert cubins[0].startswith(ELF_MAGIC)
    assert_one_valid_entry(cache_dir, cubins[0])


@pytest.mark.parametrize("unusable", ["under a file", "a file"])
def test_an_unusable_cache_directory_falls_back_to_memory_with_one_warning(tmp_path, monkeypatch,
                                                                           unusable):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    directory = {"under a file": str(blocker / "kernels"), "a file": str(blocker)}[unusable]
    monkeypatch.setenv("TENSORPLAY_CACHE_DIR", directory)

    def compile_once():  # a prelude of its own: not in the process's memory cache yet
        return kernels.cached_cubin("selftest", f"{PRELUDE}// {unusable}\n", ARCH)

    with pytest.warns(RuntimeWarning, match="kernel cache directory .* cannot be used .* kept "
                                            "in memory") as warned:
        cubin, moved = counted(compile_once)
        again, moved_again = counted(compile_once)
    assert len(warned) == 1  # once per directory
    assert cubin.startswith(ELF_MAGIC) and again == cubin
    assert moved == {"disk_hits": 0, "disk_misses": 1, "compiles": 1, "corrupt": 0}
    assert moved_again["compiles"] == 0  # the process keeps it


@pytest.mark.parametrize("kind", ["fifo", "directory", "huge file"])
def test_entries_that_are_not_small_regular_files_never_block_and_count_as_corrupt(cache_dir,
                                                                                   kind):
    cubin = selftest_cubin()
    entry = assert_one_valid_entry(cache_dir, cubin)
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)  # reading it would block forever
    elif kind == "directory":
        entry.mkdir()
    else:
        with open(entry, "wb") as huge:
            huge.truncate(kernels.MAX_ENTRY_BYTES + 1)  # sparse: no disk used
    again, moved = counted(selftest_cubin)
    assert again == cubin and moved["compiles"] == 1
    if kind != "directory":  # the rewrite replaces what was there
        assert_one_valid_entry(cache_dir, cubin)


def refuse(*args, **kwargs):
    raise PermissionError(13, "Permission denied (simulated)")


@pytest.mark.parametrize("step", ["tempfile.mkstemp", "os.replace"])
def test_cache_write_that_fails_still_compiles_and_leaves_no_file(cache_dir, monkeypatch, step):
    # Tests run as root, which no directory permission stops, so the refusal is simulated at
    # the two places a read-only directory or a full disk makes a write fail.
    module, function = step.split(".")
    monkeypatch.setattr({"tempfile": tempfile, "os": os}[module], function, refuse)
    cubin, moved = counted(selftest_cubin)
    assert cubin.startswith(ELF_MAGIC)
    assert moved["compiles"] == 1
    assert list(cache_dir.iterdir()) == []


"""tensorplay.torch is optional: importing tensorplay (which imports tensorplay.torch) imports no
PyTorch, and without PyTorch a bridge function says how to get it. These run without torch
and without a GPU (each in a fresh interpreter, so that no other test's torch import leaks)."""
import subprocess
import sys


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_importing_tensorplay_and_the_bridge_imports_no_torch():
    result = _run("import sys, tensorplay, tensorplay.torch, tensorplay.cuda.graphs\n"
                  "print('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_a_bridge_function_without_torch_names_the_extra():
    # sys.modules["torch"] = None makes `import torch` fail as if PyTorch were not installed.
    result = _run("import sys\nsys.modules['torch'] = None\n"
                  "import tensorplay.torch\nfrom tensorplay import cuda\n"
                  "try:\n    tensorplay.torch.graph(cuda.CUDAGraph())\n"
                  "except ImportError as error:\n    print(error)\n")
    assert result.returncode == 0, result.stderr
    assert "tensorplay.torch needs PyTorch" in result.stdout
    assert "tensorplay[torch]" in result.stdout


def test_a_bridge_function_with_a_torch_that_does_not_load_says_so(tmp_path):
    # A PyTorch whose shared libraries are missing (an install cut short) raises OSError from
    # ctypes on import; the bridge turns it into the ImportError above, naming the cause.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "raise OSError('libtorch_global_deps.so: cannot open shared object file')\n")
    code = (f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
            "import tensorplay.torch\nfrom tensorplay import cuda\n"
            "try:\n    tensorplay.torch.graph(cuda.CUDAGraph())\n"
            "except ImportError as error:\n    print(error)\n")
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert "installed but does not load (libtorch_global_deps.so" in result.stdout
    assert "pip install --force-reinstall torch" in result.stdout

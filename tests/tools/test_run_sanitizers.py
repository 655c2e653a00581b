"""tools/run_sanitizers.py without a GPU: the test files it runs by default exist and hold GPU
tests, so that moving or renaming one cannot leave the sanitizer run quietly checking less."""
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "run_sanitizers.py"

# tools/ is a folder of scripts, not a package: load the script from its file.
_spec = importlib.util.spec_from_file_location("run_sanitizers", SCRIPT)
sanitizers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sanitizers)


def test_every_default_file_exists_and_holds_tests_marked_gpu():
    assert sanitizers.DEFAULT_FILES
    for name in sanitizers.DEFAULT_FILES:
        path = ROOT / name
        assert path.is_file(), f"run_sanitizers.py runs {name} by default, which does not exist"
        assert "pytest.mark.gpu" in path.read_text(), f"{name} holds no test marked gpu"


def test_an_unknown_tool_is_a_usage_error():
    run = subprocess.run([sys.executable, str(SCRIPT), "--tools", "memcheck,leakcheck"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 2
    assert "unknown tool 'leakcheck'" in run.stderr

"""Eval data (checksums, selection), answer extraction for each set, and the code sandbox."""

from __future__ import annotations

import os
import time

import pytest

from specpilot.evals import datasets as D
from specpilot.evals import extract as X
from specpilot.evals.sandbox import run_python


def test_data_present_and_checked():
    sizes = {"gsm8k": 1319, "humaneval": 164, "math500": 500, "mbpp": 500, "chat": 32}
    for name, n in sizes.items():
        assert D.find_file(name) is not None, name
        assert len(D.items(name)) == n  # mbpp: the test split, task_ids 11..510
    sel = D.select("mbpp", 3)
    assert [it["id"] for it in sel] == ["mbpp/11", "mbpp/12", "mbpp/13"]
    assert "Your code should pass these tests" in sel[0]["prompt"]
    assert D.select("gsm8k", 2)[1]["id"] == "gsm8k/1"


def test_checksum_mismatch_is_refused(tmp_path, monkeypatch):
    (tmp_path / "chat.jsonl").write_text('{"id": "chat/0", "prompt": "hi"}\n')
    monkeypatch.setenv("SPECPILOT_EVAL_DATA", str(tmp_path))
    with pytest.raises(ValueError, match="sha256"):
        D.load_rows("chat")


def test_gsm8k_extraction():
    ans = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs.\n#### 1,800"
    assert X.gsm8k_reference(ans) == "1,800"
    assert X.gsm8k_correct("so the answer is\n#### 1800", ans)
    assert X.gsm8k_correct("The total is \\boxed{1,800} dollars.", ans)
    assert X.gsm8k_correct("She makes $1800.", ans)  # last number, trailing '.'
    assert not X.gsm8k_correct("She makes 18 dollars, not 1800, but 17", ans)
    assert X.gsm8k_prediction("no numbers here") is None
    assert X.gsm8k_correct("#### 0.50", "#### .5")
    assert not X.gsm8k_correct("", ans)
    assert X.gsm8k_prediction("#### $18\nThat is 3 more than before.") == "18"   # a $ after ####
    assert X.gsm8k_correct("The total is \\boxed{1{,}800}.", ans)   # LaTeX thousands separator


def test_math500_extraction():
    assert X.last_boxed("a \\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert X.last_boxed("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}") == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert X.last_boxed("no box") is None
    assert X.math500_correct("so \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.", "\\left( 3, \\frac{\\pi}{2} \\right)")
    assert X.math500_correct("\\boxed{\\dfrac12}", "\\frac{1}{2}")
    assert X.math500_correct("\\boxed{0.5}", "\\frac{1}{2}")
    assert X.math500_correct("\\boxed{x = 5}", "5")
    assert X.math500_correct("\\boxed{90^\\circ}", "90")
    assert X.math500_correct("\\boxed{\\text{(C)}}", "\\text{(C)}")
    assert X.math500_correct("\\boxed{10\\%}", "10")
    assert X.math500_correct("\\boxed{\\sqrt2}", "\\sqrt{2}")
    assert not X.math500_correct("\\boxed{3}", "4")
    assert not X.math500_correct("the answer is 4", "4")  # no box, no answer
    # a reference with its unit matches the bare number (four of MATH-500's references)
    assert X.math500_correct("\\boxed{864}", "864 \\mbox{ inches}^2")
    assert X.math500_correct("\\boxed{5.4}", "5.4 \\text{ cents}")
    assert X.math500_correct("\\boxed{\\frac{270}{7}}", "\\frac{270}7\\text{ degrees}")
    assert not X.math500_correct("\\boxed{865}", "864 \\mbox{ inches}^2")


def test_code_extraction_and_programs():
    row = D.by_id("humaneval")["HumanEval/0"]["ref"]
    body = row["canonical_solution"]
    full = f"Here it is:\n```python\nfrom typing import List\n\ndef has_close_elements(numbers, threshold):\n{body}```\nDone."
    prog = X.humaneval_program(full, row)
    assert run_python(prog, timeout_s=10).passed
    assert run_python(X.humaneval_program(f"```python\n{body}```", row), timeout_s=10).passed  # body only
    assert not run_python(X.humaneval_program("```python\n    return True\n```", row), timeout_s=10).passed
    mrow = D.by_id("mbpp")["mbpp/11"]["ref"]
    good = X.mbpp_program(f"```python\n{mrow['code']}\n```", mrow)
    assert run_python(good, timeout_s=10).passed
    bad = X.mbpp_program("```python\ndef remove_Occ(s, ch):\n    return s\n```", mrow)
    assert run_python(bad, timeout_s=10).status == "failed"
    assert X.extract_code("plain code") == "plain code"


def test_sandbox_contains_loops_memory_and_writes(tmp_path):
    t0 = time.monotonic()
    r = run_python("while True:\n    pass\n", timeout_s=1.5)
    assert r.status == "timeout" and time.monotonic() - t0 < 10
    r = run_python("x = bytearray(3 << 30)\nprint('allocated')\n", memory_mb=256)
    assert r.status == "memory" and "allocated" not in r.stdout
    outside = tmp_path / "escaped.txt"
    for code in (f"open({str(outside)!r}, 'w').write('x')",
                 f"import pathlib; pathlib.Path({str(outside)!r}).write_text('x')",
                 f"import os; os.system('touch {outside}')",
                 f"import subprocess; subprocess.run(['touch', {str(outside)!r}])",
                 f"import os; os.open({str(outside)!r}, os.O_CREAT | os.O_WRONLY)",
                 "import ctypes; ctypes.CDLL(None)",
                 f"import shutil; shutil.rmtree({str(tmp_path)!r})"):
        r = run_python(code, timeout_s=10)
        assert r.status == "failed" and "PermissionError: sandbox" in r.stderr, code
    assert not outside.exists() and tmp_path.is_dir()
    r = run_python("import os\nopen('scratch.txt', 'w').write('ok')\nprint(os.getcwd())\n")
    assert r.passed  # writing inside its own folder is fine, and the folder is removed after
    assert not os.path.exists(r.stdout.strip())


def test_sandbox_exit_before_the_tests_fails():
    """A program that exits before its end (exit() in a main block, before the appended tests)
    fails, whatever its exit code; one that reaches its end passes."""
    tests = "\nassert f() == 2\n"
    for stop in ("exit()", "import sys; sys.exit(0)", "quit()", "raise SystemExit"):
        r = run_python(f"def f():\n    return 1\nif __name__ == '__main__':\n    {stop}\n{tests}")
        assert r.status == "failed" and "exited" in r.stderr, stop
    assert run_python("def f():\n    return 2\n" + tests).passed


def test_sandbox_endless_output_is_bounded():
    """Endless printing is stopped by the file-size limit on the child's output (not read into
    this process): it fails in well under its time limit, keeping the last lines."""
    t0 = time.monotonic()
    r = run_python("while True:\n    print('x' * 4096)\n", timeout_s=20)
    assert r.status == "failed" and time.monotonic() - t0 < 15
    assert "File too large" in r.stderr and "x" * 100 in r.stdout

"""Answer extraction and matching for the scored sets. Pure functions, no I/O.

gsm8k    reference: the number after the last '####' of the solution. Prediction, first found:
         the last '#### N', the last \\boxed{...}, the last number in the text. Numbers match
         when equal as exact fractions after dropping ',', '$', '%' and a trailing '.'.
math500  reference: the row's `answer`. Prediction: the content of the last \\boxed{...} (or
         \\fbox{...}), braces balanced; none -> no answer. Both sides are normalized (strip_math:
         spaces, \\left/\\right, \\dfrac/\\tfrac, \\text{...} units, degrees, '$', trailing '.',
         `x =` prefixes, \\frac12 -> \\frac{1}{2}, \\sqrt2 -> \\sqrt{2}, 0.5 == \\frac{1}{2} when
         both are plain numbers) and compared as strings, then as numbers.
code     extract_code: the first ```python (or bare ```) fenced block, else the whole text.
         humaneval_program / mbpp_program assemble what the sandbox runs.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Optional

_NUM = r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+"


def last_boxed(text: str) -> Optional[str]:
    """Content of the last \\boxed{...} or \\fbox{...} (nested braces kept), or None."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[start:i].strip()
    m = list(re.finditer(r"\\boxed ([^\s$]+)", text))  # \boxed 5
    return m[-1].group(1) if m else None


def to_fraction(s: str) -> Optional[Fraction]:
    s = s.strip().replace(",", "").replace("$", "").replace("%", "").rstrip(".").strip()
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def gsm8k_reference(answer: str) -> str:
    return answer.split("####")[-1].strip()


def gsm8k_prediction(text: str) -> Optional[str]:
    text = text.replace("{,}", ",")  # LaTeX thousands separator: 1{,}000
    hashes = re.findall(r"####\s*\\?\$?\s*(" + _NUM + ")", text)
    if hashes:
        return hashes[-1]
    boxed = last_boxed(text)
    if boxed is not None:
        nums = re.findall(_NUM, boxed.replace("\\!", ""))
        if nums:
            return nums[-1]
    nums = re.findall(_NUM, text)
    return nums[-1] if nums else None


def gsm8k_correct(text: str, answer: str) -> bool:
    pred = gsm8k_prediction(text)
    a, b = (to_fraction(pred) if pred else None), to_fraction(gsm8k_reference(answer))
    return a is not None and b is not None and a == b


def _fix_fracs(s: str) -> str:
    # \frac12 -> \frac{1}{2}; \frac1{2} -> \frac{1}{2}; \frac{1}2 -> \frac{1}{2}
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", s)
    return re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", s)


def strip_math(s: str) -> str:
    """Normalize a LaTeX answer for string comparison (Hendrycks-style, simplified)."""
    s = s.strip().replace("\n", "").replace("\\!", "")
    s = re.sub(r"\\left|\\right", "", s)
    s = s.replace("dfrac", "frac").replace("tfrac", "frac")
    s = s.replace("^\\circ", "").replace("^{\\circ}", "").replace("\\circ", "").replace("°", "")
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    s = re.sub(r"(\d)\s*\\(?:text|mbox)\{\s*[a-zA-Z ]+\}(\^\{?\d\}?)?$", r"\1", s)  # 5\text{ cm}^2 -> 5
    s = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\(?:mbox|mathrm|textbf)\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\[,;: ]", "", s)
    s = re.sub(r"^[a-zA-Z]\s*=", "", s)  # x = 5 -> 5
    s = re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", s)
    s = s.replace(" ", "")
    s = _fix_fracs(s)
    s = s.rstrip(".")
    if re.fullmatch(r"-?\d+/\d+", s):
        n, d = s.split("/")
        s = f"\\frac{{{n}}}{{{d}}}"
    if s.startswith("."):
        s = "0" + s
    s = re.sub(r"(\d),(\d\d\d)", r"\1\2", s)  # 1,000 -> 1000
    return s


def _as_number(s: str) -> Optional[Fraction]:
    m = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(\d+)\}", s)
    if m:
        v = Fraction(int(m.group(2)), int(m.group(3)))
        return -v if m.group(1) else v
    return to_fraction(s) if re.fullmatch(r"-?\d+(?:\.\d+)?", s) else None


def math_equal(pred: Optional[str], ref: str) -> bool:
    if pred is None:
        return False
    a, b = strip_math(pred), strip_math(ref)
    if a == b:
        return True
    na, nb = _as_number(a), _as_number(b)
    return na is not None and na == nb


def math500_correct(text: str, answer: str) -> bool:
    return math_equal(last_boxed(text), answer)


def extract_code(text: str) -> str:
    """The first ```python fenced block (else the first ``` block, else the text itself)."""
    m = re.search(r"```(?:python|py|Python)[^\n]*\n(.*?)(?:```|$)", text, re.S)
    if m is None:
        m = re.search(r"```[^\n]*\n(.*?)(?:```|$)", text, re.S)
    return (m.group(1) if m else text).strip("\n")


def humaneval_program(completion: str, row: dict) -> str:
    """Prompt + completion (a whole function when it defines entry_point, else a body) + tests."""
    code = extract_code(completion)
    entry = row["entry_point"]
    if re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.M):
        body = row["prompt"] + "    pass\n\n" + code  # the prompt's imports, then the model's def
    else:
        lines = code.splitlines()
        if lines and not lines[0].startswith((" ", "\t")):
            lines = ["    " + l for l in lines]
        body = row["prompt"] + "\n".join(lines)
    return f"{body}\n\n{row['test']}\n\ncheck({entry})\n"


def mbpp_program(completion: str, row: dict) -> str:
    code = extract_code(completion)
    tests = "\n".join(row["test_list"])
    return f"{row.get('test_setup_code') or ''}\n{code}\n\n{tests}\n"

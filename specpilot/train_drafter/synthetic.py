"""Synthetic training prompts written here (no benchmark text), for variety beyond gsm8k/mbpp.

Six families, each rendered exactly like the eval prompt it imitates (specpilot.evals.datasets):
  word         templated arithmetic word problems (gsm8k-like)        + STEP_BY_STEP
  algebra      short plain-text algebra / arithmetic questions        + STEP_BY_STEP
  competition  competition-style math in LaTeX ($...$, \\frac, \\sqrt, \\dbinom, matrices, ...):
               algebra, number theory, counting & probability, geometry, precalculus,
               intermediate algebra and prealgebra templates with random parameters, rendered
               like a math500 prompt (problem + "\\n" + STEP_BY_STEP)
  code         "Write a Python function that ..." (mbpp-like), asks for a ```python block
  humaneval    a Python signature (typing imports, or untyped) with a docstring holding a
               description and >>> examples computed by a reference implementation, wrapped
               like a humaneval prompt ("Complete the following Python function. ...")
  explain      "Explain X in simple terms." style questions
Every template and task description is written here; only the format of math500/humaneval is
imitated, never their problems (tests check that no eval item's text appears).

`synthetic_prompts(n, seed)` -> n items {"id": "synthetic/<i>", "source": "synthetic", "prompt"},
deterministic for a given (n, seed), and the first k items do not depend on n. Item i belongs to
family SCHEDULE[i % len(SCHEDULE)] (`family_of(i)`): per cycle of 20, 6 competition, 6 humaneval,
3 word, 2 code, 2 algebra, 1 explain -- weighted towards the two formats that the real training
prompts (gsm8k, mbpp) do not cover; every family appears among the first 6 items.
"""

from __future__ import annotations

import math
import random
import re
import textwrap
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from specpilot.evals.datasets import STEP_BY_STEP, _item

NAMES = ["Ava", "Ben", "Carla", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas",
         "Kemi", "Liam", "Mei", "Noah", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tara"]
ITEMS = [("apples", "bag"), ("pencils", "box"), ("cookies", "tray"), ("books", "shelf"),
         ("marbles", "jar"), ("stickers", "sheet"), ("eggs", "carton"), ("cards", "deck")]
WORD_PROBLEMS = [
    "{a} buys {x} {it} every day for {d} days and gives away {y} of them in total. "
    "How many {it} does {a} have left?",
    "A {box} holds {x} {it}. {a} has {d} full {box}s and {y} loose {it}. "
    "How many {it} does {a} have in all?",
    "{a} earns ${x} per hour and works {d} hours a week. After spending ${y} each week, "
    "how much does {a} save in 4 weeks?",
    "{a} reads {x} pages on Monday and {d} times as many on Tuesday. The book has {y} more "
    "pages than that. How many pages does the book have?",
    "A train travels {x} miles per hour for {d} hours, then {y} miles more. "
    "How far does it travel in total?",
    "{a} and {b} share {x} {it}. {a} gets {d} more than {b}. How many {it} does {b} get?",
    "A shop sells {it} at ${d} each. {a} buys {y} of them and pays with ${x}0. "
    "How much change does {a} get?",
    "{a} runs {d} km on each of {x} days and walks {y} km on the rest of the week. "
    "How many km does {a} cover in the week?",
]
ALGEBRA = [
    "Solve for x: {a}x + {b} = {c}.",
    "What is the sum of the first {n} positive integers?",
    "Find the remainder when {c} is divided by {a}.",
    "Simplify ({a}x + {b}) - ({d}x - {c}).",
    "What is {a}% of {c}?",
    "A rectangle has perimeter {c} and width {a}. What is its area?",
    "Compute the greatest common divisor of {c} and {e}.",
    "How many positive divisors does {e} have?",
]
CODE_TASKS = [
    "reverses the words in a sentence", "checks whether a string is a palindrome",
    "returns the n-th Fibonacci number", "counts the vowels in a string",
    "merges two sorted lists into one sorted list", "removes duplicates from a list keeping order",
    "returns the second largest number in a list", "checks whether a number is prime",
    "flattens a nested list", "computes the factorial of n iteratively",
    "returns the most common character in a string", "rotates a list by k positions",
    "converts a decimal number to binary", "finds the longest word in a sentence",
    "computes the running sum of a list", "groups words by their first letter",
    "transposes a matrix given as a list of lists", "counts the words in a text",
    "checks whether two strings are anagrams",
    "returns the indices of two numbers that sum to a target",
    "computes the dot product of two vectors", "capitalizes the first letter of every word",
    "finds the missing number in a list of 1..n", "returns all pairs in a list with a given sum",
    "computes the median of a list", "checks whether brackets in a string are balanced",
    "splits a list into chunks of size k", "returns the digits of a number as a list",
    "finds the maximum depth of a nested list", "returns the union of two lists without duplicates",
    "computes the sum of squares of the odd numbers in a list",
    "sorts a list of tuples by the second item",
]
TOPICS = ["photosynthesis", "how a hash table works", "recursion", "the water cycle",
          "compound interest", "binary search", "why the sky is blue", "prime numbers",
          "how vaccines work", "big-O notation", "the Pythagorean theorem", "supply and demand",
          "object-oriented programming", "gravity", "the difference between a list and a tuple",
          "probability of independent events", "how a CPU cache helps", "fractions"]


def _math(rng: random.Random) -> str:
    a, b = rng.sample(NAMES, 2)
    it, box = rng.choice(ITEMS)
    x, d, y = rng.randint(3, 60), rng.randint(2, 12), rng.randint(1, 40)
    return rng.choice(WORD_PROBLEMS).format(a=a, b=b, it=it, box=box, x=x, d=d, y=y)


def _algebra(rng: random.Random) -> str:
    return rng.choice(ALGEBRA).format(a=rng.randint(2, 12), b=rng.randint(1, 30),
                                      c=rng.randint(20, 400), d=rng.randint(1, 9),
                                      e=rng.randint(12, 360), n=rng.randint(10, 200))


def _code(rng: random.Random) -> str:
    task = rng.choice(CODE_TASKS)
    style = rng.choice(["Write a Python function that {t}.",
                        "Write a Python function that {t}. Include a short docstring.",
                        "Implement a Python function that {t}, and show one example call."])
    return style.format(t=task) + "\nReply with the Python code in a ```python code block."


def _explain(rng: random.Random) -> str:
    return rng.choice(["Explain {t} in simple terms.", "Give a short explanation of {t}.",
                       "What is {t}? Answer in a few sentences."]).format(t=rng.choice(TOPICS))


# ---------------------------------------------------------------- competition math (LaTeX)
# Each template is a function rng -> problem text; `<name>` placeholders are filled by _fill.

COMPETITION: list[tuple[str, Callable[[random.Random], str]]] = []  # (subject, template)


def _comp(subject: str):
    def register(fn):
        COMPETITION.append((subject, fn))
        return fn
    return register


def _fill(template: str, **vals) -> str:
    """Replace every <name> in a LaTeX template by str(vals[name])."""
    return re.sub(r"<([a-z]\w*)>", lambda m: str(vals[m.group(1)]), template)


def _poly(coeffs, var: str = "x") -> str:
    """LaTeX of a polynomial, coefficients from the highest degree down: [2, -3, 0, 1] ->
    2x^3 - 3x^2 + 1."""
    deg, terms = len(coeffs) - 1, []
    for i, c in enumerate(coeffs):
        p = deg - i
        if c == 0:
            continue
        mag = abs(c)
        body = str(mag) if p == 0 else ("" if mag == 1 else str(mag)) + var + (
            "" if p == 1 else f"^{p}" if p < 10 else f"^{{{p}}}")
        terms.append(("-" if c < 0 else "+", body))
    if not terms:
        return "0"
    out = ("-" if terms[0][0] == "-" else "") + terms[0][1]
    return out + "".join(f" {s} {b}" for s, b in terms[1:])


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _angle(k: int, m: int) -> str:
    """k*pi/m in lowest terms as LaTeX."""
    f = Fraction(k, m)
    num = "" if f.numerator == 1 else str(f.numerator)
    if f.denominator == 1:
        return num + r"\pi"
    return r"\frac{" + num + r"\pi}{" + str(f.denominator) + "}"


def _nonzero(rng: random.Random, lo: int, hi: int) -> int:
    return rng.choice([v for v in range(lo, hi + 1) if v != 0])


def _quadratic_with_roots(rng: random.Random, lead=(1, 1, 2, 3)) -> str:
    a, r1, r2 = rng.choice(lead), rng.randint(-9, 9), rng.randint(-9, 9)
    return _poly([a, -a * (r1 + r2), a * r1 * r2])


# algebra ------------------------------------------------------------------------------------
@_comp("algebra")
def _linear_equation(rng):
    a, c = rng.sample(range(2, 13), 2)
    return _fill(r"Solve $<lhs> = <rhs>$ for $x$.",
                 lhs=_poly([a, rng.randint(-20, 20)]), rhs=_poly([c, rng.randint(-20, 20)]))


@_comp("algebra")
def _function_value(rng):
    k, m = rng.sample(range(-6, 7), 2)
    f = _poly([_nonzero(rng, -5, 5), rng.randint(-9, 9), rng.randint(-12, 12)])
    return _fill(r"Given $f(x) = <f>$, compute $f(<k>) - f(<m>)$.", f=f, k=k, m=m)


@_comp("algebra")
def _sum_of_solutions(rng):
    return _fill(r"What is the sum of all values of $x$ for which $<q> = 0$?",
                 q=_quadratic_with_roots(rng))


@_comp("algebra")
def _exponent_rules(rng):
    a, m, n = rng.randint(2, 7), rng.randint(2, 9), rng.randint(2, 9)
    return _fill(r"What is the value of $x$ if $\frac{<a>^{<m>} \cdot <a>^{<n>}}{<a>^{<k>}} = "
                 r"<a>^{x}$?", a=a, m=m, n=n, k=rng.randint(1, m + n + 4))


@_comp("algebra")
def _y_intercept(rng):
    x1, x2 = rng.sample(range(-8, 9), 2)
    return _fill(r"The line through $(<x1>, <y1>)$ and $(<x2>, <y2>)$ meets the $y$-axis at "
                 r"$(0, b)$. What is $b$? Express your answer as a common fraction if necessary.",
                 x1=x1, x2=x2, y1=rng.randint(-8, 8), y2=rng.randint(-8, 8))


@_comp("algebra")
def _simplify_radical(rng):
    a, b = rng.randint(2, 12), rng.choice([2, 3, 5, 6, 7, 10, 11, 13, 14, 15, 17, 19, 21, 22])
    return _fill(r"Write $\sqrt{<n>}$ in the form $a\sqrt{b}$, where $a$ and $b$ are positive "
                 r"integers and $b$ is not divisible by the square of any prime. What is $a + b$?",
                 n=a * a * b)


@_comp("algebra")
def _no_solution_system(rng):
    return _fill("For which value of $k$ does the system\n\\begin{align*}\n<a>x + <b>y &= <c>, "
                 "\\\\\n<d>x + ky &= <e>\n\\end{align*}\nhave no solutions? Express your answer "
                 "as a common fraction if necessary.", a=rng.randint(2, 9), b=rng.randint(2, 9),
                 c=rng.randint(1, 30), d=rng.randint(2, 9), e=rng.randint(1, 30))


@_comp("algebra")
def _difference_of_squares(rng):
    return _fill(r"Real numbers $u$ and $v$ satisfy $u + v = <s>$ and $u - v = <d>$. "
                 r"Compute $u^2 - v^2$.", s=rng.randint(10, 99), d=rng.randint(2, 30))


@_comp("algebra")
def _reciprocal_equation(rng):
    return _fill(r"Solve for $x$: $\frac{<a>}{x} + \frac{<b>}{<c>x} = <d>$. Express your answer "
                 r"as a common fraction.", a=rng.randint(1, 9), b=rng.randint(1, 9),
                 c=rng.randint(2, 6), d=rng.randint(2, 9))


@_comp("algebra")
def _arithmetic_term(rng):
    a1, step = rng.randint(-20, 30), _nonzero(rng, -9, 9)
    return _fill(r"What is the <nth> term of the arithmetic sequence $<a1>, <a2>, <a3>, \ldots$?",
                 nth=_ordinal(rng.randint(10, 60)), a1=a1, a2=a1 + step, a3=a1 + 2 * step)


@_comp("algebra")
def _composition(rng):
    return _fill(r"Let $g(x) = <g>$ and $h(x) = <h>$. Find $g(h(<k>)) - h(g(<m>))$.",
                 g=_poly([rng.randint(2, 6), rng.randint(-9, 9)]),
                 h=_poly([1, 0, rng.randint(-9, 9)]), k=rng.randint(-4, 4), m=rng.randint(-4, 4))


@_comp("algebra")
def _domain(rng):
    return _fill(r"For which real numbers $x$ is $y = \frac{<a>}{\sqrt{<b> - x}} + "
                 r"\sqrt{x + <c>}$ defined? Express your answer in interval notation.",
                 a=rng.randint(1, 9), b=rng.randint(2, 20), c=rng.randint(1, 20))


@_comp("algebra")
def _complete_the_square(rng):
    p = _nonzero(rng, -9, 9)
    return _fill(r"Completing the square turns $<quad>$ into $(x - h)^2 + k$. Compute $hk$.",
                 quad=_poly([1, 2 * p, rng.randint(-30, 30)]))


@_comp("algebra")
def _count_integers_in_range(rng):
    lo = rng.randint(-40, 10)
    return _fill(r"How many integers $n$ satisfy $<lo> \le <expr> < <hi>$?", lo=lo,
                 hi=lo + rng.randint(15, 80), expr=_poly([rng.randint(2, 7), rng.randint(-10, 10)],
                                                        "n"))


@_comp("algebra")
def _exponential_equation(rng):
    base = rng.randint(2, 5)
    return _fill(r"Find $x$ such that $<b>^{<m>x - <k>} = <v>$. Express your answer as a common "
                 r"fraction if necessary.", b=base, m=rng.randint(2, 5), k=rng.randint(1, 9),
                 v=base ** rng.randint(2, 5))


@_comp("algebra")
def _linear_system(rng):
    x0, y0 = rng.randint(-9, 9), rng.randint(-9, 9)
    a, b, d, e = (rng.randint(2, 9) for _ in range(4))
    return _fill(r"If $<a>x - <b>y = <c>$ and $<d>x + <e>y = <f>$, what is the ordered pair "
                 r"$(x, y)$?", a=a, b=b, c=a * x0 - b * y0, d=d, e=e, f=d * x0 + e * y0)


@_comp("algebra")
def _difference_of_roots(rng):
    return _fill(r"What is the positive difference between the two solutions of $<q> = 0$?",
                 q=_quadratic_with_roots(rng))


@_comp("algebra")
def _floor_ceiling(rng):
    return _fill(r"Evaluate $\left\lceil \frac{<a>}{<b>} \right\rceil + \left\lfloor "
                 r"-\frac{<c>}{<d>} \right\rfloor$.", a=rng.randint(10, 99), b=rng.randint(3, 9),
                 c=rng.randint(10, 99), d=rng.randint(3, 9))


# number theory ------------------------------------------------------------------------------
@_comp("number theory")
def _power_mod(rng):
    return _fill(r"Let $N = <a>^{<e>}$. What remainder does $N$ leave upon division by $<m>$?",
                 a=rng.randint(2, 19), e=rng.randint(20, 2025), m=rng.randint(5, 13))


@_comp("number theory")
def _gcd_plus_lcm(rng):
    g = rng.randint(2, 30)
    u, v = rng.sample(range(2, 16), 2)
    return _fill(r"Compute $\gcd(<a>, <b>) + \operatorname{lcm}(<c>, <d>)$.", a=g * u, b=g * v,
                 c=rng.randint(4, 60), d=rng.randint(4, 60))


@_comp("number theory")
def _divisors_that_are_multiples(rng):
    return _fill(r"Let $N = 2^{<p>} \cdot 3^{<q>} \cdot 5^{<s>}$. How many positive divisors of "
                 r"$N$ are multiples of $<k>$?", p=rng.randint(1, 6), q=rng.randint(1, 5),
                 s=rng.randint(1, 4), k=rng.choice([2, 3, 4, 5, 6, 9, 10, 15, 30]))


@_comp("number theory")
def _units_digit(rng):
    a, b = rng.sample(range(2, 20), 2)
    return _fill(r"Determine the units digit of $<a>^{<e>} + <b>^{<f>}$.", a=a, b=b,
                 e=rng.randint(10, 999), f=rng.randint(10, 999))


@_comp("number theory")
def _to_base(rng):
    return _fill(r"Write the decimal number $<n>$ in base $<b>$.", n=rng.randint(20, 999),
                 b=rng.randint(2, 9))


@_comp("number theory")
def _from_base(rng):
    b = rng.randint(3, 9)
    digits = str(rng.randint(1, b - 1)) + "".join(str(rng.randint(0, b - 1))
                                                  for _ in range(rng.randint(2, 4)))
    return _fill(r"The number $<n>_{<b>}$ is written in base $<b>$. What is its value in base "
                 r"$10$?", n=digits, b=b)


@_comp("number theory")
def _chinese_remainder(rng):
    m1, m2 = rng.choice([(m, k) for m in range(3, 16) for k in range(m + 1, 16)
                         if math.gcd(m, k) == 1])
    return _fill(r"Find the smallest positive integer $n$ with $n \equiv <r1> \pmod{<m1>}$ and "
                 r"$n \equiv <r2> \pmod{<m2>}$.", r1=rng.randint(1, m1 - 1), m1=m1,
                 r2=rng.randint(1, m2 - 1), m2=m2)


@_comp("number theory")
def _modular_inverse(rng):
    p = rng.choice([7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47])
    return _fill(r"Compute $<a>^{-1} \pmod{<p>}$, giving a residue between $0$ and $<q>$, "
                 r"inclusive.", a=rng.randint(2, p - 1), p=p, q=p - 1)


@_comp("number theory")
def _sum_of_prime_factors(rng):
    n = 1
    for p in rng.sample([2, 3, 5, 7, 11, 13, 17, 19, 23], rng.randint(2, 4)):
        n *= p ** rng.randint(1, 3)
    return _fill(r"Let $N = <n>$. Find the sum of all primes $p$ that divide $N$.", n=n)


@_comp("number theory")
def _exactly_one_divisor(rng):
    a, b = rng.sample([2, 3, 4, 5, 6, 7, 9, 11], 2)
    return _fill(r"How many of the integers $1, 2, 3, \ldots, <n>$ are divisible by $<a>$ or by "
                 r"$<b>$, but not by both?", n=rng.randint(50, 500), a=a, b=b)


@_comp("number theory")
def _repeating_decimal(rng):
    width = rng.choice([2, 3])
    return _fill(r"The repeating decimal $0.\overline{<d>}$ equals $\frac{m}{n}$, where $m$ and "
                 r"$n$ are relatively prime positive integers. What is $m + n$?",
                 d=str(rng.randint(1, 10 ** width - 2)).zfill(width))


@_comp("number theory")
def _count_residues(rng):
    m = rng.randint(3, 13)
    return _fill(r"How many positive <kind> integers leave a remainder of $<r>$ when divided by "
                 r"$<m>$?", kind=rng.choice(["two-digit", "three-digit"]),
                 r=rng.randint(1, m - 1), m=m)


# counting & probability ---------------------------------------------------------------------
@_comp("counting & probability")
def _pascal_identity(rng):
    n = rng.randint(6, 20)
    k = rng.randint(1, n - 2)
    return _fill(r"Evaluate $\dbinom{<n>}{<k>} + \dbinom{<n>}{<k1>}$, and write the result as a "
                 r"single binomial coefficient $\dbinom{a}{b}$ with $b \le \frac{a}{2}$. What is "
                 r"$a + b$?", n=n, k=k, k1=k + 1)


@_comp("counting & probability")
def _committee(rng):
    return _fill(r"A club has $<n>$ members, one of whom is the <role>. In how many ways can a "
                 r"$<k>$-person committee that includes the <role> be chosen?",
                 n=rng.randint(8, 25), k=rng.randint(3, 6),
                 role=rng.choice(["treasurer", "secretary", "captain", "founder"]))


@_comp("counting & probability")
def _dice_sum(rng):
    s = rng.choice([4, 6, 8, 10, 12, 20])
    return _fill(r"A pair of fair dice, each with faces numbered $1$ through $<s>$, is tossed. "
                 r"What is the probability that the two numbers shown add up to $<t>$? Express "
                 r"your answer as a common fraction.", s=s, t=rng.randint(3, 2 * s - 1))


WORDS_WITH_REPEATS = ["BANANA", "COFFEE", "LETTER", "PEPPER", "BALLOON", "CANNON", "SUCCESS",
                      "TATTOO", "GAZEBO", "ELEMENT", "PARABOLA", "RACECAR", "ABACUS", "NOODLE",
                      "MAMMAL", "COCOA", "BOOKKEEPER", "ASSESS", "ALGEBRA", "GEOMETRY"]


@_comp("counting & probability")
def _arrangements(rng):
    return _fill(r"How many distinguishable rearrangements of the letters in $\text{<w>}$ are "
                 r"there?", w=rng.choice(WORDS_WITH_REPEATS))


@_comp("counting & probability")
def _same_color(rng):
    c1, c2 = rng.sample(["red", "blue", "green", "white", "black", "yellow"], 2)
    return _fill(r"A bag holds $<a>$ <c1> marbles and $<b>$ <c2> marbles. Two marbles are drawn "
                 r"at random without replacement. What is the probability that they are the same "
                 r"color? Express your answer as a common fraction.", a=rng.randint(2, 12),
                 b=rng.randint(2, 12), c1=c1, c2=c2)


@_comp("counting & probability")
def _coin_tosses(rng):
    n = rng.randint(4, 12)
    return _fill(r"We toss a fair coin $<n>$ times. What is the probability that heads appears "
                 r"exactly $<k>$ times? Express your answer as a common fraction.", n=n,
                 k=rng.randint(1, n - 1))


@_comp("counting & probability")
def _photo_line(rng):
    a, b = rng.sample(NAMES, 2)
    return _fill(r"A group of $<n>$ friends, among them <a> and <b>, lines up in a single row for "
                 r"a photograph. In how many orders can they line up if <a> must stand somewhere "
                 r"to the left of <b>, but not directly beside <b>?", n=rng.randint(4, 9), a=a, b=b)


@_comp("counting & probability")
def _lattice_paths(rng):
    a, b = rng.randint(3, 8), rng.randint(3, 8)
    return _fill(r"How many lattice paths from $(0,0)$ to $(<a>,<b>)$ use only unit steps to the "
                 r"right or up and pass through the point $(<c>,<d>)$?", a=a, b=b,
                 c=rng.randint(1, a - 1), d=rng.randint(1, b - 1))


@_comp("counting & probability")
def _binomial_coefficient(rng):
    n = rng.randint(4, 9)
    return _fill(r"Find the coefficient of the $x^{<k>}$ term when $\left(<lin>\right)^{<n>}$ is "
                 r"expanded.", k=rng.randint(1, n - 1), n=n,
                 lin=_poly([rng.randint(1, 4), _nonzero(rng, -5, 5)]))


@_comp("counting & probability")
def _digit_codes(rng):
    return _fill(r"A code of $<s>$ digits is formed from the digits $0$ through $9$, and no digit "
                 r"may be used twice. How many such codes <cond>?", s=rng.randint(3, 6),
                 cond=rng.choice(["begin with an odd digit", "end with an even digit",
                                  "contain the digit $7$", "do not begin with $0$"]))


@_comp("counting & probability")
def _even_product(rng):
    return _fill(r"Two different numbers are chosen at random from the set $\{1, 2, \ldots, "
                 r"<n>\}$. What is the probability that their product is even? Express your "
                 r"answer as a common fraction.", n=rng.randint(6, 30))


# geometry -----------------------------------------------------------------------------------
@_comp("geometry")
def _hypotenuse(rng):
    return _fill(r"The two shorter sides of a right triangle measure $<a>$ and $<b>$ units. How "
                 r"long is the third side, in units? Express your answer in simplest radical "
                 r"form.", a=rng.randint(2, 15), b=rng.randint(2, 15))


@_comp("geometry")
def _circle_area_to_circumference(rng):
    return _fill(r"A circle has area $<k>\pi$ square units. What is its <what>, in units? "
                 r"Express your answer in terms of $\pi$.", k=rng.randint(2, 15) ** 2,
                 what=rng.choice(["circumference", "circumference", "diameter"]))


@_comp("geometry")
def _exterior_angle(rng):
    a = rng.randint(20, 110)
    return _fill(r"In triangle $ABC$, $\angle A = <a>^\circ$ and $\angle B = <b>^\circ$. What "
                 r"is the measure, in degrees, of the exterior angle of the triangle at vertex "
                 r"$C$?", a=a, b=rng.randint(15, 165 - a))


@_comp("geometry")
def _polygon_diagonals(rng):
    n = rng.choice([5, 6, 8, 9, 10, 12, 15, 18, 20, 24, 30, 36])
    return _fill(r"A regular polygon has interior angles of $<ang>^\circ$ each. How many "
                 r"diagonals does it have?", ang=180 * (n - 2) // n)


@_comp("geometry")
def _space_diagonal(rng):
    return _fill(r"A rectangular box measures $<a>$ by $<b>$ by $<c>$. What is the length of a "
                 r"segment joining two opposite corners of the box? Express your answer in "
                 r"simplest radical form.", a=rng.randint(1, 12), b=rng.randint(1, 12),
                 c=rng.randint(1, 12))


@_comp("geometry")
def _triangle_area(rng):
    while True:
        pts = [(rng.randint(-8, 8), rng.randint(-8, 8)) for _ in range(3)]
        (x1, y1), (x2, y2), (x3, y3) = pts
        if (x2 - x1) * (y3 - y1) - (x3 - x1) * (y2 - y1) != 0:
            break
    return _fill(r"Triangle $PQR$ has vertices $P = (<x1>, <y1>)$, $Q = (<x2>, <y2>)$, and "
                 r"$R = (<x3>, <y3>)$. What is the area of triangle $PQR$?",
                 x1=x1, y1=y1, x2=x2, y2=y2, x3=x3, y3=y3)


@_comp("geometry")
def _cylinder_and_cone(rng):
    return _fill(r"A cylinder has radius $<r>$ and height $<h>$, and a cone has the same base as "
                 r"the cylinder and height $<c>$. Their combined volume is $k\pi$ cubic units. "
                 r"Find $k$.", r=rng.randint(2, 9), h=rng.randint(2, 12), c=rng.randint(3, 15))


@_comp("geometry")
def _similar_triangles(rng):
    a1 = rng.randint(3, 30)
    return _fill(r"Two similar triangles have areas $<a1>$ and $<a2>$ square units. The shortest "
                 r"side of the smaller triangle is $<s>$ units long. How long, in units, is the "
                 r"shortest side of the larger triangle?", a1=a1, a2=a1 * rng.randint(2, 5) ** 2,
                 s=rng.randint(2, 12))


@_comp("geometry")
def _chord_distance(rng):
    rad = rng.randint(5, 20)
    return _fill(r"A chord of length $<c>$ lies in a circle of radius $<r>$. What is the distance "
                 r"from the center of the circle to the chord? Express your answer in simplest "
                 r"radical form if necessary.", c=rng.randint(2, 2 * rad - 1), r=rad)


@_comp("geometry")
def _heron(rng):
    while True:
        a, b, c = sorted(rng.randint(3, 20) for _ in range(3))
        if a + b > c:
            break
    return _fill(r"The sides of a triangle have lengths $<a>$, $<b>$, and $<c>$. Find the area "
                 r"of the triangle. Express your answer in simplest radical form if necessary.",
                 a=a, b=b, c=c)


# precalculus --------------------------------------------------------------------------------
@_comp("precalculus")
def _matrix_vector(rng):
    v = {k: rng.randint(-9, 9) for k in "abcdef"}
    return _fill(r"Compute $\begin{pmatrix} <a> & <b> \\ <c> & <d> \end{pmatrix} "
                 r"\begin{pmatrix} <e> \\ <f> \end{pmatrix}$.", **v)


@_comp("precalculus")
def _determinant_power(rng):
    v = {k: rng.randint(-6, 6) for k in "abcd"}
    return _fill(r"Let $\mathbf{A} = \begin{pmatrix} <a> & <b> \\ <c> & <d> \end{pmatrix}$. Find "
                 r"$\det (\mathbf{A}^{<n>})$.", n=rng.randint(2, 5), **v)


@_comp("precalculus")
def _polar_to_rectangular(rng):
    m = rng.choice([3, 4, 6])
    k = rng.choice([k for k in range(1, 2 * m) if math.gcd(k, m) == 1])
    return _fill(r"A point has polar coordinates $\left( <r>, <t> \right)$. What are its "
                 r"rectangular coordinates $(x, y)$?", r=rng.randint(2, 10), t=_angle(k, m))


@_comp("precalculus")
def _double_angle(rng):
    m = rng.choice([8, 12])
    t = _angle(rng.choice([k for k in range(1, m) if math.gcd(k, m) == 1]), m)
    return _fill(r"Find the exact value of $\cos^2 <t> - \sin^2 <t>$.", t=t)


@_comp("precalculus")
def _dot_product(rng):
    v = {k: rng.randint(-7, 7) for k in "abcdef"}
    return _fill(r"Let $\mathbf{u} = \begin{pmatrix} <a> \\ <b> \\ <c> \end{pmatrix}$ and "
                 r"$\mathbf{v} = \begin{pmatrix} <d> \\ <e> \\ <f> \end{pmatrix}$. Compute "
                 r"$\mathbf{u} \cdot \mathbf{v} + \|\mathbf{u}\|^2$.", **v)


@_comp("precalculus")
def _complex_product(rng):
    v = {k: rng.randint(2, 9) for k in "abcd"}
    return _fill(r"Compute $(<a> + <b>i)(<c> - <d>i)$, where $i^2 = -1$.", **v)


@_comp("precalculus")
def _period(rng):
    return _fill(r"What is the period of the function $y = <a>\sin (<b>x) + <c>\cos (<d>x)$?",
                 a=rng.randint(2, 5), b=rng.randint(2, 6), c=rng.randint(2, 5),
                 d=rng.randint(2, 6))


@_comp("precalculus")
def _orthogonal_vectors(rng):
    return _fill(r"The vectors $\begin{pmatrix} <a> \\ <b> \end{pmatrix}$ and "
                 r"$\begin{pmatrix} <c> \\ k \end{pmatrix}$ are orthogonal. Find $k$.",
                 a=rng.randint(-9, 9), b=_nonzero(rng, -9, 9), c=rng.randint(-9, 9))


@_comp("precalculus")
def _tangent_angle(rng):
    return _fill(r"Find the angle $\theta$ with $0 \le \theta < 2\pi$ such that $\tan \theta = "
                 r"<v>$ and <cond>.",
                 v=rng.choice(["1", "-1", r"\sqrt{3}", r"-\sqrt{3}", r"\frac{\sqrt{3}}{3}",
                               r"-\frac{1}{\sqrt{3}}"]),
                 cond=rng.choice([r"$\sin \theta < 0$", r"$\cos \theta < 0$",
                                  r"$\sin \theta > 0$", r"$\cos \theta > 0$"]))


# intermediate algebra -----------------------------------------------------------------------
@_comp("intermediate algebra")
def _sum_of_squares_of_roots(rng):
    return _fill(r"Let $r$ and $s$ be the roots of $<q> = 0$. Find $r^2 + s^2$.",
                 q=_poly([1, _nonzero(rng, -12, 12), _nonzero(rng, -20, 20)]))


@_comp("intermediate algebra")
def _remainder_theorem(rng):
    deg = rng.randint(3, 6)
    coeffs = [_nonzero(rng, -4, 4)] + [rng.choice([0, 0] + list(range(-7, 8)))
                                       for _ in range(deg)]
    return _fill(r"What remainder results from dividing $<p>$ by $<d>$?", p=_poly(coeffs),
                 d=_poly([1, _nonzero(rng, -4, 4)]))


@_comp("intermediate algebra")
def _minimum_of_quadratic(rng):
    return _fill(r"As $x$ ranges over the real numbers, what is the smallest value taken by "
                 r"$<q>$?",
                 q=_poly([rng.randint(1, 6), _nonzero(rng, -20, 20), rng.randint(-30, 30)]))


@_comp("intermediate algebra")
def _recurrence(rng):
    return _fill(r"A sequence is defined by $a_1 = <a>$ and $a_{n+1} = <m>a_n - <k>$ for "
                 r"$n \ge 1$. Find $a_{<n>}$.", a=rng.randint(1, 9), m=rng.randint(2, 3),
                 k=rng.randint(1, 9), n=rng.randint(5, 8))


@_comp("intermediate algebra")
def _telescoping_sum(rng):
    return _fill(r"Evaluate $\displaystyle\sum_{k=1}^{<n>} \frac{1}{k(k+<d>)}$ and express the "
                 r"result as a common fraction.", n=rng.randint(5, 50), d=rng.randint(1, 3))


@_comp("intermediate algebra")
def _absolute_value_equation(rng):
    return _fill(r"Find all real $x$ such that $|<lin>| = <c>$. Enter all the solutions, "
                 r"separated by commas.", lin=_poly([rng.randint(2, 7), _nonzero(rng, -15, 15)]),
                 c=rng.randint(1, 20))


@_comp("intermediate algebra")
def _monic_cubic(rng):
    return _fill(r"The cubic $p(x) = x^3 + bx^2 + cx + d$ has roots $<r1>$, $<r2>$, and $<r3>$. "
                 r"What is $p(<k>)$?", r1=rng.randint(-6, 6), r2=rng.randint(-6, 6),
                 r3=rng.randint(-6, 6), k=rng.randint(-5, 7))


@_comp("intermediate algebra")
def _geometric_series(rng):
    a, q = rng.randint(1, 20), rng.randint(2, 6)
    return _fill(r"Find the sum of the infinite geometric series $<a> + \frac{<a>}{<q1>} + "
                 r"\frac{<a>}{<q2>} + \frac{<a>}{<q3>} + \cdots$.", a=a, q1=q, q2=q ** 2,
                 q3=q ** 3)


@_comp("intermediate algebra")
def _constrained_maximum(rng):
    return _fill(r"Positive real numbers $x$ and $y$ satisfy $x + y = <s>$. What is the largest "
                 r"possible value of $<expr>$?", s=rng.randint(3, 30),
                 expr=rng.choice(["x^2 y", "xy", "x y^3", "x^2 y^2"]))


@_comp("intermediate algebra")
def _rational_inequality(rng):
    return _fill(r"Solve the inequality $\frac{<num>}{<den>} \ge 0$. Give your answer in interval "
                 r"notation.", num=_poly([1, _nonzero(rng, -9, 9)]),
                 den=_poly([1, _nonzero(rng, -9, 9)]))


@_comp("intermediate algebra")
def _log_equation(rng):
    return _fill(r"Find all real solutions of $\log_{<b>} x + \log_{<b>} (x + <k>) = <e>$.",
                 b=rng.randint(2, 5), k=rng.randint(1, 12), e=rng.randint(1, 4))


@_comp("intermediate algebra")
def _inverse_function(rng):
    return _fill(r"If $f(x) = \frac{<num>}{<den>}$, what is $f^{-1}(<k>)$?",
                 num=_poly([rng.randint(1, 7), rng.randint(-9, 9)]),
                 den=_poly([rng.randint(1, 5), _nonzero(rng, -9, 9)]), k=rng.randint(-5, 9))


@_comp("intermediate algebra")
def _reciprocal_roots(rng):
    return _fill(r"Let $r_1$, $r_2$, and $r_3$ be the roots of $<p> = 0$. Compute "
                 r"$\frac{1}{r_1} + \frac{1}{r_2} + \frac{1}{r_3}$.",
                 p=_poly([rng.randint(1, 5), rng.randint(-9, 9), rng.randint(-9, 9),
                          _nonzero(rng, -12, 12)]))


# prealgebra ---------------------------------------------------------------------------------
@_comp("prealgebra")
def _fraction_arithmetic(rng):
    v = {k: rng.randint(1, 9) for k in "ace"}
    v.update({k: rng.randint(2, 12) for k in "bdf"})
    return _fill(r"What is $\frac{<a>}{<b>} + \frac{<c>}{<d>} - \frac{<e>}{<f>}$? Express your "
                 r"answer as a fraction in lowest terms.", **v)


@_comp("prealgebra")
def _mean_after_removal(rng):
    n, m = rng.randint(5, 12), rng.randint(10, 60)
    m2 = m + rng.randint(-5, 5)
    while n * m - (n - 1) * m2 <= 0:
        m2 -= 1
    return _fill(r"The mean of $<n>$ numbers is $<m>$. After one of the numbers is removed, the "
                 r"mean of the remaining numbers is $<m2>$. What number was removed?",
                 n=n, m=m, m2=m2)


@_comp("prealgebra")
def _successive_percent(rng):
    return _fill(r"The price of a <item> is raised by $<p>\%$, and the new price is then lowered "
                 r"by $<q>\%$. By what percent does the final price differ from the original "
                 r"price?", item=rng.choice(["jacket", "lamp", "bicycle", "painting"]),
                 p=5 * rng.randint(1, 10), q=5 * rng.randint(1, 10))


@_comp("prealgebra")
def _lcm_of_three(rng):
    a, b, c = rng.sample(range(4, 49), 3)
    return _fill(r"Find $\operatorname{lcm}(<a>, <b>, <c>)$.", a=a, b=b, c=c)


@_comp("prealgebra")
def _percent_of_percent(rng):
    return _fill(r"What is $<p>\%$ of $<q>\%$ of $<n>$?", p=5 * rng.randint(1, 19),
                 q=5 * rng.randint(1, 19), n=20 * rng.randint(1, 50))


def _competition(rng: random.Random) -> str:
    """A competition-style math problem, rendered like a math500 prompt."""
    problem = rng.choice(COMPETITION)[1](rng)
    return _item("math500", 0, {"problem": problem, "unique_id": "synthetic"})["prompt"]


# ---------------------------------------------------------------- humaneval-style completion
# Each task: names to choose from, typed parameters, return type, a description written here,
# a reference implementation (it computes the >>> example outputs) and an argument generator.

@dataclass(frozen=True)
class CodeTask:
    names: tuple
    params: tuple  # ((name, annotation), ...)
    ret: str
    desc: str
    fn: Callable
    gen: Callable[[random.Random], tuple]


TYPING_NAMES = ("Dict", "List", "Optional", "Tuple")
SHORT_WORDS = ["apple", "river", "stone", "cloud", "tiger", "lamp", "orange", "echo", "idea",
               "umbrella", "sun", "map", "garden", "ink", "owl", "table", "yellow", "bridge", "a",
               "is", "under", "quiet", "engine", "north", "piano", "art", "bee", "kite"]


def _ints(rng, lo=-9, hi=9, n1=0, n2=7) -> list:
    return [rng.randint(lo, hi) for _ in range(rng.randint(n1, n2))]


def _words(rng, n1=1, n2=6) -> list:
    return [rng.choice(SHORT_WORDS) for _ in range(rng.randint(n1, n2))]


def _sentence(rng, n1=1, n2=6) -> str:
    return " ".join(_words(rng, n1, n2))


def _mixed_text(rng) -> str:
    parts = [rng.choice([w, w.capitalize(), w.upper()]) for w in _words(rng, 1, 4)]
    parts += [str(rng.randint(0, 99)) for _ in range(rng.randint(0, 2))]
    rng.shuffle(parts)
    return rng.choice([" ", ", ", "-", "! "]).join(parts)


def _runs(rng) -> str:
    return "".join(rng.choice("abcxyz") * rng.randint(1, 4) for _ in range(rng.randint(0, 4)))


def _interleave(a, b):
    out = [x for pair in zip(a, b) for x in pair]
    return out + a[len(b):] + b[len(a):]


def _first_repeat(text):
    seen = set()
    for ch in text:
        if ch in seen:
            return ch
        seen.add(ch)
    return None


def _sum_by_key(pairs):
    out = {}
    for k, v in pairs:
        out[k] = out.get(k, 0) + v
    return out


def _letter_counts(text):
    out = {}
    for ch in text.lower():
        if ch.isalpha():
            out[ch] = out.get(ch, 0) + 1
    return out


def _dedupe_casefold(words):
    seen, out = set(), []
    for w in words:
        if w.lower() not in seen:
            seen.add(w.lower())
            out.append(w)
    return out


def _swap_neighbours(values):
    out = list(values)
    for i in range(0, len(out) - 1, 2):
        out[i], out[i + 1] = out[i + 1], out[i]
    return out


def _groups(seq):
    out = []
    for x in seq:
        if out and out[-1][0] == x:
            out[-1][1] += 1
        else:
            out.append([x, 1])
    return out


def _matrix(rng, square=False):
    rows = rng.randint(1, 4)
    cols = rows if square else rng.randint(1, 4)
    return [[rng.randint(-5, 9) for _ in range(cols)] for _ in range(rows)]


def _bounds(rng):
    lo = rng.randint(-5, 3)
    return lo, lo + rng.randint(1, 8)


_L = "List[int]"
HUMANEVAL_TASKS = [
    CodeTask(("count_negatives", "negative_count"), (("values", _L),), "int",
             "Return how many numbers in the list are strictly less than zero.",
             lambda values: sum(x < 0 for x in values), lambda r: (_ints(r),)),
    CodeTask(("prefix_sums", "cumulative_totals"), (("values", _L),), _L,
             "Return a list whose i-th element is the sum of the first i + 1 elements of "
             "values.", lambda values: [sum(values[:i + 1]) for i in range(len(values))],
             lambda r: (_ints(r),)),
    CodeTask(("interleave_lists", "alternate_merge"), (("first", _L), ("second", _L)), _L,
             "Build a new list by taking one element from first, then one from second, and so "
             "on. When one of the lists runs out, append what is left of the other one.",
             _interleave, lambda r: (_ints(r, 0, 9, 0, 4), _ints(r, 0, 9, 0, 4))),
    CodeTask(("digit_spread", "digit_range"), (("n", "int"),), "int",
             "Given a non-negative integer n, return the difference between its largest and its "
             "smallest decimal digit.",
             lambda n: int(max(str(n))) - int(min(str(n))), lambda r: (r.randint(0, 99999),)),
    CodeTask(("run_length_encode", "compress_runs"), (("text", "str"),), "str",
             "Compress a string by replacing every maximal run of one repeated character with "
             "that character followed by the length of the run.",
             lambda text: "".join(f"{c}{k}" for c, k in _groups(text)), lambda r: (_runs(r),)),
    CodeTask(("adjacent_differences", "consecutive_gaps"), (("values", _L),), _L,
             "Return the difference between each element and the element before it. The "
             "result has one element fewer than the input; a list with fewer than two elements "
             "gives an empty list.", lambda values: [b - a for a, b in zip(values, values[1:])],
             lambda r: (_ints(r),)),
    CodeTask(("first_repeated_char", "earliest_repeat"), (("text", "str"),), "Optional[str]",
             "Return the first character of text that has already appeared earlier in the "
             "string, or None when all characters are different.", _first_repeat,
             lambda r: (r.choice([_sentence(r, 1, 2), "".join(r.sample("abcdefgh", 5))]),)),
    CodeTask(("index_of_largest", "position_of_max"), (("values", "List[float]"),), "int",
             "Return the position of the largest value in a non-empty list. If the largest "
             "value occurs more than once, return the position where it occurs first.",
             lambda values: values.index(max(values)),
             lambda r: ([r.randint(-20, 20) / 2 for _ in range(r.randint(1, 6))],)),
    CodeTask(("chunk_list", "split_into_chunks"), (("values", _L), ("size", "int")),
             "List[List[int]]",
             "Split values into consecutive pieces of length size (a positive integer). The "
             "last piece may be shorter than size.",
             lambda values, size: [values[i:i + size] for i in range(0, len(values), size)],
             lambda r: (_ints(r, 0, 9, 0, 8), r.randint(1, 4))),
    CodeTask(("count_long_words", "words_longer_than"), (("sentence", "str"), ("k", "int")),
             "int", "Count the words of a sentence (words are separated by spaces) that have "
             "more than k letters.", lambda sentence, k: sum(len(w) > k for w in sentence.split()),
             lambda r: (_sentence(r), r.randint(1, 6))),
    CodeTask(("merge_sorted_lists", "merge_two_sorted"), (("a", _L), ("b", _L)), _L,
             "Both input lists are sorted in increasing order. Return a single sorted list "
             "that contains all elements of both lists.", lambda a, b: sorted(a + b),
             lambda r: (sorted(_ints(r, 0, 20, 0, 4)), sorted(_ints(r, 0, 20, 0, 4)))),
    CodeTask(("clamp_all", "clip_values"), (("values", _L), ("low", "int"), ("high", "int")),
             _L, "Replace every number smaller than low by low and every number larger than "
             "high by high; all other numbers stay unchanged.",
             lambda values, low, high: [min(max(x, low), high) for x in values],
             lambda r: (_ints(r, -9, 12, 1, 6), *_bounds(r))),
    CodeTask(("mirror_string", "append_reversed"), (("text", "str"),), "str",
             "Return the text followed by the same text written backwards.",
             lambda text: text + text[::-1], lambda r: (r.choice(SHORT_WORDS + [""]),)),
    CodeTask(("word_lengths", "lengths_of_words"), (("sentence", "str"),), _L,
             "Return the number of letters of every word in the sentence, in order. Words are "
             "separated by spaces.", lambda sentence: [len(w) for w in sentence.split()],
             lambda r: (_sentence(r),)),
    CodeTask(("sum_by_key", "total_per_key"), (("pairs", "List[Tuple[str, int]]"),),
             "Dict[str, int]",
             "Given a list of (key, amount) pairs, return a dictionary that maps each key to "
             "the sum of its amounts. Keys appear in the order in which they are first seen.",
             _sum_by_key,
             lambda r: ([(r.choice("abxy"), r.randint(1, 9)) for _ in range(r.randint(0, 5))],)),
    CodeTask(("letter_counts", "count_letters"), (("text", "str"),), "Dict[str, int]",
             "Count how often each letter occurs in text, ignoring case and skipping every "
             "character that is not a letter. The keys are lowercase letters, in order of first "
             "appearance.", _letter_counts, lambda r: (_mixed_text(r)[:14],)),
    CodeTask(("invert_mapping", "swap_keys_and_values"), (("mapping", "Dict[str, int]"),),
             "Dict[int, str]",
             "Return a new dictionary in which every value of mapping becomes a key whose value "
             "is the original key. The values of mapping are all different.",
             lambda mapping: {v: k for k, v in mapping.items()},
             lambda r: (dict(zip(r.sample(SHORT_WORDS, 3), r.sample(range(10), 3))),)),
    CodeTask(("has_adjacent_duplicates", "repeats_side_by_side"), (("values", _L),), "bool",
             "Return True if two neighbouring elements of the list are equal and False "
             "otherwise.", lambda values: any(a == b for a, b in zip(values, values[1:])),
             lambda r: (_ints(r, 0, 4, 0, 6),)),
    CodeTask(("alternating_sum", "plus_minus_total"), (("values", _L),), "int",
             "Add up the elements at even positions and subtract the elements at odd positions "
             "(positions are counted from 0).",
             lambda values: sum(x if i % 2 == 0 else -x for i, x in enumerate(values)),
             lambda r: (_ints(r),)),
    CodeTask(("longest_plateau", "longest_equal_run"), (("values", _L),), "int",
             "Return the length of the longest block of consecutive equal elements. An empty "
             "list gives 0.", lambda values: max((k for _, k in _groups(values)), default=0),
             lambda r: (_ints(r, 0, 3, 0, 8),)),
    CodeTask(("manhattan_distance", "taxicab_distance"),
             (("p", "Tuple[int, int]"), ("q", "Tuple[int, int]")), "int",
             "Return the grid distance between two points: the absolute difference of their x "
             "coordinates plus the absolute difference of their y coordinates.",
             lambda p, q: abs(p[0] - q[0]) + abs(p[1] - q[1]),
             lambda r: ((r.randint(-9, 9), r.randint(-9, 9)), (r.randint(-9, 9),
                                                               r.randint(-9, 9)))),
    CodeTask(("strip_digits", "without_digits"), (("text", "str"),), "str",
             "Return text with every digit character removed.",
             lambda text: "".join(c for c in text if not c.isdigit()),
             lambda r: (_mixed_text(r),)),
    CodeTask(("format_pairs", "key_value_strings"), (("keys", "List[str]"), ("values", _L)),
             "List[str]", "Combine two lists of equal length into strings of the form "
             "'key=value'.", lambda keys, values: [f"{k}={v}" for k, v in zip(keys, values)],
             lambda r: ((lambda n: (r.sample(SHORT_WORDS, n), _ints(r, 0, 99, n, n)))(
                 r.randint(0, 3)))),
    CodeTask(("count_multiples", "multiples_of_k"), (("values", _L), ("k", "int")), "int",
             "Return how many elements of values are divisible by the positive integer k.",
             lambda values, k: sum(x % k == 0 for x in values),
             lambda r: (_ints(r, 0, 30), r.randint(2, 5))),
    CodeTask(("product_of_nonzero", "nonzero_product"), (("values", _L),), "int",
             "Multiply together all elements of values that are not zero. If there are no such "
             "elements, return 1.", lambda values: math.prod(x for x in values if x),
             lambda r: (_ints(r, -3, 5, 0, 5),)),
    CodeTask(("rotate_left", "shift_left"), (("values", _L), ("k", "int")), _L,
             "Move the first k elements of the list to its end, keeping their order. k may be "
             "larger than the length of the list; an empty list stays empty.",
             lambda values, k: values[k % len(values):] + values[:k % len(values)] if values
             else [], lambda r: (_ints(r, 0, 9, 0, 6), r.randint(0, 8))),
    CodeTask(("longest_words", "all_longest_words"), (("words", "List[str]"),), "List[str]",
             "Return every word whose length equals the greatest word length in the non-empty "
             "list, in their original order.",
             lambda words: [w for w in words if len(w) == max(map(len, words))],
             lambda r: (_words(r, 1, 6),)),
    CodeTask(("vowel_positions", "vowel_indices"), (("text", "str"),), _L,
             "Return the indices of all vowels (a, e, i, o and u, in either case) in text.",
             lambda text: [i for i, c in enumerate(text) if c.lower() in "aeiou"],
             lambda r: (_mixed_text(r)[:12],)),
    CodeTask(("reverse_each_word", "backwards_words"), (("sentence", "str"),), "str",
             "Reverse the letters of every word in the sentence while keeping the words in "
             "their original order. Words are separated by single spaces.",
             lambda sentence: " ".join(w[::-1] for w in sentence.split(" ")),
             lambda r: (_sentence(r, 1, 4),)),
    CodeTask(("nested_total", "sum_of_rows"), (("rows", "List[List[int]]"),), "int",
             "Return the sum of all numbers in a list of lists of integers.",
             lambda rows: sum(map(sum, rows)),
             lambda r: ([_ints(r, -5, 9, 0, 3) for _ in range(r.randint(0, 3))],)),
    CodeTask(("column_sums", "sum_columns"), (("matrix", "List[List[int]]"),), _L,
             "The matrix is given as a non-empty list of rows of equal length. Return the sum "
             "of each column.", lambda matrix: [sum(col) for col in zip(*matrix)],
             lambda r: (_matrix(r),)),
    CodeTask(("main_diagonal", "diagonal_entries"), (("matrix", "List[List[int]]"),), _L,
             "Return the entries matrix[0][0], matrix[1][1], ... of a square matrix given as a "
             "list of rows.", lambda matrix: [matrix[i][i] for i in range(len(matrix))],
             lambda r: (_matrix(r, square=True),)),
    CodeTask(("matching_positions", "count_same_positions"), (("a", "str"), ("b", "str")),
             "int", "Count the positions i at which a[i] == b[i], looking only at positions that "
             "exist in both strings.", lambda a, b: sum(x == y for x, y in zip(a, b)),
             lambda r: (r.choice(SHORT_WORDS), r.choice(SHORT_WORDS))),
    CodeTask(("sign_string", "signs_of"), (("values", _L),), "str",
             "Describe the sign of every number with one character: '+' for a positive number, "
             "'-' for a negative one and '0' for zero.",
             lambda values: "".join("+" if x > 0 else "-" if x < 0 else "0" for x in values),
             lambda r: (_ints(r, -3, 3),)),
    CodeTask(("percent_change", "relative_change"), (("old", "float"), ("new", "float")),
             "float", "Return the percentage change from old to new, rounded to one decimal "
             "place. old is never zero.", lambda old, new: round((new - old) / old * 100, 1),
             lambda r: (float(r.randint(1, 200)), float(r.randint(0, 300)))),
    CodeTask(("split_by_parity", "evens_and_odds"), (("values", _L),),
             "Tuple[List[int], List[int]]",
             "Return a tuple (evens, odds): the even elements and the odd elements of values, "
             "each in their original order.",
             lambda values: ([x for x in values if x % 2 == 0], [x for x in values if x % 2]),
             lambda r: (_ints(r, 0, 20),)),
    CodeTask(("has_repeated_digit", "digit_appears_twice"), (("n", "int"),), "bool",
             "Return True if some decimal digit occurs at least twice in the non-negative "
             "integer n, and False otherwise.", lambda n: len(set(str(n))) < len(str(n)),
             lambda r: (r.randint(0, 99999),)),
    CodeTask(("join_nonempty", "glue_parts"), (("parts", "List[str]"), ("sep", "str")), "str",
             "Join the strings in parts with sep between them, skipping the empty strings.",
             lambda parts, sep: sep.join(p for p in parts if p),
             lambda r: ([r.choice(SHORT_WORDS + ["", ""]) for _ in range(r.randint(0, 5))],
                        r.choice([", ", "-", "/", " | ", ""]))),
    CodeTask(("widest_gap", "largest_step"), (("values", _L),), "int",
             "After sorting values, return the largest difference between two neighbouring "
             "numbers. A list with fewer than two elements gives 0.",
             lambda values: max((b - a for a, b in zip(sorted(values), sorted(values)[1:])),
                                default=0), lambda r: (_ints(r, 0, 50),)),
    CodeTask(("count_blocks_of_ones", "ones_groups"), (("bits", "str"),), "int",
             "bits is a string made of the characters '0' and '1'. Return the number of "
             "maximal groups of consecutive '1' characters.",
             lambda bits: sum(c == "1" for c, _ in _groups(bits)),
             lambda r: ("".join(r.choice("01") for _ in range(r.randint(0, 10))),)),
    CodeTask(("zero_pad", "pad_with_zeros"), (("values", _L), ("width", "int")), "List[str]",
             "Turn every non-negative number into a string padded on the left with zeros to at "
             "least width characters.", lambda values, width: [str(x).zfill(width) for x in values],
             lambda r: (_ints(r, 0, 999, 0, 4), r.randint(1, 5))),
    CodeTask(("middle_element", "center_item"), (("values", _L),), "Optional[int]",
             "Return the middle element of a list of odd length. For a list of even length, "
             "including the empty list, return None.",
             lambda values: values[len(values) // 2] if len(values) % 2 else None,
             lambda r: (_ints(r),)),
    CodeTask(("unique_ignoring_case", "dedupe_words"), (("words", "List[str]"),), "List[str]",
             "Drop every word that already appeared earlier in the list when upper and lower "
             "case are not distinguished. The first spelling of each word is kept.",
             _dedupe_casefold,
             lambda r: ([r.choice([w, w.upper(), w.capitalize()]) for w in _words(r, 0, 6)],)),
    CodeTask(("weighted_total", "dot_with_weights"), (("values", _L), ("weights", _L)), "int",
             "Return the sum of values[i] * weights[i] over all positions i. Both lists have "
             "the same length.",
             lambda values, weights: sum(a * b for a, b in zip(values, weights)),
             lambda r: (lambda n: (_ints(r, -5, 9, n, n), _ints(r, 0, 5, n, n)))(r.randint(0, 4))),
    CodeTask(("make_acronym", "initials_of"), (("phrase", "str"),), "str",
             "Return the first letters of the words of phrase, in upper case, joined together.",
             lambda phrase: "".join(w[0].upper() for w in phrase.split()),
             lambda r: (_sentence(r, 1, 5),)),
    CodeTask(("count_vowel_start", "words_starting_with_vowel"), (("sentence", "str"),), "int",
             "Count the words of the sentence whose first letter is a vowel (a, e, i, o or u), "
             "ignoring case.", lambda sentence: sum(w[0].lower() in "aeiou"
                                                    for w in sentence.split()),
             lambda r: (_sentence(r),)),
    CodeTask(("window_sums", "sliding_sums"), (("values", _L), ("k", "int")), _L,
             "Return the sums of all runs of k adjacent elements, from left to right. If k is "
             "larger than the length of the list, return an empty list.",
             lambda values, k: [sum(values[i:i + k]) for i in range(len(values) - k + 1)],
             lambda r: (_ints(r, 0, 9, 0, 6), r.randint(1, 4))),
    CodeTask(("swap_neighbours", "swap_in_pairs"), (("values", _L),), _L,
             "Swap the elements at positions 0 and 1, at positions 2 and 3, and so on. If the "
             "length is odd, the last element stays where it is.", _swap_neighbours,
             lambda r: (_ints(r, 0, 9),)),
    CodeTask(("count_char_kinds", "classify_characters"), (("text", "str"),),
             "Tuple[int, int, int]",
             "Return a tuple (letters, digits, others) with the number of letters, the number "
             "of digits and the number of all remaining characters in text.",
             lambda text: (sum(c.isalpha() for c in text), sum(c.isdigit() for c in text),
                           sum(not c.isalnum() for c in text)), lambda r: (_mixed_text(r),)),
    CodeTask(("keep_between", "filter_range"), (("values", _L), ("low", "int"), ("high", "int")),
             _L, "Return the elements x of values with low <= x <= high, in their original "
             "order.", lambda values, low, high: [x for x in values if low <= x <= high],
             lambda r: (_ints(r, -9, 12, 0, 7), *_bounds(r))),
]

# what precedes the code in a humaneval prompt ("Complete the following ... ```python\n")
HUMANEVAL_PREFIX = _item("humaneval", 0, {"task_id": "", "prompt": ""})["prompt"][:-3]


def humaneval_code(task: CodeTask, rng: random.Random) -> str:
    """The code of a humaneval-style prompt: imports, signature and a docstring whose >>>
    examples are computed with the task's reference implementation."""
    name = rng.choice(task.names)
    if rng.random() < 0.75:
        sig = ", ".join(f"{p}: {ann}" for p, ann in task.params) + f") -> {task.ret}"
        used = [t for t in TYPING_NAMES if re.search(rf"\b{t}\[", sig)]
        head = f"from typing import {', '.join(used)}\n\n\n" if used else "\n\n"
    else:  # untyped, as in the later humaneval problems
        sig, head = ", ".join(p for p, _ in task.params) + ")", "\n\n"
    calls, seen = [], set()
    for _ in range(12):
        args = task.gen(rng)
        call = f"{name}({', '.join(repr(a) for a in args)})"
        if call not in seen:
            seen.add(call)
            calls.append((call, repr(task.fn(*args))))
        if len(calls) == 3 or (len(calls) == 2 and rng.random() < 0.5):
            break
    desc = textwrap.wrap(task.desc, 80)
    layout = rng.randrange(3)
    if layout == 0:
        doc = ['""" ' + desc[0]] + desc[1:]
    elif layout == 1:
        doc = ['"""' + desc[0]] + desc[1:] + ["", "For example:"]
    else:
        doc = ['"""'] + desc + ["Examples:"]
    for call, out in calls:
        doc += [f">>> {call}", out]
    doc.append('"""')
    body = "\n".join("    " + line if line else "" for line in doc)
    return f"{head}def {name}({sig}:\n{body}\n"


def _humaneval(rng: random.Random) -> str:
    code = humaneval_code(rng.choice(HUMANEVAL_TASKS), rng)
    return _item("humaneval", 0, {"task_id": "synthetic", "prompt": code})["prompt"]


# ---------------------------------------------------------------- the mix

FAMILIES: dict[str, Callable[[random.Random], str]] = {
    "word": lambda rng: f"{_math(rng)}\n{STEP_BY_STEP}",
    "algebra": lambda rng: f"{_algebra(rng)}\n{STEP_BY_STEP}",
    "competition": _competition,
    "code": _code,
    "humaneval": _humaneval,
    "explain": _explain,
}
# one cycle: 6 competition, 6 humaneval, 3 word, 2 code, 2 algebra, 1 explain; all six first
SCHEDULE = ("competition", "humaneval", "word", "code", "algebra", "explain",
            "competition", "humaneval", "word", "competition", "humaneval", "code",
            "competition", "humaneval", "algebra", "word", "competition", "humaneval",
            "competition", "humaneval")


def family_of(i: int) -> str:
    """The family of synthetic item i."""
    return SCHEDULE[i % len(SCHEDULE)]


def synthetic_prompts(n: int, seed: int = 0) -> list[dict]:
    """n prompts, item i of family family_of(i) (see SCHEDULE); seeded, prefix-stable in n."""
    rng = random.Random(f"specpilot-synthetic-{seed}")
    return [{"id": f"synthetic/{i}", "source": "synthetic", "prompt": FAMILIES[family_of(i)](rng)}
            for i in range(n)]

"""Synthetic training prompts written here (no benchmark text): templated arithmetic word
problems, algebra, short coding tasks and explanations, for variety beyond gsm8k/mbpp.

`synthetic_prompts(n, seed)` -> n items {"id": "synthetic/<i>", "source": "synthetic", "prompt"},
deterministic for a given (n, seed). Math prompts end with the same step-by-step instruction
the scorer appends, code prompts ask for a ```python block, as the scorer's prompts do.
"""

from __future__ import annotations

import random

from specpilot.evals.datasets import STEP_BY_STEP

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


def synthetic_prompts(n: int, seed: int = 0) -> list[dict]:
    """n prompts: 35% word problems, 25% algebra, 30% code, 10% explanations (seeded)."""
    rng = random.Random(f"specpilot-synthetic-{seed}")
    out = []
    for i in range(n):
        u = rng.random()
        if u < 0.35:
            text = f"{_math(rng)}\n{STEP_BY_STEP}"
        elif u < 0.60:
            text = f"{_algebra(rng)}\n{STEP_BY_STEP}"
        elif u < 0.90:
            text = _code(rng)
        else:
            text = _explain(rng)
        out.append({"id": f"synthetic/{i}", "source": "synthetic", "prompt": text})
    return out

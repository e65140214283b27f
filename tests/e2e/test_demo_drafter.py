"""The shipped demo drafter (specpilot/assets/smollm2-135m-dflash) on the real demo target, CPU
fp32: `stock` equals `ar` token for token, and its real acceptance length stays above a floor,
so a broken drafter loader, feature capture or accept rule shows up here (an untrained drafter
gives tau ~1.0; the shipped drafter, session 22's run Q (run 24), measures 3.25 on the gsm8k
prompts and 2.82 on the math500 ones; run P's reached 3.15 and 2.74, run N's 3.25 and 2.78, run
M's 3.15 and 2.78, run 18's 3.15 and 2.67, run 16's 3.10 and 2.78, run 13's 3.25 and 2.74, run
5's 2.59 and 2.43)."""

from pathlib import Path

import pytest

from transformers import AutoTokenizer

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from specpilot.settings import ASSETS_DIR
from specpilot.train_drafter.prompts import eval_prompts, render

TAU_FLOOR = 2.4
DRAFTER = ASSETS_DIR / "smollm2-135m-dflash"
DATA = Path(__file__).resolve().parents[2] / "data" / "evals"


@pytest.mark.parametrize("split", ["gsm8k-heldout", "math500"])  # never trained on
def test_shipped_drafter_acceptance_floor(demo_model_dir, split):
    tok = AutoTokenizer.from_pretrained(demo_model_dir)
    items = eval_prompts(str(DATA), split, 4)
    ps = [render(tok, it["prompt"]) for it in items]
    sp = SamplingParams(temperature=0, max_new_tokens=48)
    common = dict(model_path=demo_model_dir, device="cpu", dtype="float32", max_total_tokens=4096)
    ref = OfflineEngine(ServerArgs(**common)).generate(ps, sp)
    outs = OfflineEngine(ServerArgs(**common, speculative_draft_model_path=str(DRAFTER))).generate(
        ps, sp)
    assert [o.output_ids for o in outs] == [r.output_ids for r in ref]
    tau = sum(o.completion_tokens for o in outs) / sum(o.meta["spec_verify_ct"] for o in outs)
    assert tau >= TAU_FLOOR, f"acceptance length {tau:.2f} fell below {TAU_FLOOR}"

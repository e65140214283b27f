"""Every accept length 0..B-1 is exercised: an oracle proposer drafts the target's own greedy
continuation with a mismatch planted at a chosen slot, and the worker must accept exactly the
drafts before it, emit the ar output, and report the counts in meta_info."""

import torch

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from specpilot.spec.propose import Proposal
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny

B, NEW = 6, 60
PROMPTS = [[11, 12, 13], [40, 41, 42, 43, 44, 45, 46], [7]]


def test_every_accept_length(tmp_path):
    target = make_tiny("qwen3", tmp_path / "t")
    drafter = make_drafter("dflash", tmp_path / "d")
    sp = SamplingParams(temperature=0, max_new_tokens=NEW, ignore_eos=True)
    ar = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024))
    ref = [p + o.output_ids for p, o in zip(PROMPTS, ar.generate(PROMPTS, sp))]
    eng = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024,
                                   speculative_draft_model_path=drafter,
                                   speculative_num_draft_tokens=B))
    worker = eng.worker
    planned, seen = [], []

    def oracle(drafter_, hidden, anchors, sb, wb):
        toks = []
        for i, (row, s) in enumerate(zip(wb.req_pool_indices, wb.prefix_lens)):
            k = (len(planned) + i) % B  # mismatch at slot k; k == B-1: none
            seq = ref[row]  # rows are handed out in arrival order here
            d = [seq[s + 1 + j] if s + 1 + j < len(seq) else 0 for j in range(B - 1)]
            if k < B - 1:
                d[k] = (d[k] + 1) % 256
            toks.append(d)
            planned.append(k)
        return Proposal(torch.tensor(toks), None)

    worker.proposer = oracle
    original = worker._decode

    def record(wb):
        out = original(wb)
        seen.extend(out.num_accepted)
        return out

    worker._decode = record
    outs = eng.generate(PROMPTS, sp)
    assert [p + o.output_ids for p, o in zip(PROMPTS, outs)] == ref
    # accepted == planted mismatch slot, except where the reference ran out (end of request)
    assert set(seen) == set(range(B))
    assert sum(a == k for a, k in zip(seen, planned)) >= len(seen) - len(PROMPTS)
    for o in outs:
        m = o.meta
        assert m["spec_num_proposed_drafts"] == m["spec_verify_ct"] * (B - 1)
        assert m["spec_accept_length"] == len(o.output_ids) / m["spec_verify_ct"]
        assert abs(m["spec_accept_rate"] - m["spec_num_correct_drafts"]
                   / m["spec_num_proposed_drafts"]) < 1e-12
    st = eng.scheduler.stats()  # server-wide figures (/get_server_info, /metrics)
    assert st["spec_verify_ct"] == len(seen) == sum(o.meta["spec_verify_ct"] for o in outs)
    assert st["spec_num_correct_drafts"] == sum(seen)
    assert st["avg_spec_accept_length"] == (sum(seen) + len(seen)) / len(seen)
    assert st["spec_accepted_per_position"] == [sum(a > j for a in seen) for j in range(B - 1)]

"""`python -m specpilot.train_drafter`: data preparation, then the training loop.

main(argv) -> exit code. Phases, all bounded by --max-minutes (measured from start):
  1. load the target (bf16 on CUDA, fp32 on CPU; frozen) and its tokenizer;
  2. training prompts (prompts.py: the split) rendered with the chat template; the target's greedy
     continuations, cached under --work-dir (data.py), within gen_fraction of the budget;
  3. drafter config (mask token chosen from the data unless given), fresh or resumed drafter;
  4. AdamW steps (warmup + cosine/linear decay; bf16 autocast on CUDA), a trainer state and an
     export every --save-every steps and at the end; stops cleanly before the budget ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from datetime import datetime, timezone

import torch
from tqdm.auto import tqdm

from specpilot.train_drafter import checkpoint, data, prompts
from specpilot.train_drafter.batching import SequenceSampler, make_batch
from specpilot.train_drafter.cli import parse_args
from specpilot.train_drafter.model import (count_parameters, drafter_config, forward_loss,
                                           lr_at, new_drafter)



def target_dtype(device: torch.device) -> torch.dtype:
    """The target's dtype for features and data generation: bf16 on CUDA, else fp32."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def load_target(path: str, device: torch.device):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=target_dtype(device))
    model = model.to(device).eval()
    model.requires_grad_(False)
    return model


def make_generator(backend: str, target_path: str, device: torch.device, batch_size: int,
                   max_len: int, max_new_tokens: int, eos, pad, hf_model=None,
                   min_admit: int = 1):
    """The continuation generator of --gen-backend: transformers `generate` on `hf_model`
    (loaded here when not given), or our engine, which loads its own copy of the weights (so
    none is loaded here for it) and admits requests in batches of min_admit (--gen-admit)."""
    if backend == "hf":
        model = hf_model if hf_model is not None else load_target(target_path, device)
        return data.HFGenerator(model, max_new_tokens, eos, pad)
    dtype = "bfloat16" if target_dtype(device) == torch.bfloat16 else "float32"
    return data.EngineGenerator(target_path, device.type, dtype, batch_size, max_len,
                                max_new_tokens, min_admit)


def _generator(args, target, eos, pad):
    if args.gen_fraction == 0 and not args.generate_only:
        return None  # train on the caches only
    return make_generator(args.gen_backend, args.target, next(target.parameters()).device,
                          args.gen_batch_size, args.max_len, args.max_new_tokens, eos, pad,
                          hf_model=target, min_admit=args.gen_admit)


def prepare_data(args, target, tokenizer, deadline):
    """-> (samples, data info for train_meta.json). With --gen-shard i/n only this process's
    share of the missing continuations is generated (the rest is read from the caches, if there)."""
    from specpilot.engine.model_runner import eos_ids

    items, info = prompts.training_prompts(args.data_dir, args.sources, args.synthetic,
                                           args.max_prompts, args.seed, args.gsm8k_variants,
                                           args.prompts_file)
    rendered = prompts.render_many(tokenizer, [it["prompt"] for it in items])
    keep = [i for i, p in enumerate(rendered) if len(p) <= args.max_len - 2]
    info["prompts_too_long"] = len(items) - len(keep)
    items, rendered = [items[i] for i in keep], [rendered[i] for i in keep]
    eos = eos_ids(args.target, target.config)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    dtype = next(target.parameters()).dtype
    gen = dict(gen=_generator(args, target, eos, pad), max_new_tokens=args.max_new_tokens,
               batch_size=args.gen_batch_size, work_dir=args.work_dir, deadline=deadline,
               shard=args.gen_shard)
    key = data.settings_key(args.target, args.max_new_tokens, dtype)
    comps = data.generate_completions(jobs=[(p, 0) for p in rendered], key=key, **gen)
    samples, stats = data.build_samples(rendered, comps, items, args.max_len)
    info.update(cache_dir=os.path.abspath(args.work_dir), settings_key=key,
                gen_backend=args.gen_backend,
                max_new_tokens=args.max_new_tokens, max_len=args.max_len,
                eos_token_ids=list(eos), target_dtype=str(dtype), **stats)
    if args.samples_per_prompt > 1:  # extra sampled continuations, prompt-major order
        reps = args.samples_per_prompt - 1
        sampling = {"temperature": args.temperature, "top_p": args.top_p, "seed": args.seed}
        skey = data.settings_key(args.target, args.max_new_tokens, dtype, sampling)
        sjobs = [(p, k) for p in rendered for k in range(reps)]
        scomps = data.generate_completions(jobs=sjobs, key=skey, sampling=sampling, **gen)
        extra, sstats = data.build_samples([p for p, _ in sjobs], scomps,
                                           [it for it in items for _ in range(reps)], args.max_len)
        samples += extra
        info["sampled"] = {**sampling, "per_prompt": reps, "settings_key": skey, **sstats}
        for k in ("sequences", "completion_tokens", "total_tokens"):
            info[k] += sstats[k]
    h = hashlib.sha256()  # the resume check compares the whole data, in order
    for smp in samples:
        h.update(json.dumps(smp["ids"]).encode())
    info["data_key"] = h.hexdigest()[:16]
    return samples, info


def load_weights(drafter, weights: dict, grown: int = 0) -> None:
    """Loads resumed weights. With `grown` > 0 the drafter has that many layers more than the
    weights: they are appended after the loaded ones and start as the identity (their attention
    output and MLP down projections zeroed: each adds 0 to the residual stream), so the grown
    drafter computes exactly what the loaded one did and training starts from its accuracy."""
    dev = next(drafter.parameters()).device
    if not grown:
        drafter.load_state_dict({k: v.to(dev) for k, v in weights.items()})
        return
    missing, unexpected = drafter.load_state_dict({k: v.to(dev) for k, v in weights.items()},
                                                  strict=False)
    n_old = len(drafter.layers) - grown
    new = {f"layers.{i}." for i in range(n_old, len(drafter.layers))}
    if unexpected or any(not any(k.startswith(p) for p in new) for k in missing):
        raise ValueError(f"grown drafter does not match the resumed weights (missing "
                         f"{[k for k in missing if not any(k.startswith(p) for p in new)]}, "
                         f"unexpected {unexpected})")
    with torch.no_grad():
        for layer in list(drafter.layers)[n_old:]:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()


def _param_groups(drafter, weight_decay):
    decay = [p for p in drafter.parameters() if p.dim() >= 2]
    rest = [p for p in drafter.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def main(argv=None) -> int:
    t0 = time.monotonic()
    args = parse_args(argv)
    deadline = t0 + 60 * args.max_minutes if args.max_minutes else None
    from transformers import AutoTokenizer

    from specpilot.engine.model_runner import resolve_device

    device = resolve_device(args.device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.target)
    except (OSError, ValueError) as e:
        print(f"error: cannot load the tokenizer of --target {args.target}: {e}", file=sys.stderr)
        return 2
    if args.generate_only or args.gen_fraction == 0:  # (0: nothing is generated at all)
        gen_deadline = deadline
    else:
        gen_deadline = None if deadline is None else t0 + 60 * args.max_minutes * args.gen_fraction
    try:
        prompts.training_prompts(args.data_dir, args.sources, args.synthetic, 1)  # fail fast
        target = load_target(args.target, device)
        samples, data_info = prepare_data(args, target, tokenizer, gen_deadline)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.generate_only:
        print(f"generate-only: {data_info['sequences']} sequences available "
              f"({data_info['completion_tokens']} completion tokens) in {args.work_dir}")
        return 0
    if not samples:
        print("error: no usable training sequences (see the data stats above)", file=sys.stderr)
        return 2
    print(f"data: {data_info['sequences']} sequences, {data_info['completion_tokens']} "
          f"completion tokens ({data_info['prompts_by_source']}); "
          f"caches in {data_info['cache_dir']}")
    if args.repeat:
        try:
            samples = data.repeat_sources(samples, args.repeat)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        data_info["repeat"] = {"sources": args.repeat, "sequences_per_epoch": len(samples)}
        print(f"data: {args.repeat} repeated: {len(samples)} sequences per epoch")
    used = {t for s in samples for t in s["ids"]}
    res = checkpoint.load_resume(args.resume) if args.resume else None
    tc = target.config
    if res is not None:
        cfg, mask_info = res["cfg"], res["meta"].get("mask_token", {})
        print(f"resuming from {args.resume} ({res['kind']}); drafter flags come from its config")
        if args.grow_layers:
            if res["kind"] != "weights" or "layer_types" in cfg:
                print("error: --grow-layers needs --resume of an exported drafter (weights only, "
                      "no per-layer types)", file=sys.stderr)
                return 2
            cfg = {**cfg, "num_hidden_layers": cfg["num_hidden_layers"] + args.grow_layers}
    else:
        if args.mask_token_id is not None:
            mask, how = args.mask_token_id, "given by --mask-token-id"
            if not 0 <= mask < tc.vocab_size:
                print(f"error: --mask-token-id {mask} is outside the target vocabulary "
                      f"(size {tc.vocab_size})", file=sys.stderr)
                return 2
        else:
            mask, how = data.choose_mask_token(tokenizer, tc.vocab_size, used,
                                               target.get_input_embeddings().weight)
        cfg = drafter_config(tc, args.layers, args.block_size, mask, args.target_layer_ids,
                             args.intermediate_size)
        mask_info = {"id": mask, "token": tokenizer.convert_ids_to_tokens(mask)
                     if mask < len(tokenizer) else None, "how": how}
    mask_id = cfg["dflash_config"]["mask_token_id"]
    if mask_id in used:
        print(f"warning: mask token {mask_id} occurs in the training data", file=sys.stderr)
    bsz = cfg["dflash_config"]["block_size"]
    try:
        drafter = new_drafter(cfg, target, args.max_len + bsz, args.seed)
        if res is not None:
            load_weights(drafter, res["weights"], grown=args.grow_layers)
    except (ValueError, RuntimeError) as e:  # config/target mismatch, wrong tensors
        print(f"error: cannot build the drafter for this target: {e}", file=sys.stderr)
        return 2
    opt = torch.optim.AdamW(_param_groups(drafter, args.weight_decay), lr=args.lr,
                            betas=(0.9, 0.95))
    sampler = SequenceSampler(len(samples), args.seed)
    step, total = 0, args.steps or 0
    if res is not None and res["kind"] == "state":
        opt.load_state_dict(res["optimizer"])
        step, total = res["step"], args.steps or res["total_steps"]
        same = res.get("data_key") == data_info["data_key"] and \
            res["sampler"]["n"] == len(samples)  # a partly generated cache may have grown
        if same:
            sampler.load_state_dict(res["sampler"])
        else:
            print("warning: the data differs from the resumed run's; data order restarts",
                  file=sys.stderr)
    meta = {
        "format": "specpilot.train_drafter/1", "created": datetime.now(timezone.utc).isoformat(),
        "target": {"path": os.path.abspath(args.target), "architectures": tc.architectures,
                   "num_hidden_layers": tc.num_hidden_layers, "hidden_size": tc.hidden_size,
                   "vocab_size": tc.vocab_size},
        "data": data_info, "mask_token": mask_info,
        "drafter": {"layers": cfg["num_hidden_layers"], "block_size": bsz,
                    "target_layer_ids": cfg["dflash_config"]["target_layer_ids"],
                    "parameters": count_parameters(drafter)},
        "versions": {"torch": torch.__version__,
                     "transformers": __import__("transformers").__version__},
        "resumed_from": os.path.abspath(args.resume) if args.resume else None,
        "grown_layers": args.grow_layers or None,
    }
    print(f"drafter: {meta['drafter']}; mask token {mask_info}")
    exact = res is not None and res["kind"] == "state"  # continue the old log, else a new one
    return run_loop(args, target, drafter, opt, sampler, samples, cfg, meta, step, total,
                    deadline, device, t0, log_mode="a" if exact else "w")


PROFILE_AFTER = 20  # --profile-steps starts after these steps (warm-up, first allocations)


def _start_profiler(device):
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    prof = profile(activities=acts)
    prof.__enter__()
    return prof


def _profile_table(prof, device, steps: int, rows: int = 25) -> str:
    """The operators of the profiled steps, most self device time (CPU: host time) first."""
    prof.__exit__(None, None, None)
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return (f"profile of {steps} training steps (torch.profiler, sorted by {key}):\n"
            + prof.key_averages().table(sort_by=key, row_limit=rows))


def run_loop(args, target, drafter, opt, sampler, samples, cfg, meta, step, total, deadline,
             device, t0, log_mode="w") -> int:
    """AdamW steps from `step` until `total`, --stop-at-step or the deadline; saves state + export
    every --save-every and at the end. Appends one JSON line of metrics per step to
    <state-dir>/train_log.jsonl. Without a step count (total 0) the run is bounded by the deadline
    and the learning rate decays over the time left after warm-up: no step count is guessed
    from the first steps, which on a GPU are 10-20x slower than the steady state."""
    bsz, mask_id = cfg["dflash_config"]["block_size"], cfg["dflash_config"]["mask_token_id"]
    autocast = device.type == "cuda"
    os.makedirs(args.state_dir, exist_ok=True)
    log_path = os.path.join(args.state_dir, "train_log.jsonl")
    est_step, est_save, last, reason = None, 2.0, {}, "steps"  # seconds; est_save until measured
    slack = 0.0 if deadline is None else min(5.0, 0.02 * (deadline - t0))
    params = [p for p in drafter.parameters()]
    t_start = time.monotonic()
    by_time = not total and deadline is not None

    def save():
        nonlocal est_save
        ts = time.monotonic()
        run = {k: getattr(args, k) for k in ("batch_size", "blocks_per_seq", "gamma", "distill",
                                              "lr", "min_lr_ratio", "warmup", "schedule",
                                              "weight_decay", "grad_clip", "seed")}
        meta["training"] = {"step": step, "total_steps": total, "stop_reason": reason,
                            "elapsed_s": round(time.monotonic() - t0, 1), "last": last, **run}
        checkpoint.save_state(args.state_dir, drafter, opt, {
            "step": step, "total_steps": total, "sampler": sampler.state_dict(), "cfg": cfg,
            "meta": meta, "data_key": meta["data"]["data_key"]})
        checkpoint.save_export(args.out, drafter, cfg, meta, args.save_dtype)
        est_save = max(est_save if step == 0 else 0.0, time.monotonic() - ts)

    prof, prof_from = None, step + PROFILE_AFTER  # --profile-steps: steps [from, from + N)
    tty = sys.stderr.isatty()
    bar = tqdm(total=total or None, initial=step, desc="train", unit="step",
               mininterval=1 if tty else 30)
    drafter.train()
    with open(log_path, log_mode) as log:
        while True:
            if total and step >= total:
                reason = "steps"
                break
            if args.stop_at_step is not None and step >= args.stop_at_step:
                reason = "stop-at-step"
                break
            now = time.monotonic()
            if deadline is not None and est_step is not None and \
                    now + 1.5 * est_step + 2 * est_save + slack > deadline:
                reason = "time budget"
                break
            if args.profile_steps and step == prof_from:
                prof = _start_profiler(device)
            ts = time.monotonic()
            batch = make_batch(samples, sampler.next(args.batch_size), bsz, args.blocks_per_seq,
                               mask_id, sampler.gen).to(device)
            data_s = time.monotonic() - ts  # host time to build the batch (the GPU is idle:
            # the previous step's metrics were read back)
            warm = min(args.warmup, max(1, total // 10)) if total else args.warmup
            progress = None
            if by_time:
                span = deadline - t_start - 2 * est_save - slack
                progress = (ts - t_start) / span if span > 0 else 1.0
            lr = lr_at(step, total, args.lr, warm, args.schedule, args.min_lr_ratio, progress)
            for g in opt.param_groups:
                g["lr"] = lr
            loss, m = forward_loss(drafter, target, batch, args.gamma, autocast, args.distill)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = float(torch.nn.utils.clip_grad_norm_(params, args.grad_clip))
            opt.step()
            step += 1
            dt = time.monotonic() - ts
            est_step = dt if est_step is None or step <= 2 else 0.9 * est_step + 0.1 * dt
            last = {"step": step, "lr": lr, "grad_norm": round(gnorm, 4), **m,
                    "step_s": round(dt, 4), "data_s": round(data_s, 4),
                    "elapsed_s": round(time.monotonic() - t0, 2)}
            log.write(json.dumps(last) + "\n")
            bar.update(1)
            bar.set_postfix(loss=f"{m['loss']:.3f}", acc1=f"{m['acc1']:.2f}",
                            tau=f"{m['tau_est']:.2f}", refresh=False)
            if step % args.log_every == 0 or step == 1:
                log.flush()
                bar.write(f"step {step}/{total or '?'} loss {m['loss']:.4f} acc1 {m['acc1']:.3f} "
                          f"acc {m['acc']:.3f} tau_est {m['tau_est']:.2f} lr {lr:.2e} "
                          f"gnorm {gnorm:.2f} {dt:.3f}s/step (batch {data_s:.3f}s)")
            if prof is not None and step == prof_from + args.profile_steps:
                bar.write(_profile_table(prof, device, args.profile_steps))
                prof = None
            if step % args.save_every == 0:
                save()
    bar.close()
    if prof is not None:  # the run stopped inside the profiled steps
        bar.write(_profile_table(prof, device, step - prof_from))
    save()
    print(f"stopped: {reason} at step {step}/{total or '-'}; elapsed {time.monotonic() - t0:.0f}s; "
          f"drafter -> {args.out}; state -> {args.state_dir}")
    return 0

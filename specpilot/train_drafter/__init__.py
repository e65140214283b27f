"""Train a DFlash-format block drafter for a target (`python -m specpilot.train_drafter`).

The data is the target's own greedy output: training prompts (prompts.py documents the split:
gsm8k_test rows of the first half, mbpp task_ids 1-10 and 511-974, optional synthetic prompts;
never humaneval or math500) rendered with the chat template and continued greedily by the target
(transformers generate, batched; cached under --work-dir). Each step runs the frozen target over
a batch of sequences for the context features (hidden_states[id + 1] of target_layer_ids), draws
random anchor blocks [anchor, MASK x (B-1)] in the completions and trains the drafter to predict
tokens anchor+1..anchor+B-1 through the target's frozen embedding and lm_head (model.py).

Modules:
  prompts.py     the split and the held-out eval sets; synthetic.py  templated extra prompts
  data.py        generation + cache, mask-token choice, training sequences
  batching.py    data order and anchor blocks (resumable RNG state)
  model.py       drafter config, the batched dense-mask training forward, loss, LR schedule
  checkpoint.py  public DFlash export (config.json, model.safetensors, train_meta.json), state
  train.py       the CLI's main; cli.py  its flags
  evaluate.py    real acceptance length with the stock engine (`python -m
                 specpilot.train_drafter.evaluate`)
"""

"""What makes the toy's S5 answer a code-form needle: the levers of chapter 5's ladder
(chapter 5, "What would make S5 answer?"; was benchmarks/toy_code_needle_levers.py).

Chapter 5 scores RULER's three single-needle subtasks written as code (`nblib.evals.code_niah`)
on the S5 Constant trajectory (LCCP paper §5.1, Fig. 7). On the toy they score 0: asked
`magic_number_{key} =`, S5 writes a generic Python value. A 2-layer smeared-key model matches
one token back, and " =" is everywhere in a Python haystack, so its induction head spreads over
every assignment; the needle is one of many. Each lever changes the task's *form* only
(`code_niah.make_task`'s `haystack_form` and `key_form`; RULER's sizing, depths, values and
`string_match_all` stay), or the model (the trajectory point, Raw or Last4):

- haystack_form "comments": every haystack line a comment, "prose": comments without the
  lines holding an "=", so the needle is the only assignment;
- key_form "word": the key a single token, never assigned in the haystack, so the key and
  " =" together occur only in the needle.

For each (form, point, protocol) it records RULER's score (greedy decoding through the KV
cache, as chapter 5) and teacher-forced measures that show progress before a needle is
answered: the mean log-probability per token of the needle's value after the answer prefix,
its gain over the same prompt with the needle line removed (nats per token; 0: the model does
not use the needle), the share of prompts whose first value token is the model's argmax, the
share of value pieces that are the argmax given the true pieces before them, the share of
prompts where every piece is (teacher-forced: what greedy decoding needs, one piece at a time),
and the retrieval heads (App. D.3, Fig. 18; `attention_maps.retrieval_head_scores`): the best
head's score and the count above 0.1.
One JSON line per (form, length, point, protocol, task) goes to
data/probes/toy_code_needle_levers.jsonl. It reads the book's run store (chapter 4's
S5 trajectory must exist: run chapters 1-4 first).

The model lever, `--layers L`: S5 with L layers (the budget's width, heads and token counts),
its short stage and Constant trajectory trained into the store up to the largest point
(a run of its own identity; the book's S5 is untouched):

    python -m nblib.probes code_needle_levers --forms code:magic comments:magic prose:magic \\
        prose:word code:word --points 10 120 --samples 20
    python -m nblib.probes code_needle_levers --layers 4 --forms prose:word code:magic --points 10 30
    python -m nblib.probes code_needle_levers --budget-file data/probes/grid_designs/L.toml \\
        --forms code:magic:short code:magic --points 10 40 80 120   # a ladder design's S5

(`python -m nblib.probes.design_needles --budget-file F ...`, which wrote the earlier records of
ladder designs, runs the same.)

A form's optional third part is the value form (`code_niah`'s `value_form`: "ruler", RULER's
7-digit numbers and UUIDs, or "short", values of at most two pieces, generation stopped two
tokens past them); each record also scores the control, the prompt without its needle line.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.data import get_corpus, get_tokenizer
from nblib.evals import code_niah as CN
from nblib.evals import ruler as R
from nblib.lccp import experiments, grid
from nblib.lccp.merge import merge
from nblib.metrics.attention_maps import retrieval_head_scores
from nblib.probes import results
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run_many

RECORDS = ("toy_code_needle_levers.jsonl",)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes code_needle_levers", description=__doc__.splitlines()[0])
    add_budget_args(p, default="toy", help="the budget whose S5 trajectory is probed")
    p.add_argument("--scale", default="S5")
    p.add_argument("--forms", nargs="+", default=["code:magic", "comments:magic", "prose:magic", "code:word",
                                                   "prose:word"],
                   help="haystack_form:key_form pairs (nblib.evals.code_niah)")
    p.add_argument("--points", type=float, nargs="+", default=[10, 120], help="Dl/N points of the trajectory")
    p.add_argument("--protocols", nargs="+", default=["Raw", "Last4"], choices=["Raw", "Last4"])
    p.add_argument("--lengths", type=int, nargs="+", default=[0], help="prompt lengths (0: the LCCP context)")
    p.add_argument("--samples", type=int, default=20, help="prompts per subtask")
    p.add_argument("--layers", type=int, default=0,
                   help="train and probe the scale with this many layers (0: the budget's model, from the store)")
    results.add_probe_args(p, RECORDS, run_root="runs", threads=2, run_root_help="the run store (default: the book's)")
    return p


def main(argv=None, *, budget=None, budget_name: str | None = None) -> int:
    """Run the probe; `budget` (with `budget_name` for the records) replaces `--budget` and
    `--budget-file`: a budget file's, read by `python -m nblib.probes.design_needles`."""
    p = parser()
    argv, a = results.parse_probe_args(p, argv)
    b, budget_name = (budget, budget_name or budget.name) if budget is not None else budget_from_args(p, a)
    tok = get_tokenizer(b.tokenizer)
    hay = [d.text for d in get_corpus(b.corpus).split("eval")]
    store = RunStore(a.run_root)
    if a.layers:  # the model lever: another depth, trained here up to the largest point
        # a Constant trajectory's length is not part of its identity: train only to the last point
        b = dataclasses.replace(b.with_model(a.scale, n_layers=a.layers), s5_trajectory=max(a.points))
        get_or_run_many(store, experiments.trajectory_lineage(b, a.scale), workers=1,
                        desc=f"{a.scale} with {a.layers} layers")
    cfg = grid.long_trajectory(b, a.scale)
    if not store.run(cfg).is_complete():
        raise SystemExit(f"error: the {a.scale} trajectory ({cfg.hash}) is not in {a.run_root}; run chapters 1-4 first")
    run = store.run(cfg)
    layers = run.config.model["n_layers"]
    forms = []
    for f in a.forms:
        hf, kf, vf = (f.split(":") + ["ruler"])[:3] if f.count(":") in (1, 2) else (f, "", "")
        if hf not in CN.HAYSTACK_FORMS or kf not in CN.KEY_FORMS or vf not in CN.VALUE_FORMS:
            raise SystemExit(f"error: form {f!r}; allowed: haystack_form:key_form[:value_form] with haystack_form "
                             f"one of {', '.join(CN.HAYSTACK_FORMS)}, key_form one of {', '.join(CN.KEY_FORMS)} "
                             f"and value_form one of {', '.join(CN.VALUE_FORMS)}")
        forms.append((hf, kf, vf))
    lengths = [n or b.ruler_len or b.long_seq_len for n in a.lengths]
    for dl in a.points:
        steps = {"Raw": [experiments.step_at(run, dl)],
                 "Last4": experiments.last4_steps(run, dl, b.s5_last4_gap)}
        for protocol in a.protocols:
            s = steps[protocol]
            model = run.load_model(s[0]) if len(s) == 1 else run.load_model(
                state_dict=merge("lastM", [run.checkpoint(x).weights for x in s], iterations=s))
            model.eval()
            for length in lengths:
                for hf, kf, vf in forms:
                    for task in CN.TASKS:
                        t0 = time.time()
                        samples = CN.make_task(task, tok, length, a.samples, seed=0, haystack=hay,
                                               haystack_form=hf, key_form=kf, value_form=vf)
                        m = CN.needle_measures(model, tok, samples, b.ruler_max_new)
                        heads = retrieval_head_scores(model, tok, samples).score
                        example = R.predict(model, tok, samples[len(samples) // 2:][:1], b.ruler_max_new)[0]
                        rec = {"budget": budget_name, "scale": a.scale, "layers": layers, "run": run.hash, "dl": dl,
                               "protocol": protocol, "length": length, "haystack_form": hf, "key_form": kf,
                               "value_form": vf, "task": task, "n": len(samples), "score": m["score"],
                               "control_score": m["control_score"], "needle_gain": m["needle_gain"],
                               "first_token_hit": m["first_hit"], "value_piece_hit": m["piece_hit"],
                               "whole_value_hit": m["whole_hit"], "retrieval_best": float(heads.max()),
                               "retrieval_heads": int((heads > 0.1).sum()), "example": example[:40],
                               "wall_s": round(time.time() - t0, 1)}
                        results.append_record(a.out, rec, module=__spec__.name, argv=argv)
                        print(f"Dl {dl:g} {protocol:5s} {length} {hf}:{kf}:{vf} {task}: score {rec['score']:.0f} "
                              f"(control {rec['control_score']:.0f}), gain {rec['needle_gain']:+.2f} nats/token, "
                              f"piece hit {rec['value_piece_hit']:.2f}, e.g. {rec['example']!r}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

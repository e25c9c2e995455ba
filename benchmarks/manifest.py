"""The result files kept under benchmarks/results/: each with the one command that regenerates it
(from the repository root, on a machine with ../shared/data) and what it shows.

docs/results.md (generated: `python -m benchmarks.results_page`) lists them with their commands, and
so does benchmarks/README.md; tests/test_results_page.py fails when a file under benchmarks/results/
is in no entry, when an entry's file is missing, or when there are more than MAX_FILES. Adding a
result is one entry here (benchmarks/README.md, top). Heavy commands run under the CPU lock.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_FILES = 80
LOCK = "flock /tmp/superbloom-cpu.lock"


@dataclass(frozen=True)
class Result:
    files: tuple[str, ...]  # paths under benchmarks/results/, e.g. ("quality.json", "quality.md")
    command: str            # the one command that regenerates them
    shows: str              # what a reader finds there, in a few words


def files_of(result: Result, root: Path) -> list[Path]:
    """The entry's files that exist under `root` (benchmarks/results/)."""
    return [root / f for f in result.files if (root / f).exists()]


PY = ".venv/bin/python -m"
HARNESS = f"{LOCK} {PY} benchmarks.quality.harness"
SETS = "wikispeedia,fb15k237,beauty,lastfm,toys,video,wn18rr,bert4rec_beauty"
SEQUENCE = f"{LOCK} {PY} benchmarks.sequence.run"
SEQ_RECIPE = ("--head hybrid --item-term auto --samples 2048 --init cooccurrence --steps 8000 --eval-every 1000 "
              "--lr 5e-3 --dropout 0.2 --batch-size 128 --baselines popularity,cooccurrence,ease")

RESULT_FILES: list[Result] = [
    # ---------------------------------------------------------------- sets: quality against the baselines
    Result(("quality.json", "quality.md"),
           f"{HARNESS} --datasets {SETS} --recipes hybrid,default --steps 2000 --split test --threads 1 "
           "--baselines popularity,cooccurrence,ease",
           "the hybrid head, its network alone, its term alone and the pure model against popularity, "
           "co-occurrence and EASE on every set dataset (test split; the rows accumulate, one per dataset x "
           "split x method x recipe x steps)"),
    Result(("anytime_bar.json", "anytime_bar.md"),
           f"{LOCK} {PY} benchmarks.quality.anytime_bar --threads 1,2 --seeds 0,1,2",
           "`train --time-budget 30` on the embedded Wikispeedia links (the term validated before the first step) "
           "against EASE on the same test examples, one thread and two, three seeds"),
    Result(("quality_members_test.json", "quality_members_test.md"),
           f"{HARNESS} --datasets wikispeedia,fb15k237,beauty,lastfm,toys,wn18rr,bert4rec_beauty --recipes hybrid_x6 "
           "--steps 2000 --split test --threads 1 --baselines ease --name quality_members_test",
           "`train --members 6`: six networks and one term in one model folder, beside their networks alone, "
           "their term alone and EASE"),
    Result(("quality_decomposition.json",),
           f"{HARNESS} --datasets {SETS},epinions --recipes hybrid --steps 2000 --split test --threads 1 "
           "--baselines popularity,cooccurrence,ease --name quality_decomposition && "
           f"{HARNESS} --datasets wn18rr,bert4rec_beauty --recipes hybrid_ease --steps 2000 --split test --threads 1 "
           "--baselines ease,cooccurrence --name quality_decomposition",
           "one network's hybrid on every set dataset: the hybrid, its network alone and its term alone beside "
           "the baselines, paired (WN18RR and BERT4Rec Beauty also with EASE's term, which fits there now)"),
    Result(("quality_attributes_test.json",),
           f"{HARNESS} --datasets beauty-attributes,toys-attributes,lastfm-attributes --recipes hybrid --steps 2000 "
           "--split test --threads 1 --baselines popularity,cooccurrence,ease --name quality_attributes_test",
           "item-attribute sets, where the network alone beats EASE"),
    Result(("quality_user_baselines.json", "quality_user_baselines.md"),
           f"{LOCK} {PY} benchmarks.quality.user_baselines --datasets {SETS} --name quality_user_baselines",
           "ALS and item2vec with settings chosen on the val split, against `train --members 6`"),
    Result(("quality_tuned_baselines.json", "quality_tuned_baselines.md"),
           f"{LOCK} {PY} benchmarks.quality.tuned_baselines --datasets wikispeedia,fb15k237,lastfm,wn18rr "
           "--name quality_tuned_baselines",
           "ALS and item2vec as `eval` runs them (settings chosen on held-out training sets) against their "
           "defaults (`als-untuned`, `item2vec-untuned`), paired, on the quality tables' test examples"),
    Result(("export_check.json", "export_check.md"), f"{PY} benchmarks.export_check",
           "the exported network (TorchScript) against PyTorch: its scores and the decoded top-10 lists"),
    # ---------------------------------------------------------------- sequences
    Result(("sequence.json", "sequence.md"),
           f"{SEQUENCE} --datasets beauty,toys,bert4rec_beauty {SEQ_RECIPE} --time-budget 1500",
           "leave-one-out next-item recommendation: the hybrid, its parts, the baselines and published numbers "
           "(every setting tried, one row each)"),
    Result(("sequence_decomposition.json",),
           f"{SEQUENCE} --terms-only --datasets lastfm,beauty,toys,bert4rec_beauty "
           "--baselines popularity,cooccurrence,ease --name sequence_decomposition",
           "the transition term alone (no training) on the sequence datasets"),
    Result(("sequence_members.json",),
           f"{SEQUENCE} --datasets beauty,toys {SEQ_RECIPE} --time-budget 1500 --members 2 "
           "--member-proposals log_uniform,uniform --name sequence_members",
           "two networks of two proposals (log-uniform, uniform) in one model"),
    Result(("sequence_wikispeedia_paths.json", "sequence_wikispeedia_paths_back.json",
            "sequence_wikispeedia_paths_terms.json"),
           f"{SEQUENCE} --datasets wikispeedia-paths,wikispeedia-paths-back --head hybrid --item-term auto --samples 2048 "
           "--init cooccurrence --steps 3000 --eval-every 500 --baselines popularity,cooccurrence,ease "
           f"--name sequence_wikispeedia_paths && {PY} benchmarks.sequence.back_clicks && {SEQUENCE} --terms-only "
           "--datasets wikispeedia-paths --baselines popularity,cooccurrence,ease --name sequence_wikispeedia_paths_terms",
           "Wikispeedia's navigation paths, with the back click as an id and resolved to its page"),
    # ---------------------------------------------------------------- millions of ids
    Result(("scale/terms.json", "scale/terms.md"),
           f"{LOCK} bash benchmarks/scale/terms_runs.sh text-sets",
           "the closed-form item-item terms alone (local EASE, the cosine, SANSA) at 1,005,296 real ids, settings "
           "chosen on validation, paired intervals, fit time and memory"),
    Result(("scale/text_sets_anytime_long.json", "scale/text_sets_anytime_long.md", "scale/text_sets_anytime_long.png"),
           f"{LOCK} {PY} benchmarks.scale.time_to_quality runs/term/data/text-sets --work W --budgets 0,60,120,900 "
           "--threads 1, then --report --name text_sets_anytime_long (W: a hard-link copy of the bar's work folder)",
           "the bar's default recipe resumed to 1,500 steps (900 s budget): BEST stays the step-0 term, the network "
           "alone learns on validation but the hybrid never passes local EASE"),
    Result(("scale/text_sets_anytime.json", "scale/text_sets_anytime.md", "scale/text_sets_anytime.png"),
           f"{LOCK} bash benchmarks/scale/text_sets_bar.sh",
           "the bar at 1,005,296 real ids: the default recipe (local-EASE term first, then the network) against "
           "local EASE, SANSA and popularity on the same examples, one thread, with its network and term alone"),
    Result(("scale/text_sets_time_to_quality.json", "scale/text_sets_time_to_quality.md",
            "scale/text_sets_time_to_quality.png"),
           f"{PY} benchmarks.scale.text_sets_prepare && {LOCK} {PY} benchmarks.scale.baselines /tmp/sb/textsets_data "
           "--eval-sets 1000 --baselines popularity,cooc-count,cooc-idf,cooc-cosine,item2vec,als --ranks-dir "
           "/tmp/sb/tq/text/baselines --results /tmp/sb/tq/text --name text_sets_baselines && "
           f"{LOCK} {PY} benchmarks.scale.time_to_quality /tmp/sb/textsets_data --work /tmp/sb/tq/text "
           "--budgets 900,2700,4500 --threads 1 && "
           f"{PY} benchmarks.scale.time_to_quality /tmp/sb/textsets_data --work /tmp/sb/tq/text --report "
           "--name text_sets_time_to_quality --baselines-json /tmp/sb/tq/text/text_sets_baselines.json",
           "1,005,296 real ids (text paragraphs as sets): the `millions` preset's hybrid against counting, "
           "item2vec and ALS as training time grows"),
    Result(("scale/synth5m_time_to_quality_weightings.json", "scale/synth5m_time_to_quality_weightings.png"),
           f"{LOCK} {PY} benchmarks.scale.e2e --work /tmp/sb/e2e_tq --stages synth,prepare && "
           f"{LOCK} {PY} benchmarks.scale.baselines /tmp/sb/e2e_tq/data --eval-sets 1000 --baselines "
           "popularity,cooc-count,cooc-idf,cooc-cosine,item2vec --ranks-dir /tmp/sb/tq/synth_w/baselines --results "
           f"/tmp/sb/tq/synth_w --name synth5m_baselines && {LOCK} {PY} benchmarks.scale.time_to_quality /tmp/sb/e2e_tq/data --work "
           f"/tmp/sb/tq/synth_w --budgets 1500,2700 --threads 1 && {PY} benchmarks.scale.time_to_quality "
           "/tmp/sb/e2e_tq/data --work /tmp/sb/tq/synth_w --report --name synth5m_time_to_quality_weightings "
           "--baselines-json /tmp/sb/tq/synth_w/synth5m_baselines.json",
           "5,139,571 SYNTHETIC ids (planted topics): the same, the term's weighting chosen on validation"),
    Result(("scale/e2e7.json", "scale/e2e7.md", "scale/e2e7_ablation.json"),
           f"{LOCK} {PY} benchmarks.scale.e2e --work /tmp/e2e7 --stages synth,prepare,train,eval,oracle,serve "
           "--time-budget 2400 --coherent 2 --init cooccurrence --threads 1 --name e2e7",
           "Table 2 at the paper's vocabulary size (5.1M SYNTHETIC ids, equal parameters and wall clock), and "
           "what makes it learn (the ablation of coherent maps and the co-occurrence start)"),
    Result(("scale/prepare_462m.json",),
           f"{LOCK} {PY} benchmarks.scale.e2e --work runs/e2e462 --stages synth,prepare --links 462000000 "
           "--memory-limit 8GB --name prepare_462m",
           "out-of-core `prepare --memory-limit 8GB` on 462M SYNTHETIC links"),
    Result(("scale/serve_hashed_hybrid_text_sets.json",),
           f"{LOCK} {PY} benchmarks.load --model /tmp/sb/tq/text/model --data /tmp/sb/textsets_data --duration 10 "
           "--results /tmp/sb/load && mv /tmp/sb/load/load.json benchmarks/results/scale/serve_hashed_hybrid_text_sets.json",
           "serving the hashed hybrid at 1M ids"),
    Result(("scale/step.json", "scale/step.md"),
           f"{LOCK} {PY} benchmarks.scale.step_bench --code before=/tmp/step/before-python --code after=.venv/bin/python "
           f"--steps 4 && {LOCK} {PY} benchmarks.scale.step_bench --code after=.venv/bin/python --steps 4 --set samples=4096 "
           "--ids 1005296,5139571",
           "one training step at 283K, 1M and 5.1M ids by part, before and after the row-sparse step (and the "
           "sampled softmax over hashed tokens): sets/s, useful FLOPs against the matmul peak, memory (the before "
           "code: the step_bench docstring)"),
    Result(("scale/step_profile.json", "scale/step_profile.md"),
           f"{LOCK} {PY} benchmarks.scale.step_bench --profile --steps 3 --code before=/tmp/step/before-python "
           "--code after=.venv/bin/python --ids 5139571",
           "what one training step at 5.1M ids spends its time on, by operator, before and after"),
    Result(("scale/step_quality_synth283k.json",),
           f"{PY} superbloom synth --ids 283000 --links 3000000 --topics 1000 --format edges --out /tmp/step/q/l.tsv && "
           f"{PY} superbloom prepare /tmp/step/q/l.tsv --out /tmp/step/q/data283k && {LOCK} {PY} "
           "benchmarks.scale.step_quality --data /tmp/step/q/data283k --name synth283k --steps 300 --eval-every 100 "
           "--parallel 2 --max-sets 500 --variant before=/tmp/step/before-python:--item-term,cooccurrence,--val-fraction,"
           "0.005 --variant after=.venv/bin/python:--item-term,cooccurrence,--val-fraction,0.005",
           "the row-sparse step against the dense one at equal sets seen (283K SYNTHETIC ids, the large preset): "
           "validation curves and paired test differences"),
    Result(("scale/step_quality_wikispeedia_sampled.json",),
           f"{PY} superbloom prepare superbloom/data/wikispeedia_links.tsv.gz --out /tmp/step/q/wiki && {LOCK} {PY} "
           "benchmarks.scale.step_quality --data /tmp/step/q/wiki --name wikispeedia_sampled --steps 200 --eval-every 100 "
           "--parallel 2 --max-sets 1000 --variant before=/tmp/step/before-python:--samples,512 "
           "--variant after=.venv/bin/python:--samples,512",
           "the row-sparse step (lazy AdamW on the rows read) against the dense one at equal sets seen, paired "
           "runs on the embedded data with sampled negatives: validation curves and paired test differences "
           "(`--report` writes their tables as markdown)"),
    Result(("scale/synth5m_anytime.json",),
           f"{LOCK} bash benchmarks/scale/synth5m_bar.sh",
           "the bar at 5,139,571 SYNTHETIC ids: the default recipe's first answer (its local-EASE term) and budget 0 "
           "against popularity and counting on the same examples, one thread: fails (858 s, 0.005 against 4.6 s, "
           "0.080); the script's --report also writes its table and figure (.md, .png)"),
    Result(("scale/step_quality_wikispeedia_dense_small.json",),
           f"{PY} superbloom prepare superbloom/data/wikispeedia_links.tsv.gz --out /tmp/sq/wiki && {LOCK} {PY} "
           "benchmarks.scale.step_quality --data /tmp/sq/wiki --name wikispeedia_dense_small --steps 8000 "
           "--eval-every 1000 --parallel 2 --variant lazy_s0=TRIAL:--sparse-from,0 --variant "
           "dense_s0=TRIAL:--sparse-from,16384 --variant lazy_s1=TRIAL:--sparse-from,0,--seed,1 --variant "
           "dense_s1=TRIAL:--sparse-from,16384,--seed,1 (TRIAL: the Python of a checkout with the trial setting "
           "--sparse-from, which lost and was removed)",
           "the dense AdamW update of a small table (the small preset's 4,604-row embedding) against the lazy "
           "row-sparse one, paired runs of 8,000 steps, two seeds: the same speed, lower test rec@10, so removed"),
    # ---------------------------------------------------------------- speed and memory
    Result(("prepare.json",), f"{LOCK} {PY} benchmarks.prepare_bench",
           "`prepare` on 100M synthetic links over 5.3M ids: wall time and peak memory"),
    Result(("train.json",), f"{LOCK} {PY} benchmarks.train_bench",
           "training throughput and model FLOP utilisation"),
    Result(("decode_latency.json", "decode_profile.json"), f"{LOCK} {PY} benchmarks.decode_latency",
           "Algorithm 1: approximate, exact and exhaustive top-10 from 10K to 5.3M ids (decode_profile: the "
           "trained model's output profile it transplants)"),
    Result(("heads_train.json",), f"{LOCK} {PY} benchmarks.heads_train",
           "training step time and memory per output head, 10K to 5.3M ids"),
    Result(("load.json", "load.md"),
           "git worktree add --detach /tmp/serve_before \"$(git log -1 --format=%h --grep='^serve: uvicorn run through')~1\" && "
           "git worktree add --detach /tmp/serve_main \"$(git log -1 --format=%h --grep='^serve: what loading left alive')~1\" && "
           f"{LOCK} {PY} benchmarks.load --train-seconds 240 --before /tmp/serve_before --before /tmp/serve_main "
           "--labels before,main,after --duration 15",
           "the HTTP service under load (requests/s, latency, errors): the server before the guards' rewrite, "
           "after it, and with the garbage collector's freeze and plain answers, in alternating rounds"),
    Result(("extend.json",), f"{LOCK} {PY} benchmarks.extend_bench --steps 400 --finetune-steps 200 --threads 1",
           "`extend`: ids added to a trained model, before and after a fine-tune"),
    Result(("architecture/demo_before_after.md",), ".venv/bin/superbloom demo",
           "`superbloom demo`'s report and predictions"),
    # ---------------------------------------------------------------- the paper's tables (benchmarks/PAPER.md)
    *[Result((f"paper/{name}.json", f"paper/{name}.png"), f"{LOCK} {PY} benchmarks.paper.{name}", shows)
      for name, shows in (("t2_heads", "the paper's Table 2: superbloom against full, sampled and hierarchical softmax"),
                          ("t3_layers", "Table 3: one layer against several, hashed and unhashed"),
                          ("t6_beam", "Table 6: beam width against recall and certification"),
                          ("t7_coherent", "Table 7: random against coherent hash maps"),
                          ("f3_frequency", "Figure 3: recall by target frequency"))],
    # ---------------------------------------------------------------- text (experimental)
    Result(("text/table5.json",),
           ".venv/bin/superbloom prepare-text ../shared/data/wikispeedia/plaintext_articles.tar.xz ../shared/data/gcide/gcide.dict.dz ../shared/data/brown_corpus/brown.tar.xz --out runs/data_text && "
           f"{LOCK} {PY} benchmarks.text.table5_bench "
           "--configs hash8-d128,baseline-d32,hash40-d128,sampled-d32 --steps 100 --time-cap 120 --name table5",
           "the text masked LM at 1,000,001 ids: step time and memory of hashed and unhashed heads"),
    Result(("text/table5_s8_hash40.json", "text/table5_s8_baseline_d6.json", "text/table5_s8_paired.json"),
           f"{LOCK} {PY} benchmarks.text.table5_bench --workdir runs/table5_s8 --configs hash40-d128 --steps 100000 "
           f"--time-cap 2400 --name table5_s8_hash40 && {LOCK} {PY} benchmarks.text.table5_bench --workdir "
           "runs/table5_s8 --configs baseline-d6 --steps 100000 --time-cap 2400 --name table5_s8_baseline_d6 && "
           f"{PY} benchmarks.text.paired --models runs/table5_s8/hash40-d128,runs/table5_s8/baseline-d6,"
           "runs/table5_s8/sampled-d6 --name table5_s8_paired",
           "Tables 4/5 at equal parameters (~7M), 2,400 s each: hashed against unhashed, paired"),
    Result(("text/table5_s9_paired.json",),
           f"{LOCK} {PY} benchmarks.text.table5_bench --workdir runs/table5_s9 --configs hash40-d128,baseline-d6 "
           "--steps 100000 --time-cap 9600 --resume --name table5_s9 && "
           f"{PY} benchmarks.text.paired --models runs/table5_s9/hash40-d128,runs/table5_s9/baseline-d6,"
           "runs/table5_s8/hash40-d128 --name table5_s9_paired",
           "the same pair at 9,600 s each (resumed from the 2,400 s models, copied to runs/table5_s9)"),
    Result(("text/table5_s11_hash8-d128.json", "text/table5_s11_baseline-d32.json", "text/table5_s11_paired.json"),
           f"{LOCK} {PY} benchmarks.text.table5_bench --workdir runs/table5_s11 --configs hash8-d128 --steps 100000 "
           f"--time-cap 5400 --name table5_s11_hash8-d128 && {LOCK} {PY} benchmarks.text.table5_bench --workdir "
           "runs/table5_s11 --configs baseline-d32 --steps 100000 --time-cap 5400 --name table5_s11_baseline-d32 && "
           f"{PY} benchmarks.text.paired --models runs/table5_s11/hash8-d128,runs/table5_s11/baseline-d32,"
           "runs/table5_s10/hash40-d128 --name table5_s11_paired",
           "the larger pair (~33M parameters), 5,400 s each"),
    Result(("text/text_bigram_head_s17_1500.json", "text/text_bigram_head_s17_1500.md",
            "text/text_bigram_head_s17_4500.json"),
           f"{LOCK} {PY} benchmarks.text.bigram_head --model runs/table5_s16_b16/hash40-d128 --name text_bigram_head_s17_1500",
           "the text preset's model: the hashed hybrid with the bigram term (1,500 s and 4,500 s networks)"),
    Result(("text/text_fusion_s16_b16_4500.json",),
           f"{LOCK} {PY} benchmarks.text.fusion_bench --model runs/table5_s16_b16_long/hash40-d128 "
           "--name text_fusion_s16_b16_4500",
           "the network beside the bigram count (late fusion), weights chosen on validation"),
    # ---------------------------------------------------------------- set embeddings
    Result(("setembed/embed.json", "setembed/baselines.json"),
           f"{LOCK} {PY} benchmarks.setembed.baselines && {LOCK} {PY} benchmarks.setembed.embed_bench --view links "
           f"&& {LOCK} {PY} benchmarks.setembed.embed_bench --view words",
           "set embeddings of Wikispeedia pages against TF-IDF and logistic regression"),
]

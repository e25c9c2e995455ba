"""The model card: a README.md in a model directory, rendered from its JSON files alone.

    write_card("runs/wiki/model")     # every trainer calls it at the end; `superbloom card MODEL` again
    record_evaluation("runs/wiki/model", result)   # `superbloom eval` calls it: eval.json, then the card

What it says, from what the directory holds (nothing else is read, so it can be regenerated at any
time and says the same): the kind (storage/kinds.py), the data summary (config.json's "data": ids,
sets, mean set size, the dataset folder's name, never a path), the recipe and its preset
(config.json), the training summary (metrics.jsonl's last record, the BEST checkpoint's
validation), the evaluation beside its baselines when MODEL/eval.json holds one (the JSON of
`superbloom eval MODEL DATA --json`; `superbloom eval` and `superbloom demo` write it), the parameter
count, how to load and serve it, and its limitations.

The card opens with a metadata block (YAML front matter, as model hubs read it: `card_metadata`): the
library, the kind, the data (name, ids, sets), the preset and head, the parameter count, the best
validation, and the evaluation's recall@10 of every method (the model, its parts, the baselines) with
its 95% bootstrap interval and the paired difference of the model minus each, with its interval.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..heads.base import Validation
from ..storage.checkpoint import inference_checkpoint
from ..storage.files import atomic_path, load_json
from ..storage.guarded import record as written_by_us
from ..storage.kinds import ID_MODELS, KINDS, infer_kind
from ..storage.loading import LoadError, read_json_object, text_lines

CARD = "README.md"
EVAL = "eval.json"  # `superbloom eval MODEL DATA --json > MODEL/eval.json` puts an evaluation on the card

# kind -> what a user of it must know (the limitations every kind shares come first)
LIMITS = {
    "set-model": ["Ids outside its vocabulary are unknown: a context of only unknown ids is an error; "
                  "`superbloom extend` adds new ids without retraining."],
    "sequence-model": ["Ids outside its vocabulary are unknown; the order of a context is read (its newest id last)."],
    "text-model": ["Words outside its vocabulary read as [UNK]; a text longer than its positions is an error."],
    "set-embedding": ["`similar` answers with training sets (its index), not with ids; a set of only unknown "
                      "ids is an error."],
    "text-classifier": ["It knows only the labels it was trained on, and reads the first max_words words of a text."],
    "ensemble": ["Ids outside its vocabulary are unknown; every answer costs one network pass per member.",
                 "Its folder holds its members (member-i): move or copy the folder whole."],
}
# kind -> the Python calls the card shows after sb.load
EXAMPLES = {"set-model": "model.predict([ID, ...], k=10); model.similar(ID, k=10)",
            "sequence-model": "model.predict([OLDEST_ID, ..., NEWEST_ID], k=10)",
            "text-model": "model.predict([TOKEN, ...], k=10)   # blanks: superbloom.inference.fill.Filler",
            "set-embedding": "model.similar([ID, ...], k=10); model.classify([ID, ...])",
            "text-classifier": "model.predict(\"some text\", k=3)",
            "ensemble": "model.predict([ID, ...], k=10); model.info()[\"members\"]"}
COMMON_LIMITS = ["Trained on one dataset only: it knows that data's ids and patterns and nothing else.",
                 "Scores rank answers; they are not calibrated probabilities."]


def write_card(model_dir: str | Path) -> Path:
    """MODEL_DIR/README.md from the directory's files (replaced if there, in one step)."""
    path = Path(model_dir) / CARD
    text = render_card(model_dir)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def record_evaluation(model_dir: str | Path, result) -> Path:
    """An evaluation (evaluate.EvalResult, or compare.Comparison) into MODEL_DIR/eval.json, as `eval --json`
    prints it plus "intervals": recall@10 of every method with its 95% bootstrap interval and, under
    "paired", the model minus each (the protocol's groups resampled) -> the card, written again."""
    from ..evaluation.compare import paired
    from ..evaluation.metrics import hits_at, mean_ci

    res = getattr(result, "result", result)  # a Comparison's own evaluation
    name = f"{res.entry.recall}@10"
    names = {"model": "this model", **{k: res.labels.get(k, k) for k in res.variants}}
    intervals, diffs = {}, {}
    for method, ranks in res.ranks.items():
        value, lo, hi = mean_ci(hits_at(ranks, 10), res.groups)
        label = names.get(method, method)
        intervals[label] = {"value": value, "lo": lo, "hi": hi}
        if method != "model":
            diffs[label] = paired(res.ranks["model"], ranks, res.groups, res.entry.recall)[name]
    record = result.to_dict() | {"intervals": {"protocol": res.protocol, "metric": name, "methods": intervals,
                                               "paired": diffs}}
    with atomic_path(Path(model_dir) / EVAL) as tmp:  # in the order `eval --json` prints it
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    written_by_us(model_dir, EVAL)  # listed in the folder's marker: replaced with the model (storage/guarded.py)
    return write_card(model_dir)


def card_metadata(model_dir: str | Path) -> dict:
    """The card's metadata block (module docstring), from the directory's files."""
    d = Path(model_dir)
    config = read_json_object(d / "config.json", "the model's settings")
    kind = infer_kind(config, str(d / "config.json"))
    data = (config.get("data") or {}) if kind != "ensemble" else \
        (read_json_object(d / config["members"][0] / "config.json", "the first member's settings").get("data") or {})
    train = config.get("train") or {}
    meta = {"library_name": "superbloom", "tags": ["superbloom", kind], "kind": kind,
            "superbloom_version": (config.get("versions") or {}).get("superbloom"),
            "dataset": (config.get("dataset") or {}).get("name") or (Path(train["data"]).name if train.get("data")
                                                                      else None),
            "ids": data.get("ids"), "sets": data.get("sets"), "split": data.get("split"),
            "preset": (config.get("preset") or {}).get("name"), "head": (config.get("head") or {}).get("name"),
            "parameters": config.get("parameters")}
    meta = {k: v for k, v in meta.items() if v is not None}
    first = d / config["members"][0] if kind == "ensemble" else d
    ckpt = inference_checkpoint(first) if (first / "checkpoints").is_dir() else None
    best = load_json(ckpt / "state.json").get("best") if ckpt and (ckpt / "state.json").is_file() else None
    if best:
        meta["validation"] = {k: _num(x) for k, x in best.items() if isinstance(x, (int, float))
                              and not isinstance(x, bool)}
    if (d / EVAL).is_file():
        res = read_json_object(d / EVAL, "an evaluation (superbloom eval MODEL DATA --json)")
        iv = res.get("intervals")
        ev = {"protocol": iv.get("protocol") if isinstance(iv, dict) else None, "examples": res.get("examples")}
        if isinstance(iv, dict):
            ev["metric"] = iv.get("metric")
            ev["methods"] = {m: {k: _num(x) for k, x in v.items()} for m, v in (iv.get("methods") or {}).items()}
            ev["paired"] = {m: {k: _num(x) for k, x in v.items()} for m, v in (iv.get("paired") or {}).items()}
        meta["evaluation"] = {k: v for k, v in ev.items() if v is not None}
    return meta


def _num(x):
    return round(float(x), 4) if isinstance(x, float) else x


def front_matter(meta: dict) -> str:
    """`meta` as a YAML block between --- lines: mappings in block style, a mapping of scalars and
    every list in flow style, every scalar as JSON writes it (a JSON value is a YAML one)."""
    def lines(obj: dict, indent: str) -> list[str]:
        out = []
        for key, value in obj.items():
            k = key if key.replace("_", "").isalnum() else json.dumps(key)
            if isinstance(value, dict) and any(isinstance(v, (dict, list)) for v in value.values()):
                out += [f"{indent}{k}:", *lines(value, indent + "  ")]
            elif isinstance(value, dict):
                out.append(f"{indent}{k}: {{" + ", ".join(f"{json.dumps(a)}: {json.dumps(b)}"
                                                          for a, b in value.items()) + "}")
            else:
                out.append(f"{indent}{k}: {json.dumps(value)}")
        return out

    return "\n".join(["---", *lines(meta, ""), "---"])


def render_card(model_dir: str | Path) -> str:
    """The card's text. A file of the directory that is broken, or a field edited into another shape, is a
    LoadError naming it (the card reads a dozen optional fields of config.json, eval.json and metrics.jsonl)."""
    d = Path(model_dir)
    config = read_json_object(d / "config.json", "the model's settings")
    try:
        return _render(d, config)
    except (KeyError, TypeError, AttributeError) as e:
        raise LoadError(f"{d / 'config.json'} (or eval.json beside it): a field is not as superbloom wrote it "
                        f"({type(e).__name__}: {e}); was it edited by hand?") from None


def _render(d: Path, config: dict) -> str:
    kind = KINDS[infer_kind(config, str(d / "config.json"))]
    train = config.get("train") or {}
    name = ((config.get("dataset") or {}).get("name") or train.get("data")
            or ", ".join(Path(c).name for c in train.get("corpus") or ()) or "its data")
    v = config.get("versions") or {}
    recipe, training = (config, _training(d)) if kind.name != "ensemble" else _ensemble(d, config)
    lines = [front_matter(card_metadata(d)), "", f"# Model card: {kind.what}", "",
             f"Kind `{kind.name}`, trained on `{name}` by `{kind.trainer}`"
             + (f" (superbloom {v['superbloom']}, torch {v['torch']})" if "superbloom" in v else "")
             + ". Written from this directory's files; `superbloom card MODEL` writes it again.", "",
             "## Data", "", *_data(config), "", "## Recipe", "", *_recipe(recipe), "",
             "## Training", "", *training, "", "## Evaluation", "", *_evaluation(d, config, kind.name), "",
             "## Use", "", *_use(d, kind), "", "## Limitations", "",
             *[f"- {x}" for x in LIMITS.get(kind.name, []) + COMMON_LIMITS], ""]
    return "\n".join(lines)


def _data(config: dict) -> list[str]:
    data = config.get("data") or {}
    out = []
    if "input" in data:
        out.append(f"- input: `{data['input']}`" + (f" ({data['format']})" if "format" in data else ""))
    if "ids" in data:
        out.append(f"- {data['ids']:,} ids; {data.get('sets', 0):,} sets, split `{data.get('split', 'sets')}`")
    for part in ("train", "test", "valid"):
        p = data.get(part)
        if isinstance(p, dict) and "sets" in p:
            out.append(f"- {part}: {p['sets']:,} sets, {p.get('links', 0):,} links"
                       + (f", mean set size {p['mean_set_size']:g}" if "mean_set_size" in p else ""))
    if "documents" in data:  # a text classifier's documents (textclass/docs.py)
        out.append(f"- {data['documents']:,} documents ({data.get('kept', 0):,} kept), "
                   f"{data.get('words', 0):,} words, vocabulary {data.get('vocabulary', 0):,}")
        if data.get("class_counts"):
            out.append("- classes: " + ", ".join(f"{k} {n:,}" for k, n in data["class_counts"].items()))
    if config.get("labels") and "documents" not in data:
        out.append(f"- labels: {len(config['labels'])} ({', '.join(map(str, config['labels'][:10]))}"
                   f"{', ...' if len(config['labels']) > 10 else ''})")
    return out or ["- (no data summary in config.json)"]


def _recipe(config: dict) -> list[str]:
    train = config.get("train") or {}
    preset = config.get("preset")
    out = [f"- preset: `{preset['name']}` (chosen by {preset.get('chosen_by', '?')}"
           + (f"; settings given kept: {', '.join(preset['overridden'])}" if preset.get("overridden") else "") + ")"
           if preset else "- preset: none (the library's defaults and the settings given)"]
    if "objective" in train:
        out.append(f"- objective: `{train['objective']}`")
    if "head" in config:
        out.append(f"- head: `{config['head']['name']}`")
    if "embed" in config:
        out.append(f"- set embedding: objective `{config['embed'].get('objective')}`")
    if "textclass" in config:
        t = config["textclass"]
        out.append(f"- classifier: d={t.get('d')}, {t.get('heads')} heads, {t.get('attention')} attention, "
                   f"{t.get('embedding')} embedding")
    m = config.get("model")
    if m:
        out.append(f"- network: {m['layers']} layer{'s' if m['layers'] != 1 else ''}, d={m['d']}, {m['heads']} heads, "
                   f"d_ff={m['d_ff']}"
                   + (f", {m['positions']} positions" if m.get("positions") else "")
                   + (", causal" if m.get("causal") else ""))
    h = config.get("hash")
    if h:
        out.append(f"- hashing: alpha={h['alpha']}, m={h['m']}" + (" (unhashed)" if h["alpha"] == 1 and h["m"] == 1
                                                                   else ""))
    optim = train.get("optim") or config.get("optim")
    if optim:
        out.append(f"- optimizer: {optim['name']}" + (f", lr {optim['lr']:g}" if optim.get("lr") else ""))
    if "train" in train and "epochs" in train["train"]:  # a text classifier's TrainTextConfig
        out.append(f"- {train['train']['epochs']} epochs, batch {train['train'].get('batch_size')}")
    loop = train.get("loop") or {}
    if loop:
        stop = [f"{loop['steps']:,} steps" if loop.get("steps") else "",
                f"{loop['time_budget']:g} s" if loop.get("time_budget") else ""]
        out.append(f"- loop: batch {loop.get('batch_size')}, stop at " + (" or ".join(s for s in stop if s) or "?"))
    if "parameters" in config:
        out.append(f"- parameters: {config['parameters']:,}")
    return out


def _ensemble(d: Path, config: dict) -> tuple[dict, list[str]]:
    """An ensemble folder (members.py): the recipe of its first member (every member's but the seed and
    the proposal), and its members and chosen weight as the training record."""
    members = config["members"]
    first = read_json_object(d / members[0] / "config.json", "the first member's settings")
    runs = config.get("runs") or []
    drawn = [r["proposal"] for r in runs if "proposal" in r]  # train --member-proposals
    lines = [f"- {len(members)} members ({', '.join(members)}), seeds "
             f"{', '.join(str(r.get('seed')) for r in runs) or '?'}"
             + (f", sampled negatives from the proposals {', '.join(drawn)}" if drawn else "")
             + f", the same validation sets; {config.get('seconds', 0):,.0f} s in all",
             f"- item-item weight {config.get('item_mix', 0):g}"
             + (" (validation rec@10 " + ", ".join(f"{w}: {r:.4f}" for w, r in sorted(config["mix_validation"].items(), key=lambda x: float(x[0])))
                + ")"
                if config.get("mix_validation") else " (no member has an item-item term)")]
    for m in members:
        lines += [f"- `{m}`:", *(f"  {x}" for x in _training(d / m))]
    return dict(first, preset=config.get("preset"), parameters=config.get("parameters")), lines


def _training(d: Path) -> list[str]:
    records = _records(d / "metrics.jsonl") if (d / "metrics.jsonl").is_file() else []
    if not records:
        return ["- no training record (metrics.jsonl)"]
    last = records[-1]
    out = [f"- {last.get('step', 0):,} steps in {last.get('seconds', 0):,.0f} s"]
    ckpt = inference_checkpoint(d)
    best = load_json(ckpt / "state.json").get("best") if ckpt and (ckpt / "state.json").is_file() else None
    if best:
        v = Validation.read(best)
        shown = ", ".join(f"{k} {x:.4f}" for k, x in v.scores.items() if isinstance(x, (int, float)))
        out.append(f"- best validation (checkpoint `{ckpt.name}`, which `sb.load` reads): {shown} "
                   f"at step {best.get('step')}")
        parts = [f"{Validation.LABELS.get(part, part)} {k} {x:.4f}" for part, metrics in v.parts.items()
                 for k, x in metrics.items() if isinstance(x, (int, float))]
        settings = [f"{k} {x:g}" if isinstance(x, (int, float)) else f"{k} {x}"
                    for k, x in sorted(v.settings.items(), reverse=True)]
        if parts:
            out.append(f"- its parts there: {', '.join(parts)}" + (f" ({', '.join(settings)})" if settings else ""))
    return out


def _records(path: Path) -> list[dict]:
    """metrics.jsonl's records; a last line a kill cut short is left out (as a resume drops it), any other
    line that is not a JSON object is a LoadError naming the file and line."""
    lines = [(n, x) for n, x in enumerate(text_lines(path, "metrics records, one JSON object per line"), 1)
             if x.strip()]
    records = []
    for i, (n, line) in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            if i == len(lines) - 1:
                break
            raise LoadError(f"{path}:{n}: not a JSON object; expected a metrics record (was the file edited?)")
        records.append(record)
    return records


def _evaluation(d: Path, config: dict, kind: str) -> list[str]:
    held = [h["eval"] for h in config.get("history") or () if "eval" in h]  # a text classifier's test documents
    if held:
        return [f"On its {held[-1].get('examples', 0):,} held-out documents after the last epoch: "
                + ", ".join(f"{k} {x:.4f}" for k, x in held[-1].items() if k != "examples" and isinstance(x, float))]
    if not (d / EVAL).is_file():
        return ["Not evaluated here. `superbloom eval MODEL DATA` puts the evaluation, beside its baselines, "
                "on this card (MODEL/eval.json)."
                if kind in ID_MODELS else "Its validation above is its evaluation."]
    res = read_json_object(d / EVAL, "an evaluation (superbloom eval MODEL DATA --json)")
    baselines = res.get("baselines") or {}
    metrics = [k for k, x in res.items() if isinstance(x, (int, float)) and not isinstance(x, bool)
               and all(k in b for b in baselines.values()) and k not in ("examples",)] if baselines else \
        [k for k in ("rec@1", "rec@10", "rec@20", "hr@10", "mrr", "ndcg@10") if k in res]
    rows = [("this model", res)] + [(k.replace("_", " "), x) for k, x in res.items()  # its variants (network only)
                                     if isinstance(x, dict) and k not in ("baselines", "protocol", "head", "decode")
                                     and all(m in x for m in metrics)] + list(baselines.items())
    n = res.get("examples")
    iv = res.get("intervals") if isinstance(res.get("intervals"), dict) else {}
    ci, diff = iv.get("methods") or {}, iv.get("paired") or {}
    extra = [f"{iv['metric']} 95% interval", "this model - it"] if ci else []
    out = [f"On {f'{n:,}' if isinstance(n, int) else 'its'} held-out examples (`superbloom eval`; the protocol's "
           "settings in eval.json):", "",
           "| method | " + " | ".join(metrics + extra) + " |", "|---" * (len(metrics) + len(extra) + 1) + "|"]
    for name, r in rows:
        cells = [f"{r[m]:.4f}" for m in metrics]
        if ci:
            c, p = ci.get(name), diff.get(name)
            cells += [f"[{c['lo']:.4f}, {c['hi']:.4f}]" if c else "",
                      f"{p['diff']:+.4f} [{p['lo']:+.4f}, {p['hi']:+.4f}]" if p else ""]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    if ci:
        out += ["", "Intervals: 95% bootstrap over the protocol's groups (held-out sets, users); the difference "
                "is paired: both methods on the same resampled examples."]
    return out


def _use(d: Path, kind) -> list[str]:
    return ["```python", "import superbloom as sb", f"model = sb.load(\"{d.name}\")   # this directory",
            "model.info()", EXAMPLES[kind.name], "```", "",
            f"From the command line: {kind.use} (MODEL: this directory)."]

